/// Committed transactions as records of bytes: what the daemon's storage appends to its commit
/// log (a frame of a log file, CommitLogFile.swift; or a row of SQLiteStorage+Log.swift) for a
/// group of commits, instead of writing every changed row.
/// Appending a change is a copy of its name and its value's encoding, on the loop thread; the rows
/// are written later, once per key however often it changed, by a checkpoint.
///
/// A record is a kind (one byte), the length of its body (four bytes) and the body; numbers are
/// little endian. A transaction is a `transaction` record followed by its changes:
///
///     1 transaction        u64 rev
///     2 put key            u64 rev, u64 created_rev, u64 version, u8 flags (1: expires),
///                          [f64 expires_at], u16 name length, name, value (the rest: canonical JSON)
///     3 delete key         name
///     4 put definition     u64 created_rev, u16 name length, name, expression (the rest)
///     5 delete definition  name
///     6 put binding        u8 flags (1: two-way, 2: map, 4: unmap), u16 from length, u16 to length,
///                          u32 map length, from, to, map, unmap (the rest)
///     7 delete binding     target
///
/// Replaying records in order leaves what committing the transactions in order left: for every key,
/// definition and binding, the last put or delete counts.
public enum CommitLog {
    enum Kind: UInt8 {
        case transaction = 1, putKey, deleteKey, putDefinition, deleteDefinition, putBinding, deleteBinding
    }

    /// A log that does not read as records.
    public struct Damage: Error {
        public var offset: Int
        /// Which of `replayNewestFirst`'s groups.
        public var group = 0
    }

    /// Appends the records of `transaction`.
    public static func append(_ transaction: StoredTransaction, to buffer: inout ByteBuffer) {
        record(.transaction, to: &buffer) { $0.appendNumber(transaction.rev) }
        for name in transaction.deletedKeys { record(.deleteKey, to: &buffer) { $0.appendText(name) } }
        for key in transaction.putKeys {
            record(.putKey, to: &buffer) { body in
                body.appendNumber(key.rev)
                body.appendNumber(key.createdRev)
                body.appendNumber(key.version)
                body.append(key.expiresAt == nil ? 0 : 1)
                if let expiresAt = key.expiresAt { body.appendNumber(expiresAt.bitPattern) }
                body.appendNumber(UInt16(key.key.utf8.count))
                body.appendText(key.key)
                key.value.encode(into: &body)
            }
        }
        for name in transaction.deletedDefinitions { record(.deleteDefinition, to: &buffer) { $0.appendText(name) } }
        for definition in transaction.putDefinitions {
            record(.putDefinition, to: &buffer) { body in
                body.appendNumber(definition.createdRev)
                body.appendNumber(UInt16(definition.key.utf8.count))
                body.appendText(definition.key)
                body.appendText(definition.expr)
            }
        }
        for target in transaction.deletedBindings { record(.deleteBinding, to: &buffer) { $0.appendText(target) } }
        for binding in transaction.putBindings {
            record(.putBinding, to: &buffer) { body in
                body.append((binding.twoWay ? 1 : 0) | (binding.map != nil ? 2 : 0) | (binding.unmap != nil ? 4 : 0))
                body.appendNumber(UInt16(binding.from.utf8.count))
                body.appendNumber(UInt16(binding.to.utf8.count))
                body.appendNumber(UInt32(binding.map?.utf8.count ?? 0))
                body.appendText(binding.from)
                body.appendText(binding.to)
                body.appendText(binding.map ?? "")
                body.appendText(binding.unmap ?? "")
            }
        }
    }

    /// Appends the records of a transaction that puts one key, from its name and its value's
    /// encoding (the hot path's: nothing decoded, nothing allocated).
    public static func appendKey(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, rev: UInt64, createdRev: UInt64,
                          version: UInt64, to buffer: inout ByteBuffer) {
        record(.transaction, to: &buffer) { $0.appendNumber(rev) }
        record(.putKey, to: &buffer) { body in
            body.appendNumber(rev)
            body.appendNumber(createdRev)
            body.appendNumber(version)
            body.append(0)
            body.appendNumber(UInt16(name.count))
            body.append(name)
            body.append(value)
        }
    }

    /// Replays `records` onto `state`: the state committing them in order leaves. Transactions at
    /// revision `after` or older are skipped (a log file replayed over rows that a checkpoint
    /// already brought past it). Returns the revision of the last transaction read (0: none);
    /// throws where a record does not read (a damaged log).
    @discardableResult
    public static func replay(_ records: UnsafeRawBufferPointer, onto state: inout Replay, after: UInt64 = 0) throws(Damage) -> UInt64 {
        var offset = 0
        var last: UInt64 = 0
        var skipping = false
        while offset < records.count {
            guard records.count - offset >= 5, let kind = Kind(rawValue: records[offset]) else { throw Damage(offset: offset) }
            let length = Int(records.loadUnaligned(fromByteOffset: offset + 1, as: UInt32.self).littleEndian)
            guard records.count - offset - 5 >= length else { throw Damage(offset: offset) }
            var body = Reader(bytes: UnsafeRawBufferPointer(rebasing: records[offset + 5..<offset + 5 + length]))
            if kind == .transaction {
                guard let rev = try? body.number(UInt64.self) else { throw Damage(offset: offset) }
                last = rev
                skipping = rev <= after
                if !skipping { state.rev = rev }
            } else if !skipping {
                guard (try? body.apply(kind, to: &state)) != nil else { throw Damage(offset: offset) }
            }
            offset += 5 + length
        }
        return last
    }

    /// Replays `groups` (each the records of a group of commits, and the revision its last
    /// transaction has) onto `state` as `replay` would, newest record first: only the last record
    /// naming a key, definition or binding is decoded, the others are read as far as their names.
    /// So a checkpoint of many commits to few names costs little more than reading the names (the
    /// daemon's checkpoint of a closed log file). Throws where a record does not read, or where a
    /// group's transactions do not end at its revision (`Damage.group` says which group).
    public static func replayNewestFirst(_ groups: [(records: UnsafeRawBufferPointer, rev: UInt64)], onto state: inout Replay,
                                         after: UInt64) throws(Damage) {
        let (changes, rev) = try changes(of: groups, after: after)
        if let rev { state.rev = rev }
        try forEachLast(of: changes, in: groups) { change, bytes throws(Damage) in
            var body = Reader(bytes: bytes)
            guard (try? body.apply(change.kind, to: &state)) != nil else { throw Damage(offset: change.body.lowerBound - 5, group: change.group) }
        }
    }

    /// A change record of one of `groups`: which group, its kind, where its body is.
    struct Change {
        var group: Int
        var kind: Kind
        var body: Range<Int>
    }

    /// The change records of `groups`' transactions after `after`, oldest first, and the revision
    /// of the newest of those transactions (nil: none). Throws where a record does not read, or
    /// where a group's transactions do not end at its revision.
    static func changes(of groups: [(records: UnsafeRawBufferPointer, rev: UInt64)], after: UInt64) throws(Damage) -> ([Change], UInt64?) {
        var changes: [Change] = []
        var newest: UInt64?
        for (index, group) in groups.enumerated() {
            let records = group.records
            var offset = 0
            var last: UInt64 = 0
            var skipping = false
            while offset < records.count {
                guard records.count - offset >= 5, let kind = Kind(rawValue: records[offset]) else { throw Damage(offset: offset, group: index) }
                let length = Int(records.loadUnaligned(fromByteOffset: offset + 1, as: UInt32.self).littleEndian)
                guard records.count - offset - 5 >= length else { throw Damage(offset: offset, group: index) }
                let body = offset + 5..<offset + 5 + length
                if kind == .transaction {
                    guard length >= 8 else { throw Damage(offset: offset, group: index) }
                    last = UInt64(littleEndian: records.loadUnaligned(fromByteOffset: body.lowerBound, as: UInt64.self))
                    skipping = last <= after
                    if !skipping { newest = last }
                } else if !skipping {
                    changes.append(Change(group: index, kind: kind, body: body))
                }
                offset = body.upperBound
            }
            guard last == group.rev else { throw Damage(offset: offset, group: index) }
        }
        return (changes, newest)
    }

    /// Calls `body` with each of `changes` (oldest first) that is the last naming its key,
    /// definition or binding, and its body's bytes, newest first. Only names are read.
    static func forEachLast(of changes: [Change], in groups: [(records: UnsafeRawBufferPointer, rev: UInt64)],
                            _ body: (Change, UnsafeRawBufferPointer) throws(Damage) -> Void) throws(Damage) {
        // Newest first: the first record naming something is the last that does.
        var seenKeys = Set<String>(), seenDefinitions = Set<String>(), seenBindings = Set<String>()
        for change in changes.reversed() {
            let bytes = UnsafeRawBufferPointer(rebasing: groups[change.group].records[change.body])
            var reader = Reader(bytes: bytes)
            guard let name = try? reader.name(change.kind) else { throw Damage(offset: change.body.lowerBound - 5, group: change.group) }
            let first: Bool
            switch change.kind {
            case .putKey, .deleteKey: first = seenKeys.insert(name).inserted
            case .putDefinition, .deleteDefinition: first = seenDefinitions.insert(name).inserted
            case .putBinding, .deleteBinding, .transaction: first = seenBindings.insert(name).inserted
            }
            if first { try body(change, bytes) }
        }
    }

    /// The rows replayed so far by name: each put (a row) or deleted (nil) by the last record that
    /// names it, on top of a stored state (load) or of nothing (a checkpoint, which writes what
    /// changed).
    public struct Replay {
        var rev: UInt64
        var keys: [String: StoredKey?] = [:]
        var definitions: [String: StoredDefinition?] = [:]
        var bindings: [String: StoredBinding?] = [:]

        public init(_ state: StoredState = StoredState()) {
            rev = state.rev
            for key in state.keys { keys[key.key] = key }
            for definition in state.definitions { definitions[definition.key] = definition }
            for binding in state.bindings { bindings[binding.to] = binding }
        }

        /// The state, each list sorted by name (as a storage loads it).
        public var state: StoredState {
            StoredState(rev: rev, keys: keys.values.compactMap { $0 }.sorted { $0.key < $1.key },
                        definitions: definitions.values.compactMap { $0 }.sorted { $0.key < $1.key },
                        bindings: bindings.values.compactMap { $0 }.sorted { $0.to < $1.to })
        }

        /// What changed, as one transaction: the rows to write and to delete.
        public var transaction: StoredTransaction {
            var transaction = StoredTransaction(rev: rev)
            for (name, key) in keys {
                if let key { transaction.putKeys.append(key) } else { transaction.deletedKeys.append(name) }
            }
            for (name, definition) in definitions {
                if let definition { transaction.putDefinitions.append(definition) } else { transaction.deletedDefinitions.append(name) }
            }
            for (target, binding) in bindings {
                if let binding { transaction.putBindings.append(binding) } else { transaction.deletedBindings.append(target) }
            }
            return transaction
        }
    }

    private static func record(_ kind: Kind, to buffer: inout ByteBuffer, _ body: (inout ByteBuffer) -> Void) {
        buffer.append(kind.rawValue)
        let lengthAt = buffer.count
        buffer.appendNumber(UInt32(0))
        body(&buffer)
        let length = UInt32(buffer.count - lengthAt - 4)
        buffer.base!.storeBytes(of: length.littleEndian, toByteOffset: lengthAt, as: UInt32.self)
    }

    /// A record's body, read from its start.
    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var position = 0

        struct Short: Error {}

        mutating func number<T: FixedWidthInteger>(_ type: T.Type) throws(Short) -> T {
            guard bytes.count - position >= MemoryLayout<T>.size else { throw Short() }
            defer { position += MemoryLayout<T>.size }
            return T(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: T.self))
        }

        mutating func text(_ count: Int) throws(Short) -> String {
            guard count >= 0, bytes.count - position >= count else { throw Short() }
            defer { position += count }
            return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[position..<position + count]), as: UTF8.self)
        }

        mutating func rest() -> String { (try? text(bytes.count - position)) ?? "" }

        mutating func skip(_ count: Int) throws(Short) {
            guard bytes.count - position >= count else { throw Short() }
            position += count
        }

        /// The name a change record is about: a key's, a definition's, a binding's target.
        mutating func name(_ kind: Kind) throws(Short) -> String {
            switch kind {
            case .transaction:
                throw Short()
            case .putKey:
                try skip(24)
                let expires = try number(UInt8.self) & 1 != 0
                if expires { try skip(8) }
                return try text(Int(try number(UInt16.self)))
            case .putDefinition:
                try skip(8)
                return try text(Int(try number(UInt16.self)))
            case .putBinding:
                try skip(1)
                let fromLength = Int(try number(UInt16.self)), toLength = Int(try number(UInt16.self))
                try skip(4 + fromLength)
                return try text(toLength)
            case .deleteKey, .deleteDefinition, .deleteBinding:
                return rest()
            }
        }

        mutating func apply(_ kind: Kind, to state: inout Replay) throws(Short) {
            switch kind {
            case .transaction:
                state.rev = try number(UInt64.self)
            case .putKey:
                let rev = try number(UInt64.self), createdRev = try number(UInt64.self), version = try number(UInt64.self)
                let expires = try number(UInt8.self) & 1 != 0
                let expiresAt = expires ? Double(bitPattern: try number(UInt64.self)) : nil
                let name = try text(Int(try number(UInt16.self)))
                guard let value = try? JSONValue.parse(UnsafeRawBufferPointer(rebasing: bytes[position...])) else { throw Short() }
                state.keys[name] = .some(StoredKey(key: name, value: value, rev: rev, createdRev: createdRev, version: version,
                                                   expiresAt: expiresAt))
            case .deleteKey:
                state.keys[rest()] = .some(nil)
            case .putDefinition:
                let createdRev = try number(UInt64.self)
                let name = try text(Int(try number(UInt16.self)))
                state.definitions[name] = .some(StoredDefinition(key: name, expr: rest(), createdRev: createdRev))
            case .deleteDefinition:
                state.definitions[rest()] = .some(nil)
            case .putBinding:
                let flags = try number(UInt8.self)
                let fromLength = Int(try number(UInt16.self)), toLength = Int(try number(UInt16.self))
                let mapLength = Int(try number(UInt32.self))
                let from = try text(fromLength), to = try text(toLength), map = try text(mapLength), unmap = rest()
                state.bindings[to] = .some(StoredBinding(from: from, to: to, map: flags & 2 != 0 ? map : nil, twoWay: flags & 1 != 0,
                                                         unmap: flags & 4 != 0 ? unmap : nil))
            case .deleteBinding:
                state.bindings[rest()] = .some(nil)
            }
        }
    }
}

extension ByteBuffer {
    fileprivate mutating func appendNumber<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { append($0) }
    }

    fileprivate mutating func appendText(_ text: String) {
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }
}
