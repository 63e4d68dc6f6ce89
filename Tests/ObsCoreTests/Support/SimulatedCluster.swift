@testable import ObsCore

/// A shared log in memory for several stores in one process: the cluster mode's semantics without
/// etcd. It decides proposals in the order they come (at once, or when the test calls `decide()`),
/// checks what they depend on against the revisions each store applied, gives every committed
/// transaction the next revision, and applies it to every store in order, as each host applies
/// etcd's watch events. As EtcdLog, it commits a plain write (`Proposal.isPlainWrite`) without
/// comparing the bindings its host had applied, and has the hosts apply it with `bindingsUnseen`
/// when they changed since.
final class SimulatedCluster {
    /// One host's log: what its store proposes to.
    final class Member: SharedLog {
        unowned let cluster: SimulatedCluster
        let index: Int
        /// The revision of every record as this member's store last applied it.
        var applied: [String: UInt64] = [:]
        var appliedBindingsRev: UInt64 = 0
        var appliedGraphRev: UInt64 = 0

        init(cluster: SimulatedCluster, index: Int) {
            self.cluster = cluster
            self.index = index
        }

        func propose(_ proposal: Proposal, _ decided: @escaping (Decision) -> Void) {
            // The revisions the proposal was made from are this host's applied ones now, as an
            // etcd transaction's compares would be written now.
            let seen = proposal.depends.map { applied[$0] ?? 0 }
            let seenBindings = appliedBindingsRev, seenGraph = appliedGraphRev
            cluster.queue.append { [self] in
                cluster.decide(proposal, seen: seen, seenBindings: seenBindings, seenGraph: seenGraph, from: self, decided)
            }
            if cluster.decidesAtOnce { cluster.decide() }
        }

        func publish(channel: String, payload: JSONValue, _ done: @escaping (Result<Int, ObsError>) -> Void) {
            cluster.queue.append { [self] in
                guard cluster.available else { return done(.failure(ObsError(.unavailable, "simulated outage"))) }
                var local = 0
                for member in cluster.members {
                    let count = cluster.stores[member.index].watches.publish(channel, payload)
                    if member === self { local = count }
                }
                done(.success(local))
            }
            if cluster.decidesAtOnce { cluster.decide() }
        }
    }

    private(set) var stores: [Store] = []
    private(set) var members: [Member] = []
    let clock = ManualClock()
    /// Proposals not yet decided, in arrival order.
    private var queue: [() -> Void] = []
    var decidesAtOnce = true
    /// False plays a lost quorum: every proposal fails with `unavailable`.
    var available = true
    /// Set, every proposal fails with it (an answer of etcd's the host could not take, say).
    var refusal: ObsError?
    /// Set, a committed proposal is answered with it (no answer within the timeout, though etcd
    /// committed the write and every host applies it).
    var answersCommittedWith: ObsError?
    /// Each answers one proposal, first come first served, with `.retry(because:)`, after the
    /// clock moved on by `after` seconds (a lease granted again in that time, say).
    var retryAnswers: [(because: String, after: Double)] = []
    /// How many proposals were decided, whatever the decision.
    private(set) var proposalsDecided = 0
    private(set) var rev: UInt64 = 0
    /// Committed transactions, in order.
    private(set) var log: [StoredTransaction] = []
    private var records: [String: (created: UInt64, mod: UInt64, version: UInt64)] = [:]
    private var bindingsRev: UInt64 = 0
    /// The revision of the last change of a definition or binding (EtcdLog's graph epoch), and
    /// each member's as applied.
    private var graphRev: UInt64 = 0

    init(hosts: Int, configuration: StoreConfiguration = .init()) {
        for index in 0..<hosts {
            let store = try! Store(configuration: configuration, storage: MemoryStorage(), clock: clock)
            let member = Member(cluster: self, index: index)
            store.sharedLog = member
            stores.append(store)
            members.append(member)
        }
    }

    private var deciding = false

    /// Decides the first queued proposal only (those it causes are queued after the others).
    func decideNext() {
        guard !queue.isEmpty else { return }
        deciding = true
        defer { deciding = false }
        queue.removeFirst()()
    }

    /// Decides every queued proposal, in order (and those they cause, after them: a proposal made
    /// while a transaction is applied waits until every host has applied it).
    func decide() {
        guard !deciding else { return }
        deciding = true
        defer { deciding = false }
        while !queue.isEmpty { queue.removeFirst()() }
    }

    private func decide(_ proposal: Proposal, seen: [UInt64], seenBindings: UInt64, seenGraph: UInt64, from member: Member,
                        _ decided: (Decision) -> Void) {
        proposalsDecided += 1
        guard available else { return decided(.failed(ObsError(.unavailable, "simulated outage"))) }
        if let refusal { return decided(.failed(refusal)) }
        if !retryAnswers.isEmpty {
            let answer = retryAnswers.removeFirst()
            clock.advance(answer.after)
            return decided(.retry(rev: rev, because: answer.because))
        }
        let changes = proposal.changes
        let writesValues = !changes.putKeys.isEmpty || !changes.deletedKeys.isEmpty
        let changesShape = !changes.putDefinitions.isEmpty || !changes.deletedDefinitions.isEmpty
            || !changes.putBindings.isEmpty || !changes.deletedBindings.isEmpty
        let stale = zip(proposal.depends, seen).contains { (records[$0.0]?.mod ?? 0) != $0.1 }
            || (writesValues && !proposal.isPlainWrite && bindingsRev != seenBindings)
            || (changesShape && graphRev != seenGraph)
        let bindingsUnseen = proposal.isPlainWrite && bindingsRev != seenBindings
        if stale { return decided(.superseded(rev: rev)) }
        if changes.isEmpty { return decided(.committed(rev: rev)) }
        rev += 1
        var transaction = StoredTransaction(rev: rev)
        transaction.reason = changes.reason
        for name in changes.deletedKeys + changes.deletedDefinitions { records[name] = nil }
        for key in changes.putKeys {
            let record = records[key.key]
            records[key.key] = (record?.created ?? rev, rev, (record?.version ?? 0) + 1)
            var stored = key
            stored.rev = rev
            stored.createdRev = records[key.key]!.created
            stored.version = records[key.key]!.version
            transaction.putKeys.append(stored)
        }
        for definition in changes.putDefinitions {
            let record = records[definition.key]
            records[definition.key] = (record?.created ?? rev, rev, (record?.version ?? 0) + 1)
            transaction.putDefinitions.append(definition)
        }
        transaction.deletedKeys = changes.deletedKeys
        transaction.deletedDefinitions = changes.deletedDefinitions
        transaction.putBindings = changes.putBindings
        transaction.deletedBindings = changes.deletedBindings
        if !changes.putBindings.isEmpty || !changes.deletedBindings.isEmpty { bindingsRev = rev }
        if changesShape { graphRev = rev }
        log.append(transaction)
        for other in members {
            var copy = transaction
            // An ephemeral key's owner is a session of the host that set it.
            if other !== member {
                for index in copy.putKeys.indices where copy.putKeys[index].owner != nil { copy.putKeys[index].owner = StoredKey.remoteOwner }
            }
            // The records' revisions first, as EtcdLog notes them: what applying proposes sees them.
            for name in changes.deletedKeys + changes.deletedDefinitions { other.applied[name] = nil }
            for key in changes.putKeys { other.applied[key.key] = rev }
            for definition in changes.putDefinitions { other.applied[definition.key] = rev }
            other.appliedBindingsRev = bindingsRev
            other.appliedGraphRev = graphRev
            stores[other.index].apply(copy, bindingsUnseen: bindingsUnseen)
        }
        decided(answersCommittedWith.map { .failed($0) } ?? .committed(rev: rev))
    }
}
