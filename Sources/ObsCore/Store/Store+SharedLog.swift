/// Cluster mode: writes proposed to the shared log, and the log's decided transactions applied.
extension Store {
    /// The most times a write that lost a race (a key it depends on changed first) is run again,
    /// however fast the races go, within `proposalRetrySeconds`.
    static let maxProposalRaces = 1024

    /// Runs a write the cluster way (`SharedLog`): against the state applied so far, taken back,
    /// its changes proposed to the log, run again if it lost a race. `done` is called on the
    /// store's thread once: with what `body` returned and the revision that committed it (the
    /// applied revision when it changed nothing), or with the error of the body or of the log.
    func submit<T>(reason: String? = nil, _ body: @escaping () throws(ObsError) -> T,
                   done: @escaping (Result<(T, UInt64), ObsError>) -> Void) {
        submit(reason: reason, races: 0, giveUpAt: clock.monotonic + configuration.proposalRetrySeconds, body, done: done)
    }

    /// Of many hosts racing for one key (a counter they all increment), each round has one winner:
    /// a write is run again as long as its time allows, not a number of times that many racers
    /// would exhaust. `races`: how many it lost so far.
    private func submit<T>(reason: String?, races: Int, giveUpAt: Double, _ body: @escaping () throws(ObsError) -> T,
                           done: @escaping (Result<(T, UInt64), ObsError>) -> Void) {
        guard let sharedLog else { preconditionFailure("submit needs a shared log") }
        let value: T
        let proposal: Proposal
        do {
            (value, proposal) = try propose(reason: reason, body)
        } catch {
            done(.failure(error))
            return
        }
        if proposal.isEmpty {
            done(.success((value, rev)))
            return
        }
        sharedLog.propose(proposal) { [self] decision in
            switch decision {
            case .committed(let rev):
                done(.success((value, rev)))
            case .superseded:
                guard races + 1 < Self.maxProposalRaces, clock.monotonic < giveUpAt else {
                    done(.failure(ObsError(.unavailable, "the write lost \(races + 1) races with other hosts for the same keys; try again")))
                    return
                }
                submit(reason: reason, races: races + 1, giveUpAt: giveUpAt, body, done: done)
            case .retry(_, let because):
                guard clock.monotonic < giveUpAt else {
                    done(.failure(ObsError(.unavailable, "\(because), but the write's time ran out before it could run again; try again")))
                    return
                }
                submit(reason: reason, races: races, giveUpAt: giveUpAt, body, done: done)
            case .failed(let error):
                done(.failure(error))
            }
        }
    }

    /// Cluster mode: proposes `set name value` of a plain key, checked by `prepareSet` to be a new
    /// value for a record or a missing key no `match()` sees (so nothing reads it, no binding
    /// fires, nothing is depended on): the proposal the general path's transaction would make, one
    /// key put, without running and taking back that transaction. `done` as `submit`'s, with
    /// whether the value changed. A proposal the log supersedes (a plain write depends on nothing,
    /// so none should be) runs again the general way.
    func submitPlainSet(_ name: String, _ value: JSONValue, _ write: PlainWrite,
                        done: @escaping (Result<(changed: Bool, rev: UInt64), ObsError>) -> Void) {
        guard let sharedLog else { preconditionFailure("submitPlainSet needs a shared log") }
        var changes = StoredTransaction(rev: 0)
        changes.putKeys = [StoredKey(key: name, value: value, rev: 0, createdRev: write.existing?.record.createdRev ?? 0,
                                     version: (write.existing?.record.version ?? 0) + 1)]
        sharedLog.propose(Proposal(changes: changes)) { [self] decision in
            switch decision {
            case .committed(let rev):
                done(.success((true, rev)))
            case .superseded, .retry:
                submit({ [self] () throws(ObsError) in try set(name, value) }) { outcome in done(outcome.map { ($0.0, $0.1) }) }
            case .failed(let error):
                done(.failure(error))
            }
        }
    }

    /// Applies a transaction the shared log decided, at its revision: every host applies every one,
    /// in the log's order. Bindings write nothing here: what they wrote where the transaction was
    /// proposed is part of it. Whatever the log holds is applied as far as it makes sense (a value
    /// for a key this host knows as computed replaces the definition, say): applying never fails.
    /// A revision at or below the store's is already applied and ignored.
    ///
    /// `bindingsUnseen`: the log committed a plain write (`Proposal.isPlainWrite`) without
    /// comparing bindings, and they changed between what its proposer had applied and this
    /// revision. The bindings it sets off here wrote nothing where it was proposed, so every host
    /// runs them again, each in a transaction of its own that depends on their source and target
    /// (`repair`): the first to reach the log writes the target, the others find it written.
    public func apply(_ transaction: StoredTransaction, bindingsUnseen: Bool = false) {
        guard transaction.rev > rev else { return }
        // The usual revision: one plain key put, which nothing reads, so no binding it could set off.
        if transaction.putKeys.count == 1, transaction.reason == nil, transaction.deletedKeys.isEmpty,
           transaction.putDefinitions.isEmpty, transaction.deletedDefinitions.isEmpty, transaction.putBindings.isEmpty,
           transaction.deletedBindings.isEmpty, applyPlain(transaction.putKeys[0], rev: transaction.rev) {
            return
        }
        let applied: Transaction
        do {
            (applied, _) = try transact(reason: transaction.reason, mode: .replicated(transaction.rev)) { () throws(ObsError) in
                let open = current!
                open.bindingsUnseen = bindingsUnseen
                applyChanges(transaction)
                return open
            }
        } catch {
            // Nothing in a replicated commit can throw: it writes no storage and checks nothing.
            preconditionFailure("a replicated transaction failed: \(error)")
        }
        if !applied.missedBindings.isEmpty { repair(applied.missedBindings, missedAt: transaction.rev) }
        removeOrphanedEphemeralKeys(transaction.putKeys)
    }

    /// Removes, as a closing session's are (reason "ephemeral"), the ephemeral keys just applied
    /// whose owner is a session of this host that is closed by now: its write was decided after
    /// the close found nothing to remove, or it failed as far as the session knew (no answer
    /// within the timeout) but was committed. Another host's keys go with their own sessions.
    private func removeOrphanedEphemeralKeys(_ keys: [StoredKey]) {
        var orphaned: [UInt64: Set<String>] = [:]
        for key in keys {
            guard let owner = key.owner, owner != StoredKey.remoteOwner, !openOwners.contains(owner) else { continue }
            orphaned[owner, default: []].insert(key.key)
        }
        for (owner, names) in orphaned { removeEphemeralKeys(names, owner: owner) }
    }

    /// The revision, creation revision and version of the value key `name` as this store holds
    /// them; nil when no value key of that name exists (missing, or a computed key). A shared log
    /// that learns of a write of its own host before the log's copy of it derives the write's
    /// creation revision and version from these (EtcdLog's `applyOwnPut`).
    public func valueKeyRevisions(_ name: String) -> (rev: UInt64, createdRev: UInt64, version: UInt64)? {
        guard let found = view(name), found.kind == .value else { return nil }
        return (found.rev, found.createdRev, found.version)
    }

    /// Makes the store hold `state` (the whole shared state as of `state.rev`, read again after the
    /// log lost the revisions this host had not applied) as one transaction at that revision;
    /// then every watch gets `compacted` and a fresh snapshot, and `since` older than it answers
    /// `compacted`: no watch is left with a gap it was not told of. The transaction's events go
    /// to no watch: no write made them, and another host has other events at that revision.
    public func applySnapshot(_ state: StoredState) {
        var transaction = StoredTransaction(rev: max(state.rev, rev + 1))
        transaction.putKeys = state.keys
        transaction.putDefinitions = state.definitions
        transaction.putBindings = state.bindings
        let keys = Set(state.keys.map(\.key)), definitions = Set(state.definitions.map(\.key))
        let targets = Set(state.bindings.flatMap { $0.twoWay ? [$0.to, $0.from] : [$0.to] })
        for name in allNames() {
            guard let key = view(name) else { continue }
            if key.kind == .value, !keys.contains(name) { transaction.deletedKeys.append(name) }
            if key.kind == .computed, !definitions.contains(name) { transaction.deletedDefinitions.append(name) }
        }
        for (target, binding) in bindings where binding.to == target && !targets.contains(target) {
            transaction.deletedBindings.append(target)
        }
        watches.muted = true
        apply(transaction)
        watches.muted = false
        watches.resyncAll()
    }

    /// Delivers a channel message the shared log carried to this host's watches; how many got it.
    public func deliverPublished(channel: String, payload: JSONValue) -> Int {
        watches.publish(channel, payload)
    }

    private func applyChanges(_ transaction: StoredTransaction) {
        // A binding's record is named by its target (a two-way binding is found under both its
        // keys, and goes only with the record of its `to`).
        for target in transaction.deletedBindings {
            if let binding = bindings[target], binding.to == target { uninstall(binding) }
        }
        for name in transaction.deletedDefinitions {
            if let node = existing(name), node.kind == .computed { remove(node) }
        }
        for name in transaction.deletedKeys {
            if let node = existing(name), node.kind == .value { remove(node) }
        }
        for definition in transaction.putDefinitions {
            let node = node(definition.key, create: true, placeholder: false)!
            if let binding = bindings[definition.key], binding.to == definition.key { uninstall(binding) }
            touch(node)
            current?.redefined.insert(ObjectIdentifier(node))
            node.expiresAt = nil
            node.owner = nil
            setKind(node, .computed)
            switch Result(catching: { () throws(ObsError) in try compile(definition.expr) }) {
            case .success(let expression):
                setExpression(node, expression)
                engine.invalidate(node)
                engine.refresh(node)
            case .failure(let error):
                setExpression(node, nil)
                node.content = .error(ObsError(.evalError, "the definition does not compile: \(error.message)"))
            }
        }
        for key in transaction.putKeys {
            let node = node(key.key, create: true, placeholder: false)!
            if node.isComputed { setExpression(node, nil) }
            touch(node)
            current?.redefined.insert(ObjectIdentifier(node))
            current?.replicatedMetadata.insert(ObjectIdentifier(node))
            node.expiresAt = key.expiresAt
            node.owner = key.owner
            if let expiresAt = key.expiresAt { expiries.push(expiresAt, node) }
            writeValue(node, key.value, always: false)
            node.rev = key.rev
            node.createdRev = key.createdRev
            node.version = key.version
        }
        var displaced: [String] = []
        for stored in transaction.putBindings {
            for target in stored.twoWay ? [stored.to, stored.from] : [stored.to] {
                guard let old = bindings[target] else { continue }
                uninstall(old)
                displaced.append(old.to)
            }
            let map = stored.map.flatMap { try? compile($0, allowValue: true) }
            let unmap = stored.unmap.flatMap { try? compile($0, allowValue: true) }
            install(KeyBinding(from: stored.from, to: stored.to, map: map, unmap: unmap, twoWay: stored.twoWay), initialWrite: false)
        }
        // Records this transaction replaced or deleted are no one's to delete; one whose binding a
        // later record displaced, and that the transaction left, is (a record put by something
        // else than obsd, or by a version that kept records when their key became a two-way
        // binding's `from`).
        for name in transaction.deletedBindings { unloadedBindingRecords.remove(name) }
        for stored in transaction.putBindings { unloadedBindingRecords.remove(stored.to) }
        for name in displaced
        where bindings[name]?.to != name && !transaction.deletedBindings.contains(name) && !transaction.putBindings.contains(where: { $0.to == name }) {
            unloadedBindingRecords.insert(name)
        }
    }

    /// Cluster mode: the binding records the log holds whose binding is not installed, each once:
    /// the log deletes them, compared on their revision.
    public func takeUnloadedBindingRecords() -> [String] {
        guard !unloadedBindingRecords.isEmpty else { return [] }
        defer { unloadedBindingRecords.removeAll() }
        return unloadedBindingRecords.sorted()
    }

    /// Runs again, as a write of this host's, the bindings that the transaction at `rev` set off
    /// but that wrote nothing (its proposer had not applied them). Each one writes only while its
    /// binding is still the one installed and neither its source nor its target changed since
    /// `rev` (a later change carries or repairs its own binding writes), and the proposal depends
    /// on the target and on the value keys the source reads: of the hosts that all run this, the
    /// first one the log decides writes, the others are superseded, run again, and find the
    /// target written. A repair is a write no client waits for: one the log could not take is tried
    /// again as long as it may pass (etcd out of reach), as an expiry is; it writes nothing once a
    /// later change carries the binding's write.
    private func repair(_ effects: [BindingEffect], missedAt rev: UInt64) {
        var unique: [BindingEffect] = []
        for effect in effects where !unique.contains(where: { $0 === effect }) { unique.append(effect) }
        write(reason: nil) { [self] () throws(ObsError) in
            for effect in unique {
                guard let binding = bindings[effect.target], binding.forward === effect || binding.backward === effect,
                      let source = existing(effect.source), source.rev <= rev, (existing(effect.target)?.rev ?? 0) <= rev
                else { continue }
                let writes = existing(effect.target)?.writeCount
                effect.run(write: true)
                guard existing(effect.target)?.writeCount != writes else { continue }
                current?.depend(on: effect.target)
                for name in valueKeys(readBy: effect) { current?.depend(on: name) }
            }
        }
    }

    /// The value keys `node` reads, directly or through computed keys.
    func valueKeys(readBy node: ReactiveNode) -> [String] {
        var names: [String] = []
        var seen: Set<ObjectIdentifier> = []
        var stack = [node]
        while let next = stack.popLast() {
            next.forEachDependency { dependency in
                guard seen.insert(ObjectIdentifier(dependency)).inserted, let key = dependency as? KeyNode else { return }
                if key.kind == .computed { stack.append(key) } else { names.append(key.name) }
            }
        }
        return names
    }
}
