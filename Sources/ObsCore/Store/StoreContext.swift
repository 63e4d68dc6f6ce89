/// What expressions evaluated by the store read: each key read (missing keys included) becomes a
/// dependency of the evaluation under way (`Engine.track`), if any.
struct StoreContext: ExpressionContext {
    /// Made for one evaluation, by the store itself: it outlives it.
    unowned(unsafe) let store: Store
    /// The engine, reached once for the evaluation: each read of the global `engine` is a call
    /// (its lazy initialisation's check), and a key read used it four times. (Unretained, and
    /// used as it is: a strong reference taken from it would be a retain and a release.)
    private let engineReference: Unmanaged<Engine>

    init(store: Store) {
        self.store = store
        engineReference = .passUnretained(engine)
    }

    func value(ofKey name: String) throws(ObsError) -> JSONValue? {
        try read(name, tracked: true)
    }

    func peek(key name: String) throws(ObsError) -> JSONValue? {
        try read(name, tracked: false)
    }

    func exists(key name: String) -> Bool {
        guard engine.isTracking else { return store.view(name) != nil }
        let node = store.node(name, create: true)!
        engine.recordRead(of: node)
        return node.exists
    }

    func match(pattern: String) throws(ObsError) -> [(key: String, value: JSONValue)] {
        let parsed = try KeyPattern(pattern)
        let names: [String]
        if engine.isTracking {
            let members = store.matchSource(for: parsed)
            // Settled first, as a key is: a source left dirty with no reader (by a transaction
            // taken back) would otherwise stay dirty, and a dirty source marks nothing when bumped.
            engine.settleSource(members.node)
            engine.recordRead(of: members.node)
            names = members.names.sorted(by: JSONValue.utf8Precedes)
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
        let result = engineReference._withUnsafeGuaranteedRef { engine in
            Result { () throws(ObsError) -> JSONValue? in try read(name, tracked: tracked, engine: engine) }
        }
        return try result.get()
    }

    private func read(_ name: String, tracked: Bool, engine: Engine) throws(ObsError) -> JSONValue? {
        let tracking = tracked && engine.isTracking
        if !tracking, case .record(let record)? = store.view(name) {
            // Read without recording: a plain key need not become a node.
            return KeyView.record(record).content.value
        }
        if tracking, let expected = expectedKey(name, engine: engine) {
            // The node read at this position last time, which the reader's link keeps alive:
            // read with no reference counting.
            let result = expected._withUnsafeGuaranteedRef { node in
                Result { () throws(ObsError) -> JSONValue? in try read(node, name, tracking: true, engine: engine) }
            }
            return try result.get()
        }
        guard let node = store.node(name, create: tracking) else { return nil }
        return try read(node, name, tracking: tracking, engine: engine)
    }

    private func read(_ node: KeyNode, _ name: String, tracking: Bool, engine: Engine) throws(ObsError) -> JSONValue? {
        if node.isEvaluating {
            if tracking { engine.recordRead(of: node) }
            throw ObsError(.cycle, "cycle: '\(name)' depends on itself")
        }
        node.settle(in: engine)
        if tracking { engine.recordRead(of: node) }
        switch node.content {
        case .missing: return nil
        case .value(let value): return value
        case .error(let error): throw error
        }
    }

    /// The key node the evaluation under way read at this position last time, if it is `name`'s:
    /// a computed usually reads its keys in the same order as last time, so that node names it,
    /// with no hashing.
    private func expectedKey(_ name: String, engine: Engine) -> Unmanaged<KeyNode>? {
        guard let expected = engine.expectedReadReference(),
              expected._withUnsafeGuaranteedRef({ type(of: $0) == KeyNode.self && unsafeDowncast($0, to: KeyNode.self).name == name })
        else { return nil }
        return Unmanaged<KeyNode>.fromOpaque(expected.toOpaque())
    }
}
