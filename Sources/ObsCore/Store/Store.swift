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
    let keepsCommits: Bool
    let clock: any StoreClock

    // The state below is read or written for every request and every loop turn, by the store's one
    // thread; where it is marked `@exclusivity(unchecked)` it has no dynamic exclusivity checks
    // (measured: about a third of the daemon's instructions per request were those checks). Each is
    // changed by assignments or by its own methods, which never reach back into the store.

    /// Every key: plain value keys as records, the others as nodes (Store+Records.swift).
    @exclusivity(unchecked) var keys = KeyTable()
    @exclusivity(unchecked) var keyCount = 0
    var computedCount = 0
    /// The global revision: one per committed transaction.
    @exclusivity(unchecked) public internal(set) var rev: UInt64
    /// The patterns computeds read with `match()`.
    var matchSources = PatternIndex<MatchSource>()
    /// Bindings by target; a two-way binding is listed under both of its keys.
    var bindings: [String: KeyBinding] = [:]
    var bindingCount = 0
    /// Stored bindings the state loaded at start held but another one over the same key displaced
    /// (`load`): records an earlier version left, or damage. For the daemon to report.
    public internal(set) var displacedAtLoad: [DisplacedBinding] = []
    /// The names of the binding records an earlier version left (`DisplacedBinding.Why.leftOver`):
    /// deleted from the storage by the next local commit (`storedTransaction`), so that they are
    /// not met again at every start. Until then every write takes the general path (the hot one
    /// commits without a `StoredTransaction`): `answersHotRequests` is false meanwhile.
    var staleBindingRecords: Set<String> = [] {
        didSet {
            if staleBindingRecords.isEmpty != oldValue.isEmpty { answersHotRequests = staleBindingRecords.isEmpty }
        }
    }
    /// Cluster mode: the binding records the log holds whose binding is not installed (a record
    /// written after it binds one of its keys): for the log to delete (`takeUnloadedBindingRecords`).
    var unloadedBindingRecords: Set<String> = []
    /// The requests its sessions answered, for `stats`.
    @exclusivity(unchecked) var requestCounters = RequestCounters()
    /// The open transaction. (Read for every key a transaction records, by the store's one thread:
    /// no dynamic exclusivity checks.)
    /// (Unretained: whoever opens a transaction holds its record until it ends, so reading it
    /// costs no reference counting. Kept as an `Unmanaged`, which `touch` uses as it is: a strong
    /// reference taken from an `unowned(unsafe)` one is a retain and a release.)
    var current: Transaction? {
        get { currentRecord?.takeUnretainedValue() }
        set { currentRecord = newValue.map(Unmanaged.passUnretained) }
    }
    @exclusivity(unchecked) private var currentRecord: Unmanaged<Transaction>?
    /// The record the next transaction uses (Transaction.reset), and the list `commit` fills:
    /// kept from one transaction to the next.
    @exclusivity(unchecked) var spareTransaction: Transaction?
    /// (The list `listChanges(of:)` fills does not retain its keys: the transaction's `touched` does.)
    @exclusivity(unchecked) private var changedNodes = NodeList(retaining: false)
    /// Keys with a TTL, by wall-clock deadline (stale entries are skipped when popped).
    @exclusivity(unchecked) var expiries = DeadlineHeap<KeyNode>()
    /// Computeds that read the clock, re-evaluated every `timeRefreshInterval`.
    @exclusivity(unchecked) var timeNodes: [ObjectIdentifier: KeyNode] = [:]
    @exclusivity(unchecked) var nextTimeRefresh: Double?
    /// Writes to try again (cluster mode, while the shared log cannot be reached), by monotonic time.
    @exclusivity(unchecked) var retries = DeadlineHeap<() -> Void>()
    /// Placeholder nodes of missing keys, swept by `tick()` once nothing reads them.
    var placeholders: [String] = []
    /// The owner of the next connection's ephemeral keys.
    var nextOwnerID: UInt64 = 1
    /// The owner ids of the sessions open now (cluster mode: an ephemeral key of this host's that
    /// the log brings for a session closed by then is removed: `removeOrphanedEphemeralKeys`).
    var openOwners: Set<UInt64> = []
    @exclusivity(unchecked) var transactionSerial: UInt64 = 0
    let startedAt: Double

    /// Set by the daemon when it starts stopping: every request is then answered `shutting_down`.
    @exclusivity(unchecked) public var isShuttingDown = false
    /// While set, every write request is answered with this error and changes nothing (the daemon
    /// sets it while its database cannot be written).
    @exclusivity(unchecked) public var writeRefusal: ObsError?
    /// The length of the request line being handled, if any: a bound on its values' sizes.
    @exclusivity(unchecked) var requestLineBytes: Int?
    /// The bytes of the `restore` parts every session holds (`RestoreParts`).
    var restorePartsBytes = 0
    /// Whether sessions answer the hot operations from the line's bytes (Session+Hot.swift), and
    /// (cluster mode) the shared log's revisions of one plain key are applied as plain writes
    /// (`applyPlain`); when false everything takes the general path, which is what the tests of
    /// the hot path compare it with.
    @exclusivity(unchecked) var answersHotRequests = true
    /// Cluster mode: the log that decides every transaction that changes shared state
    /// (Store+SharedLog.swift). Nil on one host, where the store decides and pays nothing for it.
    @exclusivity(unchecked) public var sharedLog: (any SharedLog)? {
        // A `since` past what this host applied comes from a host ahead of it: the watch starts
        // there (WatchHub.sendReplay).
        didSet { watches.sinceAheadStartsThere = sharedLog != nil }
    }

    /// Every client's watches, and the delivery of this store's changes to them.
    let watches: WatchHub
    /// Where a value is encoded on its way to a record (demotion, `incr`), and where the hot path
    /// encodes its answers: memory kept from one request to the next.
    @exclusivity(unchecked) var scratch = ByteBuffer()
    @exclusivity(unchecked) var answerBuffer = ByteBuffer()

    /// Loads the storage's state and evaluates every computed from it.
    public init(configuration: StoreConfiguration = .init(), storage: any StateStorage, clock: any StoreClock) throws(ObsError) {
        self.configuration = configuration
        self.storage = storage
        keepsCommits = storage.keepsCommits
        self.clock = clock
        let state = try storage.load()
        rev = state.rev
        // This run's identity (RunLineage), which the storage stores when the run stops cleanly.
        let lineage = RunLineage(run: .random(in: 1...UInt64.max), previous: state.run, loadedRev: state.rev)
        storage.beginRun(lineage.run)
        watches = WatchHub(configuration: configuration, clock: clock, rev: state.rev, lineage: lineage)
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
        keys.forEach { entry in
            guard case .node(let node) = entry, node.isComputed else { return }
            stopEager(node)
            engine.detachDependencies(of: node)
        }
        engine.exit()
    }

    // MARK: Keys

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
            return view(pattern.text) != nil ? [pattern.text] : []
        }
        var names: [String] = []
        keys.forEach { entry in
            switch entry {
            case .node(let node):
                if node.exists, pattern.matches(node.name) { names.append(node.name) }
            case .record(let record):
                if pattern.matches(record.name) { names.append(String(decoding: record.name, as: UTF8.self)) }
            }
        }
        return names.sorted(by: JSONValue.utf8Precedes)
    }

    /// Turns a node into a computed with `expression`, or (nil) stops it being one.
    func setExpression(_ node: KeyNode, _ expression: Expression?) {
        if node.isComputed, expression == nil {
            // As a source again, it compares later writes with what its readers last saw.
            node.committed = node.content
            stopEager(node)
            engine.detachDependencies(of: node)
            timeNodes[ObjectIdentifier(node)] = nil
        }
        if !node.isComputed, expression != nil {
            // A value key becoming computed. Its readers must recompute if they have not seen its
            // last write yet (written earlier in this transaction): its evaluation compares with
            // that write, not with what they saw, and would find no change if it gives the same.
            if node.forced || node.committed != node.content, let subs = node.subs { engine.shallowPropagate(subs) }
            node.committed = node.content
            node.forced = false
        }
        // The definition replaced may be the one the open transaction's snapshot of the key
        // names: kept until the transaction's record is reset.
        if let current, node.touchedBy == current.serial, let replaced = node.currentDefinition {
            current.replacedDefinitions.append(replaced)
        }
        node.expression = expression
        guard let expression else { return }
        // Evaluated at the end of every transaction that reaches it, read or not: history and
        // watches need every change of every key.
        node.flags.insert(.eager)
        markChanged(node)
        if expression.usesTime {
            timeNodes[ObjectIdentifier(node)] = node
            if nextTimeRefresh == nil { nextTimeRefresh = clock.monotonic + configuration.timeRefreshInterval }
        } else {
            timeNodes[ObjectIdentifier(node)] = nil
        }
    }

    /// Stops a computed key being evaluated in every transaction. The engine's queue does not
    /// retain what it holds: a node queued now is kept alive until the transaction settles, in
    /// case the key table lets it go before then.
    private func stopEager(_ node: KeyNode) {
        node.flags.remove(.eager)
        if node.flags.contains(.queued) { engine.keepUntilSettled(node) }
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
            if node.isComputed { engine.refresh(node) }
        }
    }

    // MARK: Transactions

    /// Records `node`'s state before the open transaction first changes it.
    func touch(_ node: KeyNode) {
        guard let currentRecord else { return }
        currentRecord._withUnsafeGuaranteedRef { current in
            guard node.touchedBy != current.serial else { return }
            node.touchedBy = current.serial
            KeySnapshot.record(node)
            current.touched.append(node)
        }
    }

    /// Runs `body` as one transaction: all of it commits with one new revision, or (when it throws)
    /// none of it does.
    func transact<T>(reason: String? = nil, mode: CommitMode = .local, _ body: () throws(ObsError) -> T) throws(ObsError) -> (T, CommitResult) {
        let (value, transaction) = try run(reason: reason, mode: mode, body)
        defer { spareTransaction = transaction }
        let result = try commit(transaction, mode)
        return (value, result)
    }

    /// Runs `body` as the open transaction, with everything it causes (bindings, computeds): the
    /// transaction ready to commit, or (when it throws) rolled back.
    private func run<T>(reason: String?, mode: CommitMode, _ body: () throws(ObsError) -> T) throws(ObsError) -> (T, Transaction) {
        precondition(current == nil, "store transactions do not nest")
        transactionSerial += 1
        let transaction = spareTransaction ?? Transaction(serial: 0, reason: nil)
        spareTransaction = nil
        transaction.reset(serial: transactionSerial, reason: reason, replicated: mode.isReplicated, recordsDependencies: sharedLog != nil)
        current = transaction
        engine.enter()
        let value: T
        do {
            value = try body()
        } catch {
            takeBack(transaction)
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
        listChanges(of: transaction)
        var proposal = Proposal(changes: storedTransaction(0, transaction, changedBindings(of: transaction), includeEphemeral: true))
        proposal.changes.reason = reason
        proposal.depends = transaction.depends
        current = transaction
        engine.enter()
        takeBack(transaction)
        return (value, proposal)
    }

    /// Undoes the open transaction (inside the engine) and leaves both: the store is as it was
    /// before it, and the transaction's record is kept for the next one.
    private func takeBack(_ transaction: Transaction) {
        rollback(transaction)
        evaluateTouched(transaction)
        engine.exit()
        current = nil
        sweep(transaction)
        spareTransaction = transaction
    }

    /// Puts every key and binding the transaction touched back as it was. Called inside the engine.
    func rollback(_ transaction: Transaction) {
        for target in transaction.bindingOrder.reversed() {
            guard let old = transaction.bindingsBefore[target] else { continue }
            if let now = bindings[target], now !== old { uninstall(now) }
            if let old, bindings[old.to] == nil { install(old, initialWrite: false) }
        }
        var index = transaction.touched.count
        while index > 0 {
            index -= 1
            let node = transaction.touched[index]
            let before = transaction.snapshot(of: node)
            // Read first: the definition the snapshot names may go once the node's is replaced.
            let beforeSource = before.expressionSource
            if beforeSource == nil { setExpression(node, nil) }
            setKind(node, before.kind)
            node.lastGood = before.lastGood
            node.rev = before.rev
            node.createdRev = before.createdRev
            node.version = before.version
            node.expiresAt = before.expiresAt
            node.owner = before.owner
            if let source = beforeSource {
                node.content = before.content
                // The definition it had compiled then; it compiles again.
                let expression = node.expressionSource == source ? node.expression : try? compile(source)
                setExpression(node, expression)
            } else {
                node.write(before.content, always: false)
            }
        }
    }

    /// Lists in `changedNodes` the keys a transaction changed (or redefined, or wrote with
    /// `always`), with their state before it. The list is valid until the next call; its keys
    /// are kept alive by the transaction's `touched`.
    private func listChanges(of transaction: Transaction) {
        changedNodes.removeAll()
        transaction.touched.forEachGuaranteed { node in
            if node.before.kind != node.kind || node.before.content != node.content || transaction.isForced(node)
                || transaction.isRedefined(node) {
                changedNodes.append(node)
            }
        }
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
        listChanges(of: transaction)
        let bindingTargets = changedBindings(of: transaction)
        if changedNodes.isEmpty && bindingTargets.isEmpty, !mode.isReplicated {
            sweep(transaction)
            return CommitResult(rev: rev, persisted: false)
        }
        let newRev: UInt64
        var persisted = false
        switch mode {
        case .local:
            newRev = rev + 1
            if keepsCommits {
                // Committed even when it changes nothing the storage keeps (ephemeral keys only, a
                // computed the clock re-evaluated): then as its revision alone. The counter must
                // not go back at a restart, or revisions clients saw would be given again to other
                // changes, and a watch resumed `since` one of them would miss those.
                let stored = storedTransaction(newRev, transaction, bindingTargets, includeEphemeral: false)
                do {
                    try storage.commit(stored)
                    if !staleBindingRecords.isEmpty {
                        staleBindingRecords.subtract(stored.deletedBindings)
                        staleBindingRecords.subtract(stored.putBindings.map(\.to))
                    }
                } catch {
                    engine.enter()
                    rollback(transaction)
                    evaluateTouched(transaction)
                    engine.exit()
                    sweep(transaction)
                    throw ObsError(.internal, "storage: \(error.message)")
                }
                persisted = true
            }
        case .replicated(let logged):
            newRev = logged
        case .unlogged:
            newRev = rev
        }
        rev = newRev
        watches.beginEvents(rev: newRev)
        changedNodes.forEachGuaranteed { node in
            recordEvent(node, forced: transaction.isForced(node), redefined: transaction.isRedefined(node), reason: transaction.reason)
            if transaction.replicated, transaction.replicatedMetadata.contains(ObjectIdentifier(node)) {
                // Revisions the shared log gave this key, set when it was applied.
            } else if node.kind == nil {
                node.rev = 0
                node.createdRev = 0
                node.version = 0
            } else {
                if node.before.kind == nil {
                    node.createdRev = newRev
                    node.version = 1
                } else {
                    node.version += 1
                }
                node.rev = newRev
            }
        }
        watches.commitEvents()
        sweep(transaction)
        return CommitResult(rev: newRev, persisted: persisted)
    }

    /// Records the event of a changed key (one of `changedNodes`), if its change is one watches
    /// see: a key only redefined, or given other metadata, has none.
    private func recordEvent(_ node: KeyNode, forced: Bool, redefined: Bool, reason: String?) {
        let wasMissing = node.before.kind == nil
        if redefined, !forced, node.before.kind == node.kind, node.before.content == node.content { return }
        // The usual event (every computed of a chain): a value changed to another. Both values are
        // read and encoded where the node holds them (switching on them here would copy each
        // enum, and retain any string, array or object in it).
        let changedValue = node.name.utf8.withContiguousStorageIfAvailable { name in
            withUnsafePointer(to: &node.before.content) { old in
                withUnsafePointer(to: &node.content) { new in
                    watches.appendChange(key: UnsafeRawBufferPointer(name), created: wasMissing, old: old, new: new)
                }
            }
        }
        if changedValue == true { return }
        var name = node.name
        name.withUTF8 { name in
            let key = UnsafeRawBufferPointer(name)
            switch node.content {
            case .missing:
                guard !wasMissing else { return }
                watches.appendEvent(.delete, key: key, created: false, old: .value(node.before.content.value ?? node.before.lastGood ?? .null),
                                    reason: reason)
            case .error(let error):
                watches.appendEvent(.error, key: key, created: wasMissing, error: error)
            case .value(let value):
                switch node.before.content {
                case .value(let old):
                    watches.appendEvent(.change, key: key, created: wasMissing, old: .value(old), new: .value(value))
                case .error:
                    watches.appendEvent(.change, key: key, created: wasMissing, old: node.before.lastGood.map { .value($0) },
                                        new: .value(value))
                case .missing:
                    watches.appendEvent(.change, key: key, created: wasMissing, new: .value(value))
                }
            }
        }
    }

    /// What a transaction changes of the persisted state (its changed keys: `changedNodes`); with
    /// `includeEphemeral` (a proposal to a shared log, which keeps them) ephemeral keys too, with
    /// their owner.
    private func storedTransaction(_ rev: UInt64, _ transaction: Transaction, _ bindingTargets: [String],
                                   includeEphemeral: Bool) -> StoredTransaction {
        var stored = StoredTransaction(rev: rev)
        for index in 0..<changedNodes.count {
            let node = changedNodes[index]
            let before = node.before
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
                if before.expressionSource != expression.source || before.kind != .computed {
                    stored.putDefinitions.append(StoredDefinition(
                        key: node.name, expr: expression.source, createdRev: before.kind == nil ? rev : node.createdRev))
                }
            } else if before.kind == .computed {
                stored.deletedDefinitions.append(node.name)
            }
        }
        // A binding's record is named by its `to`. A key whose binding changed has its record put
        // when it is the new binding's `to`, and deleted when it has no binding now, or when it
        // was the old binding's `to` and is now the `from` of a two-way binding (recorded under
        // the other key): left in place, that old record would come back at the next load.
        for target in bindingTargets {
            if let binding = bindings[target], binding.to == target {
                stored.putBindings.append(binding.stored)
            } else if bindings[target] == nil || transaction.bindingsBefore[target]??.to == target {
                stored.deletedBindings.append(target)
            }
        }
        if !staleBindingRecords.isEmpty, sharedLog == nil {
            for name in staleBindingRecords.sorted()
            where bindings[name]?.to != name && !stored.deletedBindings.contains(name) && !stored.putBindings.contains(where: { $0.to == name }) {
                stored.deletedBindings.append(name)
            }
        }
        return stored
    }
}
