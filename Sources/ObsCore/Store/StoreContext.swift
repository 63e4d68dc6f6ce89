/// What expressions evaluated by the store read: each key read (missing keys included) becomes a
/// dependency of the node evaluating (`engine.activeSub`), if any.
struct StoreContext: ExpressionContext {
    unowned let store: Store

    func value(ofKey name: String) throws(ObsError) -> JSONValue? {
        try read(name, tracked: true)
    }

    func peek(key name: String) throws(ObsError) -> JSONValue? {
        try read(name, tracked: false)
    }

    func exists(key name: String) -> Bool {
        guard let node = store.node(name, create: engine.activeSub != nil) else { return false }
        if let reader = engine.activeSub { engine.link(node.ref, reader) }
        return node.exists
    }

    func match(pattern: String) throws(ObsError) -> [(key: String, value: JSONValue)] {
        let parsed = try KeyPattern(pattern)
        let names: [String]
        if let reader = engine.activeSub {
            let entry = store.patterns.entry(for: parsed)
            if entry.matchNode == nil { store.attachMatchNode(to: entry) }
            engine.link(entry.matchNode!.ref, reader)
            names = entry.members!.sorted(by: JSONValue.utf8Precedes)
        } else {
            names = store.keyNames(matching: parsed)
        }
        var result: [(key: String, value: JSONValue)] = []
        result.reserveCapacity(names.count)
        for name in names {
            if let value = try read(name, tracked: true) { result.append((name, value)) }
        }
        return result
    }

    var now: Double { store.clock.now }

    private func read(_ name: String, tracked: Bool) throws(ObsError) -> JSONValue? {
        let reader = tracked ? engine.activeSub : nil
        guard let node = lookup(name, reader: reader) else { return nil }
        if node.flags.contains(.running) {
            if let reader { engine.link(node.ref, reader) }
            throw ObsError(.cycle, "cycle: '\(name)' depends on itself")
        }
        node.settle()
        if let reader { engine.link(node.ref, reader) }
        switch node.content {
        case .missing: return nil
        case .value(let value): return value
        case .error(let error): throw error
        }
    }

    /// The node of a key being read. A computed usually reads its keys in the same order as last
    /// time, so the link after the last one read already names it: no hashing.
    private func lookup(_ name: String, reader: Unmanaged<ReactiveNode>?) -> KeyNode? {
        if let reader {
            let tail = reader.depsTail
            if let next = tail != nil ? tail!.nextDep : reader.deps,
                let key = next.dep.takeUnretainedValue() as? KeyNode, key.name == name
            {
                return key
            }
        }
        return store.node(name, create: reader != nil)
    }
}
