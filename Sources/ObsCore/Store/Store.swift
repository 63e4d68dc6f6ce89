/// The state obsd serves: named value and computed keys as nodes of the engine, bindings and the
/// revision counter. It does no I/O of its own: it calls its `StateStorage` for every committed
/// transaction, and hands the transaction's events to its watch unit (`watches`), which delivers
/// them.
///
/// Single-threaded: the daemon calls it (and its sessions) from one thread.
public final class Store {
    public let configuration: StoreConfiguration
    let storage: any StateStorage
    /// `storage.keepsCommits`, read once: when false, no `StoredTransaction` is built.
    private let keepsCommits: Bool
    let clock: any StoreClock

    var nodes: [String: KeyNode] = [:]
    var keyCount = 0
    var computedCount = 0
    /// The global revision: one per committed transaction.
    public internal(set) var rev: UInt64
    /// The patterns computeds read with `match()`.
    var matchSources = PatternIndex<MatchSource>()
    /// Bindings by target; a two-way binding is listed under both of its keys.
    var bindings: [String: KeyBinding] = [:]
    var bindingCount = 0
    /// The requests its sessions answered, for `stats`.
    var requestCounters = RequestCounters()
    var current: Transaction?
    /// Keys with a TTL, by wall-clock deadline (stale entries are skipped when popped).
    var expiries = DeadlineHeap<KeyNode>()
    /// Computeds that read the clock, re-evaluated every `timeRefreshInterval`.
    var timeNodes: [ObjectIdentifier: KeyNode] = [:]
    var nextTimeRefresh: Double?
    /// Writes to try again (cluster mode, while the shared log cannot be reached), by monotonic time.
    var retries = DeadlineHeap<() -> Void>()
    /// Placeholder nodes of missing keys, swept by `tick()` once nothing reads them.
    var placeholders: [String] = []
    /// The owner of the next connection's ephemeral keys.
    var nextOwnerID: UInt64 = 1
    var transactionSerial: UInt64 = 0
    let startedAt: Double

    /// Set by the daemon when it starts stopping: every request is then answered `shutting_down`.
    public var isShuttingDown = false
    /// While set, every write request is answered with this error and changes nothing (the daemon
    /// sets it while its database cannot be written).
    public var writeRefusal: ObsError?
    /// The length of the request line being handled, if any: a bound on its values' sizes.
    var requestLineBytes: Int?
    /// Cluster mode: the log that decides every transaction that changes shared state
    /// (Store+SharedLog.swift). Nil on one host, where the store decides and pays nothing for it.
    public var sharedLog: (any SharedLog)?

    /// Every client's watches, and the delivery of this store's changes to them.
    let watches: WatchHub

    /// Loads the storage's state and evaluates every computed from it.
    public init(configuration: StoreConfiguration = .init(), storage: any StateStorage, clock: any StoreClock) throws(ObsError) {
        self.configuration = configuration
        self.storage = storage
        keepsCommits = storage.keepsCommits
        self.clock = clock
        let state = try storage.load()
        rev = state.rev
        watches = WatchHub(configuration: configuration, clock: clock, rev: state.rev)
        startedAt = clock.monotonic
        watches.state = self
        try load(state)
    }

    /// Unlinks the store's watchers and computeds from the engine, which would otherwise keep them
    /// (and the nodes they read) alive.
    deinit {
        engine.enter()
        for binding in bindings.values {
            binding.forward?.cancel()
            binding.backward?.cancel()
        }
        for node in nodes.values where node.expression != nil {
            node.observer?.cancel()
            node.observer = nil
            engine.detachDependencies(of: node)
        }
        engine.exit()
    }

    // MARK: Nodes

    /// The node of `name`; with `create`, a new node for a missing key (a `placeholder` when it is
    /// made for a reader rather than a writer: `tick()` forgets it once nothing reads it).
    func node(_ name: String, create: Bool, placeholder: Bool = true) -> KeyNode? {
        if let node = nodes[name] { return node }
        guard create else { return nil }
        let node = KeyNode(name: name, store: self)
        nodes[name] = node
        if placeholder { placeholders.append(name) }
        return node
    }

    /// The node of an existing key.
    func existing(_ name: String) -> KeyNode? {
        guard let node = nodes[name], node.exists else { return nil }
        return node
    }

    /// Changes whether and how a key exists, keeping counts and `match()` memberships current.
    func setKind(_ node: KeyNode, _ kind: KeyKind?) {
        let old = node.kind
        guard old != kind else { return }
        node.kind = kind
        if old == .computed { computedCount -= 1 }
        if kind == .computed { computedCount += 1 }
        if (old == nil) != (kind == nil) {
            keyCount += kind == nil ? -1 : 1
            let created = kind != nil
            matchSources.forEachEntry(matching: node.name) { source in
                if created { source.names.insert(node.name) } else { source.names.remove(node.name) }
                source.node.bump()
            }
        }
    }

    /// The source of the keys matching `pattern`, for a computed that reads it with `match()`.
    func matchSource(for pattern: KeyPattern) -> MatchSource {
        matchSources.entry(for: pattern) { MatchSource(pattern: pattern, names: Set(keyNames(matching: pattern))) }
    }

    /// Every existing key matching `pattern`, sorted. Scans the keys unless the pattern is one name:
    /// for reads, never on the write path.
    func keyNames(matching pattern: KeyPattern) -> [String] {
        if !pattern.hasWildcard {
            return existing(pattern.text) != nil ? [pattern.text] : []
        }
        return nodes.values.lazy.filter { $0.exists && pattern.matches($0.name) }.map(\.name)
            .sorted(by: JSONValue.utf8Precedes)
    }

    /// Turns a node into a computed with `expression`, or (nil) stops it being one.
    func setExpression(_ node: KeyNode, _ expression: Expression?) {
        if node.expression != nil, expression == nil {
            // As a source again, it compares later writes with what its readers last saw.
            node.committed = node.content
            node.observer?.cancel()
            node.observer = nil
            engine.detachDependencies(of: node)
            timeNodes[ObjectIdentifier(node)] = nil
        }
        node.expression = expression
        guard let expression else { return }
        markChanged(node)
        if node.observer == nil { node.observer = KeyObserver(observing: node) }
        if expression.usesTime {
            timeNodes[ObjectIdentifier(node)] = node
            if nextTimeRefresh == nil { nextTimeRefresh = clock.monotonic + configuration.timeRefreshInterval }
        } else {
            timeNodes[ObjectIdentifier(node)] = nil
        }
    }

    /// Makes a computed recompute in this transaction and its readers check it.
    func markChanged(_ node: KeyNode) {
        engine.propagate(from: node)
    }

    /// Evaluates the computeds a transaction's body touched, before the engine flushes: a computed
    /// defined (or restored) in it has no queued watcher yet.
    func evaluateTouched(_ transaction: Transaction) {
        var index = 0
        while index < transaction.touched.count {
            let node = transaction.touched[index]
            index += 1
            if node.expression != nil { engine.refresh(node) }
        }
    }

    // MARK: Transactions

    /// Records `node`'s state before the open transaction first changes it.
    func touch(_ node: KeyNode) {
        guard let current, node.touchedBy != current.serial else { return }
        node.touchedBy = current.serial
        node.touchedIndex = current.touched.count
        current.touched.append(node)
        current.before.append(KeySnapshot(node))
    }

    /// Runs `body` as one transaction: all of it commits with one new revision, or (when it throws)
    /// none of it does.
    func transact<T>(reason: String? = nil, mode: CommitMode = .local, _ body: () throws(ObsError) -> T) throws(ObsError) -> (T, CommitResult) {
        let (value, transaction) = try run(reason: reason, mode: mode, body)
        let result = try commit(transaction, mode)
        return (value, result)
    }

    /// Runs `body` as the open transaction, with everything it causes (bindings, computeds): the
    /// transaction ready to commit, or (when it throws) rolled back.
    private func run<T>(reason: String?, mode: CommitMode, _ body: () throws(ObsError) -> T) throws(ObsError) -> (T, Transaction) {
        precondition(current == nil, "store transactions do not nest")
        transactionSerial += 1
        let transaction = Transaction(serial: transactionSerial, reason: reason, replicated: mode.isReplicated,
                                      recordsDependencies: sharedLog != nil)
        current = transaction
        engine.enter()
        let value: T
        do {
            value = try body()
        } catch {
            rollback(transaction)
            evaluateTouched(transaction)
            engine.exit()
            current = nil
            sweep(transaction.touched)
            throw error
        }
        evaluateTouched(transaction)
        engine.exit()
        current = nil
        return (value, transaction)
    }

    /// Runs `body` as a transaction and takes it back: what committing it would change, for the
    /// shared log to decide (cluster mode). The store is left as it was.
    func propose<T>(reason: String?, _ body: () throws(ObsError) -> T) throws(ObsError) -> (T, Proposal) {
        let (value, transaction) = try run(reason: reason, mode: .local, body)
        var proposal = Proposal(changes: storedTransaction(0, changes(of: transaction), changedBindings(of: transaction),
                                                           includeEphemeral: true))
        proposal.changes.reason = reason
        proposal.depends = transaction.depends
        current = transaction
        engine.enter()
        rollback(transaction)
        evaluateTouched(transaction)
        engine.exit()
        current = nil
        sweep(transaction.touched)
        return (value, proposal)
    }

    /// Puts every key and binding the transaction touched back as it was. Called inside the engine.
    func rollback(_ transaction: Transaction) {
        for target in transaction.bindingOrder.reversed() {
            guard let old = transaction.bindingsBefore[target] else { continue }
            if let now = bindings[target], now !== old { uninstall(now) }
            if let old, bindings[old.to] == nil { install(old, initialWrite: false) }
        }
        for node in transaction.touched.reversed() {
            let before = transaction.snapshot(of: node)
            if before.expression == nil { setExpression(node, nil) }
            setKind(node, before.kind)
            node.lastGood = before.lastGood
            node.rev = before.rev
            node.createdRev = before.createdRev
            node.version = before.version
            node.expiresAt = before.expiresAt
            node.owner = before.owner
            if let expression = before.expression {
                node.content = before.content
                setExpression(node, expression)
            } else {
                node.write(before.content, always: false)
            }
        }
    }

    /// The keys a transaction changed (or redefined, or wrote with `always`), with their state
    /// before it.
    private func changes(of transaction: Transaction) -> [(node: KeyNode, before: KeySnapshot)] {
        var changed: [(node: KeyNode, before: KeySnapshot)] = []
        for (index, node) in transaction.touched.enumerated() {
            let id = ObjectIdentifier(node)
            let before = transaction.before[index]
            if before.kind != node.kind || before.content != node.content || transaction.forced.contains(id)
                || transaction.redefined.contains(id)
            {
                changed.append((node, before))
            }
        }
        return changed
    }

    /// The targets whose binding a transaction changed.
    private func changedBindings(of transaction: Transaction) -> [String] {
        var targets: [String] = []
        for target in transaction.bindingOrder where transaction.bindingsBefore[target]! !== bindings[target] {
            targets.append(target)
        }
        return targets
    }

    private func commit(_ transaction: Transaction, _ mode: CommitMode) throws(ObsError) -> CommitResult {
        let changed = changes(of: transaction)
        let bindingTargets = changedBindings(of: transaction)
        if changed.isEmpty && bindingTargets.isEmpty, !mode.isReplicated {
            sweep(transaction.touched)
            return CommitResult(rev: rev, persisted: false)
        }
        let newRev: UInt64
        var stored = StoredTransaction(rev: rev)
        switch mode {
        case .local:
            newRev = rev + 1
            if keepsCommits { stored = storedTransaction(newRev, changed, bindingTargets, includeEphemeral: false) }
            if !stored.isEmpty {
                do {
                    try storage.commit(stored)
                } catch {
                    engine.enter()
                    rollback(transaction)
                    evaluateTouched(transaction)
                    engine.exit()
                    throw ObsError(.internal, "storage: \(error.message)")
                }
            }
        case .replicated(let logged):
            newRev = logged
        case .unlogged:
            newRev = rev
        }
        rev = newRev
        var order = Array(changed.indices)
        if changed.count > 1 {
            // Compared by the nodes alone: an element of `changed` copied per comparison would
            // copy its snapshot (measured: a 50-deep chain cost twice as much).
            let nodes = changed.map(\.node)
            order.sort { JSONValue.utf8Precedes(nodes[$0].name, nodes[$1].name) }
        }
        var events: [KeyEvent] = []
        events.reserveCapacity(changed.count)
        for index in order {
            let (node, before) = changed[index]
            let id = ObjectIdentifier(node)
            if let event = makeEvent(node, before, forced: transaction.forced.contains(id), reason: transaction.reason) {
                events.append(event)
            }
            if transaction.replicated, transaction.replicatedMetadata.contains(id) {
                // Revisions the shared log gave this key, set when it was applied.
            } else if node.kind == nil {
                node.rev = 0
                node.createdRev = 0
                node.version = 0
            } else {
                if before.kind == nil {
                    node.createdRev = newRev
                    node.version = 1
                } else {
                    node.version += 1
                }
                node.rev = newRev
            }
        }
        watches.committed(events, rev: newRev)
        sweep(transaction.touched)
        return CommitResult(rev: newRev, persisted: !stored.isEmpty)
    }

    private func makeEvent(_ node: KeyNode, _ before: KeySnapshot, forced: Bool, reason: String?) -> KeyEvent? {
        if before.kind == node.kind && before.content == node.content && !forced { return nil }
        switch node.content {
        case .missing:
            guard before.kind != nil else { return nil }
            return KeyEvent(kind: .delete, key: node.name, old: before.content.value ?? before.lastGood, rev: rev,
                            created: false, reason: reason)
        case .error(let error):
            return KeyEvent(kind: .error, key: node.name, error: error, rev: rev, created: before.kind == nil)
        case .value(let value):
            let old: JSONValue?
            switch before.content {
            case .value(let value): old = value
            case .error: old = before.lastGood
            case .missing: old = nil
            }
            return KeyEvent(kind: .change, key: node.name, old: old, new: value, rev: rev, created: before.kind == nil)
        }
    }

    /// What a transaction changes of the persisted state; with `includeEphemeral` (a proposal to a
    /// shared log, which keeps them) ephemeral keys too, with their owner.
    private func storedTransaction(_ rev: UInt64, _ changed: [(node: KeyNode, before: KeySnapshot)], _ bindingTargets: [String],
                                   includeEphemeral: Bool) -> StoredTransaction {
        var stored = StoredTransaction(rev: rev)
        for (node, before) in changed {
            if node.kind == .value, node.owner == nil || includeEphemeral, case .value(let value) = node.content {
                var key = StoredKey(key: node.name, value: value, rev: rev,
                                    createdRev: before.kind == nil ? rev : node.createdRev,
                                    version: before.kind == nil ? 1 : node.version + 1, expiresAt: node.expiresAt)
                key.owner = node.owner
                stored.putKeys.append(key)
            } else if before.kind == .value && (before.owner == nil || includeEphemeral) {
                stored.deletedKeys.append(node.name)
            }
            if node.kind == .computed, let expression = node.expression {
                if before.expression?.source != expression.source || before.kind != .computed {
                    stored.putDefinitions.append(StoredDefinition(
                        key: node.name, expr: expression.source, createdRev: before.kind == nil ? rev : node.createdRev))
                }
            } else if before.kind == .computed {
                stored.deletedDefinitions.append(node.name)
            }
        }
        for target in bindingTargets {
            if let binding = bindings[target] {
                if binding.to == target { stored.putBindings.append(binding.stored) }
            } else {
                stored.deletedBindings.append(target)
            }
        }
        return stored
    }

    /// Forgets nodes of missing keys that nothing reads any more.
    func sweep(_ candidates: [KeyNode]) {
        for node in candidates where node.kind == nil && !node.hasSubscribers && nodes[node.name] === node {
            nodes[node.name] = nil
        }
    }
}
