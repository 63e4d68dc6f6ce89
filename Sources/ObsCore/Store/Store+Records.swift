/// Keys as the key table holds them: a plain value key is a `KeyRecord`, anything the engine takes
/// part in a `KeyNode`. A record becomes a node when a transaction or the engine needs one
/// (`node`, `existing`: promotion), and a node becomes a record again at the end of a transaction
/// that leaves it plain (`sweep`: demotion). Reads that need no node see either through `KeyView`.
extension Store {
    // MARK: Nodes

    /// The node of `name`; with `create`, a new node for a missing key (a `placeholder` when it is
    /// made for a reader rather than a writer: `tick()` forgets it once nothing reads it). A plain
    /// key's record becomes a node.
    func node(_ name: String, create: Bool, placeholder: Bool = true) -> KeyNode? {
        let hash = KeyTable.hash(name)
        var text = name
        let slot = text.withUTF8 { keys.find(UnsafeRawBufferPointer($0), hash: hash) }
        if let slot {
            switch keys.entry(at: slot) {
            case .node(let node): return node
            case .record(let record): return promote(record, name: name, slot: slot, hash: hash)
            }
        }
        guard create else { return nil }
        let node = KeyNode(name: name, store: self)
        keys.insert(.node(node), hash: hash)
        if placeholder { placeholders.append(name) }
        return node
    }

    /// The node of an existing key.
    func existing(_ name: String) -> KeyNode? {
        guard let node = node(name, create: false), node.exists else { return nil }
        return node
    }

    /// Whether `node` is the table's node of its name (a node swept away, or demoted, is not).
    func isCurrent(_ node: KeyNode) -> Bool {
        guard let slot = slot(of: node.name), case .node(let found) = keys.entry(at: slot) else { return false }
        return found === node
    }

    private func slot(of name: String) -> Int? {
        var name = name
        return name.withUTF8 { name in
            let bytes = UnsafeRawBufferPointer(name)
            return keys.find(bytes, hash: KeyTable.hash(bytes))
        }
    }

    /// The state of an existing key, without making it a node.
    func view(_ name: String) -> KeyView? {
        guard let slot = slot(of: name) else { return nil }
        switch keys.entry(at: slot) {
        case .node(let node): return node.exists ? .node(node) : nil
        case .record(let record): return .record(record)
        }
    }

    /// Every name in the table: existing keys, and the missing keys something reads.
    func allNames() -> [String] {
        var names: [String] = []
        names.reserveCapacity(keys.count)
        keys.forEach { entry in
            switch entry {
            case .node(let node): names.append(node.name)
            case .record(let record): names.append(String(decoding: record.name, as: UTF8.self))
            }
        }
        return names
    }

    /// Loads a plain key as a record (start-up).
    func loadPlain(_ key: StoredKey) {
        scratch.removeAll(keepingCapacityUpTo: 1 << 16)
        key.value.encode(into: &scratch)
        var name = key.key
        name.withUTF8 { name in
            let bytes = UnsafeRawBufferPointer(name)
            let hash = KeyTable.hash(bytes)
            if let slot = keys.find(bytes, hash: hash) {
                // A stored key listed twice: the last one counts, as with the nodes before.
                if case .record(let record) = keys.entry(at: slot) { record.free() }
                keys.remove(at: slot)
                keyCount -= 1
            }
            keys.insert(.record(KeyRecord.make(name: bytes, value: scratch.bytes, nonASCII: KeyRecord.hasNonASCII(scratch.bytes),
                                               rev: key.rev, createdRev: key.createdRev, version: key.version)), hash: hash)
        }
        keyCount += 1
    }

    /// Whether `name` is a missing key's node (a placeholder).
    func isPlaceholder(_ name: String) -> Bool {
        guard let slot = slot(of: name), case .node(let node) = keys.entry(at: slot) else { return false }
        return !node.exists
    }

    /// Forgets a placeholder that nothing reads; whether it was.
    func forgetIfUnread(_ name: String) -> Bool {
        guard let slot = slot(of: name), case .node(let node) = keys.entry(at: slot), !node.exists, !node.hasSubscribers else { return false }
        keys.remove(at: slot)
        return true
    }

    // MARK: Promotion and demotion

    /// The record's key as a node, in its place in the table.
    private func promote(_ record: KeyRecord, name: String, slot: Int, hash: Int) -> KeyNode {
        let node = KeyNode(name: name, store: self)
        // Decoding what the store encoded cannot fail.
        let value = (try? JSONValue.parse(record.value)) ?? .null
        node.kind = .value
        node.content = .value(value)
        node.committed = node.content
        node.lastGood = value
        node.rev = record.rev
        node.createdRev = record.createdRev
        node.version = record.version
        keys.replace(at: slot, with: .node(node), hash: hash)
        record.free()
        current?.promoted.append(node)
        return node
    }

    /// Makes `node` a record again when nothing needs it to be a node: a value key that nothing
    /// reads through the engine (no computed, binding or `match()` subscribed), with no TTL, no
    /// owner and no binding into or out of it.
    func demoteIfPlain(_ node: KeyNode) {
        guard node.kind == .value, !node.isComputed, !node.flags.contains(.eager), !node.hasSubscribers,
              node.expiresAt == nil, node.owner == nil, !node.forced, bindings.isEmpty || bindings[node.name] == nil,
              case .value(let value) = node.content, node.committed == node.content,
              let slot = slot(of: node.name), case .node(let found) = keys.entry(at: slot), found === node else { return }
        scratch.removeAll(keepingCapacityUpTo: 1 << 16)
        value.encode(into: &scratch)
        var name = node.name
        let record = name.withUTF8 { name in
            KeyRecord.make(name: UnsafeRawBufferPointer(name), value: scratch.bytes, nonASCII: KeyRecord.hasNonASCII(scratch.bytes),
                           rev: node.rev, createdRev: node.createdRev, version: node.version)
        }
        keys.replace(at: slot, with: .record(record), hash: KeyTable.hash(record.name))
    }

    /// At the end of a transaction: forgets the nodes of missing keys it touched that nothing
    /// reads any more, and makes the plain keys it touched or promoted records again.
    func sweep(_ transaction: Transaction) {
        transaction.touched.forEachGuaranteed { sweep($0) }
        transaction.promoted.forEachGuaranteed { sweep($0) }
    }

    private func sweep(_ node: KeyNode) {
        node.before.forget()
        guard let kind = node.kind else { return forgetIfUnused(node) }
        // (Only a value key can become a record: a computed, as most keys swept in a transaction
        // that ran computeds, is not even looked at.)
        if kind == .value { demoteIfPlain(node) }
    }

    /// The node of a missing key that the transaction touched: forgotten if nothing reads it.
    private func forgetIfUnused(_ node: KeyNode) {
        guard !node.hasSubscribers, let slot = slot(of: node.name), case .node(let found) = keys.entry(at: slot),
              found === node else { return }
        keys.remove(at: slot)
    }
}

/// A key as reads see it: a record, or a node (settled by the reader when it needs its value).
enum KeyView {
    case record(KeyRecord)
    case node(KeyNode)

    var kind: KeyKind {
        switch self {
        case .record: .value
        case .node(let node): node.kind ?? .value
        }
    }

    /// A node's content as it is now (settle it first), a record's value decoded.
    var content: KeyContent {
        switch self {
        case .record(let record): .value((try? JSONValue.parse(record.value)) ?? .null)
        case .node(let node): node.content
        }
    }

    var rev: UInt64 {
        switch self {
        case .record(let record): record.rev
        case .node(let node): node.rev
        }
    }

    var createdRev: UInt64 {
        switch self {
        case .record(let record): record.createdRev
        case .node(let node): node.createdRev
        }
    }

    var version: UInt64 {
        switch self {
        case .record(let record): record.version
        case .node(let node): node.version
        }
    }

    var expiresAt: Double? { node?.expiresAt }
    var owner: UInt64? { node?.owner }

    var node: KeyNode? {
        if case .node(let node) = self { return node }
        return nil
    }

    /// Brings a computed up to date (a record is always).
    func settle() { node?.settle() }
}
