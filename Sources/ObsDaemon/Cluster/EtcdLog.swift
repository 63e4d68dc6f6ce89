// Cluster mode: the store's shared log on etcd (the design and its reasons are in
// docs/architecture.md, "Cluster mode").
//
// - A proposal becomes one etcd transaction: compares on the mod revision of every record it
//   depends on (as this host applied them) and of the bindings epoch when it writes values, then
//   its puts and deletes. etcd's revision is the transaction's revision. A plain write (one value
//   key, nothing depended on) is a put with no compares: etcd 3.4 copies its buffer of pending
//   writes for every transaction's compares, which made a transaction cost it half again as much
//   CPU as a put and about 0.3 ms more (docs/performance.md). Its record says which bindings
//   epoch its host had applied; a host that applies it after a binding change it did not see
//   runs the bindings it sets off again (Store.apply(_:bindingsUnseen:)).
// - Every host watches the prefix from the revision after the one it applied and applies each
//   revision's events as one store transaction (`Store.apply`), so every host's computeds, watches
//   and history see the same sequence. An answer waits until its host applied its revision.
// - A proposal whose compares fail was made from a view that is behind: it is run again once this
//   host has applied a newer revision.
// - Ephemeral keys are put with this host's lease, kept alive from here: when the host dies, etcd
//   deletes them. TTL keys carry their deadline; every host's timer proposes the delete, compared
//   on the key's revision, so the first wins and it expires once.
// - Nothing here blocks the loop, but start-up (the first read of the prefix and the lease) and
//   `--check`, which run before it.
import EtcdClient
import Glibc
import ObsCore

final class EtcdLog: SharedLog {
    let client: EtcdClient
    let records: ClusterRecords
    private let log: Logger
    private let timeout: Double
    private let leaseTTL: Int64
    private unowned(unsafe) var store: Store!

    // What this host applied.
    /// The revision of every record (etcd key) under the prefix, as applied here.
    private var modRevisions: RecordRevisions
    /// Value keys that are ephemeral (put with a lease): deleting them without a reason is their
    /// host's lease running out.
    private var ephemeralKeys: Set<String> = []
    /// Another host's ephemeral keys: the owner their record names and the lease they were put
    /// with. A write here that keeps a key's owner (`incr`, a binding's write) puts the key with
    /// them, so that it still goes with that host's session or with that host (`put(_:)`).
    private var foreignOwners: [String: (owner: String, lease: Int64)] = [:]
    /// The newest revision etcd reported.
    private var etcdRevision: Int64 = 0
    /// Records under the prefix that could not be read, committed after etcd's revision when
    /// this host started (`startedAt`): new garbage, counted once each time one is put or
    /// deleted (`skipped_records`, which only grows while the host runs: an operator alerts on
    /// its increase). The last skipped record's key, of either kind.
    private var skipped = 0
    private var lastSkipped: String?
    /// The last of those logged, so that a record put again and again is logged once in a row.
    private var lastLoggedSkip: String?
    /// The distinct records committed up to `startedAt` that could not be read (in the state
    /// this host started from, in etcd's history it applied at start, or read again after a
    /// compaction): old garbage, which the hosts that ran then counted and logged, and which
    /// every restart would count again. Reported apart (`skipped_at_start`), and logged in one
    /// line at start.
    private var skippedBeforeStart: Set<[UInt8]> = []
    /// etcd's newest revision when this host read the state it starts from.
    private var startedAt: Int64 = 0

    // Under way.
    private enum Pending {
        /// `put`: the record of a plain write, sent as one put (`applyOwnPut`). `lease`: this
        /// host's lease when it was sent, which its ephemeral keys were put with.
        case proposal(Proposal, seen: UInt64, decided: (Decision) -> Void, put: PutRequest?, lease: Int64)
        case publish(done: (Result<Int, ObsError>) -> Void)
        case leaseGrant
        /// `lease`: the lease it renews, which may have been replaced by its answer.
        case keepAlive(lease: Int64)
        /// A keepalive of this host's lease sent when a proposal carrying both its ephemeral keys
        /// and another host's was refused because a lease was not found: which one (`leaseGone`).
        case leaseCheck(decided: (Decision) -> Void, lease: Int64)
        /// A page of everything under the prefix, read again after a compaction.
        case resync(PrefixRead)
        /// The removal of a definition's record that a later value of the same name replaced
        /// (`removeReplacedDefinition`): its outcome does not matter.
        case cleanup
        /// A linearizable read that asks whether etcd answers (`probe()`).
        case probe
        /// A linearizable read sent when a watch was set up at a revision older than this host
        /// applied (`seen`): its answer tells a member that lags from etcd's history gone back.
        case historyCheck(seen: UInt64)
    }
    private var pending: [EtcdRequestID: Pending] = [:]
    /// This host's plain writes applied from etcd's answer to them, before their watch's copy
    /// (`applyOwnPut`): `applied_from_answers` in `stats`.
    private var appliedFromAnswers = 0
    /// Decisions and answers waiting until this host has applied a revision, by that revision, and
    /// the records it held at the mod revisions given no longer at those (`gone`: deleted since).
    private var waiting: [(rev: UInt64, gone: [([UInt8], Int64)], deadline: Double, run: () -> Void, late: () -> Void)] = []
    /// Local watch counts of publishes, by revision, for the answers to this host's own: kept only
    /// while one of those is under way (every other host's publish would otherwise stay here).
    private var published: [UInt64: Int] = [:]
    private var publishesUnderWay = 0

    private var watch: EtcdRequestID?
    private var watchRetryAt: Double?
    /// Whether every watch asks etcd for fragments (a test hook: TestHooks.alwaysFragments).
    private let alwaysFragments: Bool
    /// How long the watch's messages wait before they are applied, and those waiting, oldest
    /// first (a test hook: TestHooks.holdWatch; 0 in production, where none wait).
    private let holdWatch: Double
    private var heldWatch: [(due: Double, id: EtcdRequestID, update: WatchUpdate)] = []
    /// The same for etcd's answers to proposals and to the reads after a compaction
    /// (TestHooks.holdAnswers).
    private let holdAnswers: (proposals: Double, resyncs: Double)
    private var heldAnswers: [(due: Double, request: Pending, result: Result<EtcdResponse, EtcdError>)] = []
    /// Set when a watch failed on a message over the client's bound (`maxResponseBytes`): the
    /// watches set up from then on ask etcd for fragments (WatchRequest.fragment), until one is
    /// set up after this host applied this revision, etcd's newest when it failed. A watch that
    /// fell behind gets up to 1,000 revisions in one message, and may fail so again every time
    /// it is set up; one that keeps up gets each revision as it commits, which etcd bounds
    /// (`--max-request-bytes`). Fragments are not asked otherwise: etcd 3.4 makes them in a
    /// time that grows with the square of their events, so a host far behind on small events
    /// catches up several times slower with them (`startWatch`).
    private var fragmentsUntil: Int64?
    /// This host takes its watch's messages slower than etcd sends them (it applies a long
    /// history of large values), and said so: once until it caught up (`watchBehind`).
    private var toldBehind = false
    private var lease: Int64 = 0
    private var leaseGrantUnderWay = false
    /// Proposals etcd refused because their ephemeral keys' lease was gone, to be run again
    /// (`.retry`) once this host holds a new one.
    private var waitingForLease: [(Decision) -> Void] = []
    private var nextKeepAlive: Double?
    private var lastFailure: String?
    /// Why the last watch ended, until one is set up again (`watchEnded`).
    private var watchEndedBecause: String?
    private var probeUnderWay = false
    /// A watch was set up again while a probe was under way: another is sent if that one fails (`probe`).
    private var probeAgain = false
    private var watchLive = false
    /// Since when this host has been behind the revision etcd's answers report, and when its
    /// watch last brought news: a watch on a member that hangs (stopped, its disk stalled) while
    /// the others go on brings nothing, and nothing else would end it (`watchStalled`).
    private var behindSince: Double?
    private var watchNewsAt: Double = 0
    /// Why what this host applied is no longer etcd's state, once it found out: etcd's history
    /// went back under it (its data lost and the cluster made again, or restored from an older
    /// snapshot), or an endpoint answered for another etcd cluster. It stops watching and refuses
    /// writes until restarted, and reads go on from what it applied (`diverge`).
    private var diverged: String?
    /// Why, as `diverge` was told: for a start that fails on it (`applyHistory`).
    private var divergedBecause: String?
    /// The ID of the etcd cluster this host read its state from at start.
    private var clusterID: UInt64 = 0
    /// At start, when the state was read as of an older revision (`startingRead`): etcd's newest
    /// revision then, and every record's mod revision as of it. `attach` applies etcd's history
    /// until this host holds that state.
    private var catchUp: (revision: Int64, records: RecordRevisions)?
    /// etcd's newest revision when this host started from an older one (`catchUp`): the hosts
    /// that ran then applied every revision up to it, and ran again the bindings a plain write
    /// of it had missed (`Store.apply(_:bindingsUnseen:)`). This host applies those revisions
    /// without running them again: its repair would be proposed from the view of that revision,
    /// compared on what it held then, and write a target deleted since (compared as absent then
    /// and now) a second time.
    private var repairedUpTo: UInt64 = 0
    /// The revision of the last read of everything under the prefix after a compaction
    /// (`resync`): the state this host holds has no history before it.
    private var resyncedAt: UInt64?
    /// When etcd last answered a request of this host's (monotonic seconds): while a host that
    /// starts applies etcd's history, etcd may send nothing for long and still be there
    /// (`applyHistory`).
    private var answeredAt: Double = 0

    /// Connects, reads everything under the prefix and takes a lease, waiting for the answers (at
    /// start-up, before the loop runs): the log, and the state to restore the store from.
    /// The most connections to etcd a host holds: its one watch of the prefix, and the client's
    /// requests under way (writes, the lease's keepalives, reads after a compaction) and idle.
    static func etcdConnections(_ settings: ClusterSettings) -> Int {
        EtcdClient.connectionsAtMost(settings.etcdConfiguration, watches: 1)
    }

    /// What debug builds' tests may change (Daemon reads them from the environment).
    struct TestHooks {
        /// Every watch asks etcd for fragments, as the watches set up after one failed as too
        /// large do: etcd 3.4 sends a long history of small events slowly then.
        var alwaysFragments = false
        /// The client's `maxWatchBacklogBytes`, for a history that passes it in a few MB.
        var watchBacklogBytes: Int?
        /// Seconds each message of the watch waits before it is applied, as if etcd sent it that
        /// much later: the tests of writes applied from etcd's answer (`applyOwnPut`) need the
        /// watch's copy to come after the answer.
        var holdWatch: Double = 0
        /// Seconds each answer to a proposal, and to a read of the prefix after a compaction, waits
        /// before it is taken: the tests of an answer that comes after this host renewed its
        /// lease, or after it found etcd's history gone, need it to come that late.
        var holdAnswers: (proposals: Double, resyncs: Double) = (0, 0)
    }

    static func start(_ settings: ClusterSettings, history: Int, log: Logger,
                      hooks: TestHooks = TestHooks()) throws(DaemonError) -> (EtcdLog, StoredState) {
        let client: EtcdClient
        do {
            var configuration = try settings.etcdConfigurationWithTLS()
            if let bytes = hooks.watchBacklogBytes { configuration.maxWatchBacklogBytes = bytes }
            client = try EtcdClient(configuration)
        } catch {
            throw DaemonError("cluster: \(error)")
        }
        for endpoint in settings.endpoints where endpoint.hasPrefix("http://") {
            log.warn("cluster: \(endpoint) is plain http: anyone on the network path can read and change the state (use https:// with etcd_cacert, etcd_cert and etcd_key)")
        }
        // This incarnation's name in its ephemeral keys' owners: random, so a restarted host is new.
        let records = ClusterRecords(prefix: Array(settings.prefix.utf8), host: String(UInt64.random(in: 1...UInt64.max), radix: 16))
        let etcdLog = EtcdLog(client: client, records: records, settings: settings, log: log, alwaysFragments: hooks.alwaysFragments,
                              holdWatch: hooks.holdWatch, holdAnswers: hooks.holdAnswers)
        let state: StoredState
        do {
            let (range, revision) = try etcdLog.startingRead(history: history)
            etcdLog.startedAt = etcdLog.catchUp?.revision ?? revision
            state = etcdLog.state(of: range, at: revision)
            guard case .leaseGrant(let grant) = try client.waitForAnswer(client.submit(.leaseGrant(ttl: settings.ephemeralTTL))) else {
                throw EtcdError.malformedResponse("a lease grant answered with another kind")
            }
            etcdLog.lease = grant.id
            etcdLog.clusterID = grant.header.clusterID
        } catch {
            client.close()
            throw DaemonError("cluster: cannot read \(settings.prefix) from etcd (\(settings.endpoints.joined(separator: ", "))): \(error)")
        }
        etcdLog.nextKeepAlive = monotonicSeconds() + Double(settings.ephemeralTTL) / 3
        let history = etcdLog.catchUp.map { "; applying etcd's history from there to revision \($0.revision)" } ?? ""
        log.info("cluster: \(state.keys.count) keys, \(state.definitions.count) definitions and \(state.bindings.count) bindings under \(settings.prefix) at revision \(state.rev)\(history); lease \(etcdLog.lease)")
        return (etcdLog, state)
    }

    /// What a host starts from: the state as of up to `history` revisions before etcd's newest
    /// (no older than etcd keeps), whose revisions since it applies before it serves (`attach`),
    /// so that its history holds what its watchers may resume from, as every running host's
    /// does: a watch resumed with `since` on a host started after that revision (restarted, or
    /// new) replays the changes, where a host that started from the newest state could only
    /// answer `compacted` and a snapshot. Sets `catchUp` to where applying ends. Without
    /// history kept (etcd compacted to its newest revision, or `history` 0), the newest state.
    private func startingRead(history: Int) throws(EtcdError) -> (range: RangeResponse, revision: Int64) {
        guard case .range(let head) = try client.waitForAnswer(client.submit(.range(.prefix(records.prefix, countOnly: true)))) else {
            throw EtcdError.malformedResponse("a range answered with another kind")
        }
        let newest = head.header.revision
        var from = max(1, newest - Int64(history))
        while from < newest {
            do throws(EtcdError) {
                let start = try PrefixRead.wait(client, prefix: records.prefix, revision: from)
                let records = try PrefixRead.wait(client, prefix: records.prefix, revision: newest, keysOnly: true).range
                catchUp = (newest, recordRevisions(records.kvs))
                return start
            } catch {
                guard case .compacted = error else { throw error }
                guard let oldest = try oldestRevision(before: from), oldest > from else { break }
                from = oldest
            }
        }
        return try PrefixRead.wait(client, prefix: records.prefix)
    }

    /// The oldest revision etcd keeps, learned from a watch of the prefix from `compacted`, a
    /// revision it no longer has (a failed read does not say): nil when etcd did not say so
    /// within `etcd_timeout`.
    private func oldestRevision(before compacted: Int64) throws(EtcdError) -> Int64? {
        let id = client.watch(.prefix(records.prefix, startRevision: compacted))
        defer { client.cancelWatch(id) }
        let deadline = monotonicSeconds() + timeout
        while case let left = deadline - monotonicSeconds(), left > 0 {
            var descriptor = pollfd(fd: completionFD, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, Int32(left * 1000) + 1)
            for case .watch(id, let update) in client.takeCompletions() {
                switch update {
                case .compacted(let oldest): return oldest
                // History came instead (a message of it over the client's bound, without fragments).
                case .events, .failed(.responseTooLarge): return nil
                case .failed(let error): throw error
                case .created, .progress: continue
                }
            }
        }
        return nil
    }

    /// Every record's mod revision, for the records this host applies (`modRevisions`).
    private func recordRevisions(_ kvs: [KeyValue]) -> RecordRevisions {
        var revisions = RecordRevisions(prefix: records.prefix)
        for kv in kvs where records.parse(kv.key) != nil { revisions[kv.key] = kv.modRevision }
        return revisions
    }

    /// `obsd --check` in cluster mode: reaches etcd, reads every record under the prefix and
    /// reports each one obsd could not read, with its key. The lines to print, and whether all is well.
    static func check(_ settings: ClusterSettings) -> (lines: [String], ok: Bool) {
        let records = ClusterRecords(prefix: Array(settings.prefix.utf8), host: "check")
        let configuration: EtcdConfiguration
        do throws(UnsafePathError) {
            configuration = try settings.etcdConfigurationWithTLS()
        } catch {
            return (["cluster: \(error)"], false)
        }
        let client: EtcdClient
        do {
            let status = try EtcdClient.check(configuration, prefix: records.prefix)
            client = try EtcdClient(configuration)
            defer { client.close() }
            let (range, revision) = try PrefixRead.wait(client, prefix: records.prefix)
            var problems: [String] = []
            for kv in range.kvs {
                let key = String(decoding: kv.key, as: UTF8.self)
                guard let (kind, name) = records.parse(kv.key) else {
                    problems.append("  \(key): not a record of obsd's")
                    continue
                }
                do throws(ClusterRecords.Unreadable) {
                    switch kind {
                    case .value: _ = try records.storedKey(name, kv)
                    case .definition: _ = try records.storedDefinition(name, kv)
                    case .binding: _ = try records.storedBinding(name, kv)
                    case .meta: break
                    }
                } catch {
                    problems.append("  \(key): \(error.message)")
                }
            }
            let head = "cluster: ok (etcd \(status.status.version) at \(status.endpoint), revision \(revision), \(range.kvs.count) records under \(settings.prefix))"
            if problems.isEmpty { return ([head], true) }
            return (["cluster: \(problems.count) records under \(settings.prefix) cannot be read (they are skipped):"] + problems, false)
        } catch {
            return (["cluster: cannot read \(settings.prefix) from etcd (\(settings.endpoints.joined(separator: ", "))): \(error)"], false)
        }
    }

    private init(client: EtcdClient, records: ClusterRecords, settings: ClusterSettings, log: Logger, alwaysFragments: Bool,
                 holdWatch: Double, holdAnswers: (proposals: Double, resyncs: Double)) {
        self.client = client
        self.records = records
        modRevisions = RecordRevisions(prefix: records.prefix)
        self.log = log
        self.alwaysFragments = alwaysFragments
        self.holdWatch = holdWatch
        self.holdAnswers = holdAnswers
        timeout = settings.timeout
        leaseTTL = settings.ephemeralTTL
    }

    /// Reads the CA, certificate and key again (at a reload, after certificates were renewed):
    /// connections made from now on use them. Files that break the rules or cannot be read are
    /// logged and the ones in use kept. Whether the new files are in use.
    @discardableResult
    func reloadTLS(_ settings: ClusterSettings) -> Bool {
        do {
            let material = try settings.tlsMaterial()
            guard material != client.configuration.tls else { return true }
            try client.replaceTLS(material)
            log.info("cluster: read the TLS files again; new connections to etcd use them")
            return true
        } catch {
            log.error("reload: cluster: \(error); keeping the TLS files in use")
            return false
        }
    }

    /// Starts applying: the store holds the state `start` returned; watch from the next revision.
    /// When that state is older than etcd's (`catchUp`), waits until this host has applied etcd's
    /// history up to where etcd was at start, before the daemon serves; throws when it cannot
    /// (`applyHistory`). `report` gets where it is, every `reportInterval` seconds meanwhile.
    func attach(_ store: Store, report: (String) -> Void = { _ in }) throws(DaemonError) {
        self.store = store
        store.sharedLog = self
        removeUnloadedBindingRecords()
        startWatch()
        if let target = catchUp {
            catchUp = nil
            repairedUpTo = UInt64(target.revision)
            try applyHistory(until: target, report: report)
        }
        if !skippedBeforeStart.isEmpty {
            let names = skippedBeforeStart.map { String(decoding: $0, as: UTF8.self) }.sorted()
            log.warn("cluster: \(names.count) records under \(String(decoding: records.prefix, as: UTF8.self)) committed before this "
                     + "host started cannot be read and are skipped (skipped_at_start; obsd --check lists those still there): "
                     + names.prefix(3).joined(separator: ", ") + (names.count > 3 ? ", ..." : ""))
        }
    }

    /// Seconds between two reports of a start that applies etcd's history.
    static let reportInterval = 10.0

    /// At start: applies what the watch brings until this host holds the state etcd held at
    /// `target.revision`: it applied that revision, or every record's mod revision is as etcd
    /// had it then. (The second ends it when the revisions up to etcd's newest were not all
    /// this prefix's; a key made and deleted again after the last change of a record left may
    /// come after, in order, as any change does.)
    ///
    /// etcd out of reach meanwhile (or without a quorum) fails the start, as at start: what this
    /// host applied is older than etcd's state when it started (up to `history` revisions),
    /// older than what every other host serves, and than what a client may have read on one of
    /// them; a host serves no such state. (A host that runs when etcd goes away serves the newest
    /// state it applied.) The watch alone cannot tell: etcd 3.4 sends a watch that fell behind
    /// slowly when its revisions hold many small events (it splits a message into fragments in
    /// a time that grows with the square of their events: 100,000 events of 50 bytes took it
    /// 40 s), and brings nothing meanwhile. So the start fails when neither the watch nor a
    /// request has been answered for twice `etcd_timeout`; a linearizable read is sent every
    /// half `etcd_timeout` to ask (the lease's renewals may be far apart). Twice: a watch on a
    /// member that hangs, while the others keep the quorum, is found out after `etcd_timeout`
    /// and set up again on the member that answers (`restartStalledWatch`). What it applied found
    /// no longer etcd's state (`diverge`: another etcd cluster answered) fails the start too.
    private func applyHistory(until target: (revision: Int64, records: RecordRevisions), report: (String) -> Void) throws(DaemonError) {
        let started = store.rev
        resyncedAt = nil
        var applied = store.rev
        var progressAt = monotonicSeconds()
        var nextAsk = progressAt, nextReport = progressAt + Self.reportInterval
        let patience = 2 * timeout
        // Every record is at its revision only once the newest of them is applied: the records
        // are compared from then on, not at every answer.
        let newestRecord = UInt64(target.records.newest ?? 0)
        func cannotApply(_ why: String) -> DaemonError {
            DaemonError("cluster: cannot apply etcd's history up to revision \(target.revision), where etcd was when this host "
                        + "started: \(why); a host serves no state older than etcd's at its start")
        }
        while store.rev < UInt64(target.revision), store.rev < newestRecord || modRevisions != target.records {
            // What it applied is no longer etcd's state (another etcd cluster answered): the
            // history it missed will not come.
            if let divergedBecause { throw cannotApply(divergedBecause) }
            var descriptor = pollfd(fd: completionFD, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, 100)
            let now = monotonicSeconds()
            processCompletions(now: now)
            tick(now: now)
            if store.rev != applied {
                applied = store.rev
                progressAt = now
            } else if now - max(progressAt, answeredAt) > patience {
                throw cannotApply("etcd answered nothing for \(patience) s, at revision \(store.rev)"
                                  + (lastFailure.map { " (the last failure: \($0))" } ?? ""))
            }
            if now >= nextAsk {
                nextAsk = now + timeout / 2
                let ask = RangeRequest(key: records.bindingsEpoch, countOnly: true)
                pending[client.submit(.range(ask), timeout: .milliseconds(Int64(timeout * 1000)))] = .historyCheck(seen: store.rev)
            }
            if now >= nextReport {
                nextReport = now + Self.reportInterval
                let status = "applying etcd's history: at revision \(store.rev) of \(target.revision)"
                log.info("cluster: \(status)")
                report(status)
            }
        }
        // etcd compacted its history past this host's revision meanwhile: it read the prefix again,
        // and holds no history before that read (its watchers got `compacted` and a snapshot).
        let from = resyncedAt ?? started
        let reread = resyncedAt == nil ? "" : ", read again at revision \(from) after etcd compacted its history"
        // On an etcd shared with others, the prefix's last write may be older than etcd's revision
        // at the start: the records matched etcd's before the host reached that revision.
        let quiet = store.rev < UInt64(target.revision)
            ? "; nothing under \(String(decoding: records.prefix, as: UTF8.self)) changed from there to revision \(target.revision), where etcd was at the start" : ""
        log.info("cluster: applied etcd's history from revision \(from) to \(store.rev)\(reread)\(quiet) (a watch may resume from \(from) on, "
                 + "as history_bytes allows)")
    }

    /// The descriptor the loop watches: the etcd client's epoll set.
    var completionFD: Int32 { client.completionFD }

    /// Shutdown: ends the lease (this host's ephemeral keys go at once, for every host), waiting a
    /// moment for the answer, and closes the client.
    func close() {
        if lease != 0, let answer = try? client.waitForAnswer(client.submit(.leaseRevoke(id: lease), timeout: .seconds(1))),
           case .leaseRevoke = answer {
            log.info("cluster: lease \(lease) revoked")
        }
        client.close()
    }

    // MARK: SharedLog

    func propose(_ proposal: Proposal, _ decided: @escaping (Decision) -> Void) {
        if let diverged { return decided(.failed(ObsError(.unavailable, diverged))) }
        let request = request(for: proposal)
        var put: PutRequest?
        if case .put(let record) = request { put = record }
        let id = client.submit(request, timeout: .milliseconds(Int64(timeout * 1000)))
        pending[id] = .proposal(proposal, seen: store.rev, decided: decided, put: put, lease: lease)
    }

    func publish(channel: String, payload: JSONValue, _ done: @escaping (Result<Int, ObsError>) -> Void) {
        if let diverged { return done(.failure(ObsError(.unavailable, diverged))) }
        let put = PutRequest(key: records.publishKey, value: records.publish(channel: channel, payload: payload))
        publishesUnderWay += 1
        pending[client.submit(.put(put), timeout: .milliseconds(Int64(timeout * 1000)))] = .publish(done: done)
    }

    var stats: [(String, JSONValue)] {
        let applied = store.rev
        return [
            ("state", .string(state)), ("endpoints", .array(client.configuration.endpoints.map { .string($0) })),
            ("endpoint", .string(client.currentEndpoint)), ("api", .string(client.configuration.api.rawValue)),
            ("prefix", .string(String(decoding: records.prefix, as: UTF8.self))),
            ("applied_rev", .int(Int64(applied))), ("etcd_rev", .int(max(etcdRevision, Int64(applied)))),
            ("lag_revisions", .int(max(0, etcdRevision - Int64(applied)))), ("skipped_records", .int(Int64(skipped))),
            ("skipped_at_start", .int(Int64(skippedBeforeStart.count))),
            ("requests_sent", .int(Int64(client.requestsUnderWay.sent))), ("requests_waiting", .int(Int64(client.requestsUnderWay.waiting))),
            ("applied_from_answers", .int(Int64(appliedFromAnswers))),
        ] + (lastSkipped.map { [("last_skipped", .string($0))] } ?? [])
            + ((diverged ?? lastFailure).map { [("last_failure", .string($0))] } ?? [])
    }

    /// `connected`: watching and deciding; `degraded`: the watch is being set up again (reads are
    /// as of `applied_rev`); `unavailable`: etcd does not answer (writes fail); `diverged`: what this
    /// host applied is no longer etcd's state (writes fail until it is restarted; `diverge`).
    private var state: String {
        if diverged != nil { return "diverged" }
        if lastFailure != nil { return "unavailable" }
        return watchLive ? "connected" : "degraded"
    }

    /// The request a proposal becomes: a put for a plain write, a transaction otherwise.
    private func request(for proposal: Proposal) -> EtcdRequest {
        guard proposal.isPlainWrite, let key = proposal.changes.putKeys.first else { return .txn(transaction(for: proposal)) }
        return .put(put(key, bindingsRev: modRevisions[records.bindingsEpoch] ?? 0))
    }

    /// The put of a value key's record: an ephemeral key of a session of this host's with this
    /// host's lease; another host's (`StoredKey.remoteOwner`) with its owner and lease as applied.
    private func put(_ key: StoredKey, bindingsRev: Int64? = nil) -> PutRequest {
        let recordKey = records.key(.value, key.key)
        switch key.owner {
        case nil:
            return PutRequest(key: recordKey, value: records.value(key, owner: nil, bindingsRev: bindingsRev))
        case StoredKey.remoteOwner?:
            let foreign = foreignOwners[key.key]
            return PutRequest(key: recordKey, value: records.value(key, owner: foreign?.owner, bindingsRev: bindingsRev),
                              lease: foreign?.lease ?? 0)
        case let session?:
            return PutRequest(key: recordKey, value: records.value(key, owner: records.owner(session: session), bindingsRev: bindingsRev),
                              lease: lease)
        }
    }

    /// The transaction a proposal becomes.
    private func transaction(for proposal: Proposal) -> Txn {
        let changes = proposal.changes
        var txn = Txn()
        for name in proposal.depends {
            for kind in [ClusterRecords.Kind.value, .definition] {
                let key = records.key(kind, name)
                txn.compares.append(Compare(key: key, .equal, .modRevision(modRevisions[key] ?? 0)))
                txn.failure.append(.range(RangeRequest(key: key)))
            }
        }
        if !changes.putKeys.isEmpty || !changes.deletedKeys.isEmpty {
            let epoch = records.bindingsEpoch
            txn.compares.append(Compare(key: epoch, .equal, .modRevision(modRevisions[epoch] ?? 0)))
            txn.failure.append(.range(RangeRequest(key: epoch)))
        }
        // Changes of the graph's shape are made one at a time for the cluster: of two that would
        // close a cycle together (bindings x -> y and y -> x, computeds a = $b and b = $a, each
        // refused on one host), the second is run again, sees the first, and is refused too.
        let changesShape = !changes.putDefinitions.isEmpty || !changes.deletedDefinitions.isEmpty
            || !changes.putBindings.isEmpty || !changes.deletedBindings.isEmpty
        if changesShape {
            let epoch = records.graphEpoch
            txn.compares.append(Compare(key: epoch, .equal, .modRevision(modRevisions[epoch] ?? 0)))
            txn.failure.append(.range(RangeRequest(key: epoch)))
            txn.success.append(.put(PutRequest(key: epoch, value: Array("{}".utf8))))
        }
        for target in changes.deletedBindings { txn.success.append(.deleteRange(DeleteRangeRequest(key: records.key(.binding, target)))) }
        for name in changes.deletedDefinitions { txn.success.append(.deleteRange(DeleteRangeRequest(key: records.key(.definition, name)))) }
        for name in changes.deletedKeys { txn.success.append(.deleteRange(DeleteRangeRequest(key: records.key(.value, name)))) }
        for definition in changes.putDefinitions {
            txn.success.append(.put(PutRequest(key: records.key(.definition, definition.key), value: records.definition(definition))))
        }
        for key in changes.putKeys { txn.success.append(.put(put(key))) }
        for binding in changes.putBindings {
            txn.success.append(.put(PutRequest(key: records.key(.binding, binding.to), value: records.binding(binding))))
        }
        if !changes.putBindings.isEmpty || !changes.deletedBindings.isEmpty {
            txn.success.append(.put(PutRequest(key: records.bindingsEpoch, value: Array("{}".utf8))))
        }
        // Deletes no client asked for say why; a client's delete of an ephemeral key says it was
        // none, so that other hosts do not take it for the key's lease running out.
        if let reason = changes.reason {
            txn.success.append(.put(PutRequest(key: records.reasonKey, value: Array(JSONValue.string(reason).encoded.utf8))))
        } else if changes.deletedKeys.contains(where: ephemeralKeys.contains) {
            txn.success.append(.put(PutRequest(key: records.reasonKey, value: Array("null".utf8))))
        }
        return txn
    }

    // MARK: Completions

    /// Takes what etcd answered: decisions, applied revisions, lease renewals.
    func processCompletions(now: Double) {
        for completion in client.takeCompletions() {
            switch completion {
            case .watch(let id, let update):
                guard id == watch else { continue }
                if holdWatch > 0 {
                    heldWatch.append((now + holdWatch, id, update))
                    continue
                }
                apply(update, now: now)
            case .response(let id, let result):
                guard let request = pending.removeValue(forKey: id) else { continue }
                switch request {
                case .proposal where holdAnswers.proposals > 0:
                    heldAnswers.append((now + holdAnswers.proposals, request, result))
                    continue
                case .resync where holdAnswers.resyncs > 0:
                    heldAnswers.append((now + holdAnswers.resyncs, request, result))
                    continue
                default: break
                }
                answered(request, result, now: now)
            }
        }
        releaseHeldWatch(now: now)
        fireWaiting(now: now)
        if Int64(store.rev) >= etcdRevision {
            behindSince = nil
            toldBehind = false
        } else if behindSince == nil {
            behindSince = now
        }
    }

    /// When the watch counts as stalled: `etcd_timeout` after the later of this host falling
    /// behind etcd's answers and the watch's last news.
    private var watchStalledAt: Double? {
        guard watch != nil, let behindSince else { return nil }
        return max(behindSince, watchNewsAt) + timeout
    }

    /// A watch that brought nothing for `etcd_timeout` while etcd's answers say this host is
    /// behind, on a member other than the one that answers this host's requests, is on a member
    /// that hangs (stopped, its disk stalled) while the others go on: it is ended and set up
    /// again from the last revision applied, on the endpoint that answers. (On the member that
    /// answers, a watch that brings nothing is not behind: etcd counts one revision for all its
    /// keys, and other prefixes' writes move it on.)
    private func restartStalledWatch(now: Double) {
        guard let due = watchStalledAt, due <= now, let stalled = watch else { return }
        guard let member = client.endpoint(ofWatch: stalled), member != client.currentEndpoint else {
            behindSince = nil
            return
        }
        log.warn("cluster: the watch of etcd on \(member) brought nothing for \(timeout) s while etcd is at revision \(etcdRevision) and this host at \(store.rev); watching again from \(client.currentEndpoint)")
        client.cancelWatch(stalled)
        watch = nil
        watchLive = false
        behindSince = now
        watchNewsAt = now
        startWatch()
    }

    private func answered(_ request: Pending, _ result: Result<EtcdResponse, EtcdError>, now: Double) {
        if case .success(let response) = result, response.header.clusterID != clusterID, clusterID != 0, response.header.clusterID != 0 {
            let error = diverge("etcd at \(client.currentEndpoint) answered for cluster \(String(response.header.clusterID, radix: 16)), "
                                + "not cluster \(String(clusterID, radix: 16)) this host read its state from (its endpoints name "
                                + "members of different clusters, or etcd was made again)")
            switch request {
            case .proposal(_, _, let decided, _, _), .leaseCheck(let decided, _): decided(.failed(error))
            case .publish(let done):
                publishAnswered()
                done(.failure(error))
            case .leaseGrant:
                leaseGrantUnderWay = false
                let proposals = waitingForLease
                waitingForLease.removeAll()
                for decided in proposals { decided(.failed(error)) }
            case .probe: probeUnderWay = false
            default: break
            }
            return
        }
        if case .success(let response) = result {
            etcdRevision = max(etcdRevision, response.header.revision)
            answeredAt = now
            // The outage's end, logged as its start was (`failure`): a log that says only that
            // etcd went away leaves its reader to guess whether it came back.
            if let lastFailure {
                log.info("cluster: etcd answers again (\(client.currentEndpoint)); the last failure was: \(lastFailure)")
            }
            lastFailure = nil
        }
        switch (request, result) {
        case (.proposal(let proposal, let seen, let decided, _, _), .success(.txn(let response))):
            let rev = UInt64(response.header.revision)
            if response.succeeded {
                if proposal.changes.isEmpty {
                    decided(.committed(rev: store.rev))
                } else if rev <= seen {
                    decided(.failed(wentBack(seen: seen, found: "committed a write at revision \(rev)")))
                } else {
                    afterApplying(rev, now: now, run: { decided(.committed(rev: rev)) },
                                  late: { decided(.failed(self.notApplied(rev))) })
                }
            } else {
                // What changed first: the newest revision among the records compared (a deleted one
                // shows none), and anyway one past what this host had when it proposed.
                var changedAt = seen + 1
                var found: Set<[UInt8]> = []
                for case .range(let range) in response.responses {
                    for kv in range.kvs {
                        changedAt = max(changedAt, UInt64(kv.modRevision))
                        found.insert(kv.key)
                    }
                }
                // A record compared that etcd no longer holds and this host still does: another host
                // deleted it (an expiry every host proposes, a `del`), at a revision the answer does
                // not tell. Run again once this host applied that delete, not at every revision
                // before it: each run would be refused again.
                var gone: [([UInt8], Int64)] = []
                for name in proposal.depends {
                    for kind in [ClusterRecords.Kind.value, .definition] {
                        let key = records.key(kind, name)
                        if !found.contains(key), let held = modRevisions[key] { gone.append((key, held)) }
                    }
                }
                afterApplying(changedAt, gone: gone, now: now, run: { decided(.superseded(rev: changedAt)) }, late: {
                    if self.store.rev >= changedAt {
                        decided(.failed(ObsError(.unavailable, "etcd no longer holds a key this write depends on, but this host has not "
                                                 + "applied its delete within \(self.timeout) s (its watch of etcd is behind or cut)")))
                    } else {
                        decided(.failed(self.notApplied(changedAt)))
                    }
                })
            }
        case (.proposal(_, let seen, let decided, let put, _), .success(.put(let response))):
            let rev = UInt64(response.header.revision)
            if rev <= seen { return decided(.failed(wentBack(seen: seen, found: "committed a write at revision \(rev)"))) }
            if let put, store.rev == rev - 1, applyOwnPut(put, at: rev) { appliedFromAnswers += 1 }
            afterApplying(rev, now: now, run: { decided(.committed(rev: rev)) },
                          late: { decided(.failed(self.notApplied(rev))) })
        case (.proposal(let proposal, _, let decided, _, let sentWith), .failure(.leaseNotFound)):
            leaseGone(proposal, sentWith: sentWith, decided)
        case (.proposal(_, _, let decided, _, _), .failure(let error)):
            decided(.failed(refusal(error) ?? failure(error)))
        case (.publish(let done), .success(let response)):
            let rev = UInt64(response.header.revision)
            afterApplying(rev, now: now, run: {
                let delivered = self.published.removeValue(forKey: rev) ?? 0
                self.publishAnswered()
                done(.success(delivered))
            }, late: {
                self.publishAnswered()
                done(.failure(self.notApplied(rev)))
            })
        case (.publish(let done), .failure(let error)):
            publishAnswered()
            done(.failure(refusal(error) ?? failure(error)))
        case (.leaseGrant, .success(.leaseGrant(let grant))):
            lease = grant.id
            leaseGrantUnderWay = false
            log.info("cluster: new lease \(lease)")
            let proposals = waitingForLease
            waitingForLease.removeAll()
            for decided in proposals { decided(.retry(rev: store.rev, because: Self.leaseRenewed)) }
        case (.keepAlive(let renewed), .success(.leaseKeepAlive(let renewal))) where renewal.ttl == 0 && renewed == lease:
            // The lease ran out (etcd was out of reach longer than its TTL): this host's ephemeral
            // keys are gone for every host. Take a new one for the keys set from now on.
            renewLease()
        case (.resync(var reading), .success(.range(let page))):
            do throws(EtcdError) {
                try reading.take(page)
            } catch {
                _ = failure(error)
                watchRetryAt = now + 1
                break
            }
            if reading.done, let range = reading.read {
                resync(range, at: reading.revision)
            } else {
                pending[client.submit(.range(reading.nextPage))] = .resync(reading)
            }
        case (.resync(var reading), .failure(let error)):
            if reading.retry(after: error) {
                pending[client.submit(.range(reading.nextPage))] = .resync(reading)
            } else {
                _ = failure(error)
                watchRetryAt = now + 1
            }
        case (.leaseGrant, .failure(let error)):
            leaseGrantUnderWay = false
            let refused = failure(error)
            let proposals = waitingForLease
            waitingForLease.removeAll()
            for decided in proposals { decided(.failed(refused)) }
        case (.keepAlive(let renewed), .failure(.leaseNotFound)) where renewed == lease:
            renewLease()
        case (.keepAlive, .failure(.leaseNotFound)):
            // A lease already replaced: nothing of this host's is put with it any more.
            break
        case (.keepAlive, .failure(let error)):
            _ = failure(error)
        case (.probe, .failure(let error)):
            probeUnderWay = false
            // Asked again meanwhile (a watch set up again since it was sent): a failure from
            // before that would show an outage that may have ended. The new probe tells.
            if probeAgain { probe() } else { _ = failure(error) }
        case (.probe, .success):
            // etcd answers: whatever a probe asked for meanwhile would tell no more.
            probeUnderWay = false
            probeAgain = false
        case (.leaseCheck(let decided, let checked), .success(.leaseKeepAlive(let renewal))):
            if checked != lease {
                decided(.retry(rev: store.rev, because: Self.leaseRenewed))
            } else if renewal.ttl == 0 {
                waitingForLease.append(decided)
                renewLease()
            } else {
                decided(.failed(Self.foreignLeaseGone))
            }
        case (.leaseCheck(let decided, let checked), .failure(.leaseNotFound)):
            if checked != lease { return decided(.retry(rev: store.rev, because: Self.leaseRenewed)) }
            waitingForLease.append(decided)
            renewLease()
        case (.leaseCheck(let decided, _), .failure(let error)):
            decided(.failed(refusal(error) ?? failure(error)))
        case (.historyCheck(let seen), .success(let response)) where UInt64(response.header.revision) < seen:
            _ = wentBack(seen: seen, found: "answered a linearizable read at revision \(response.header.revision)")
        default:
            break
        }
    }

    /// etcd committing a write at a revision this host had applied (`seen`) before it proposed the
    /// write, or answering a linearizable read sent after that at an older revision, cannot be:
    /// etcd's history went back under this host. (A watch set up again on a member that lags may
    /// report an older revision for a moment: only a reason to ask.)
    private func wentBack(seen: UInt64, found: String) -> ObsError {
        diverge("etcd's history went back: it \(found), but this host had applied revision \(seen) (etcd's data lost "
                + "and the cluster made again, or restored from an older snapshot)")
    }

    /// What this host applied is no longer etcd's state: whatever it applied next would go on top
    /// of a state etcd does not have. It stops watching and refuses writes (reads go on, as during
    /// an outage) until an operator restarts it, when it reads etcd's state. The error for writes.
    private func diverge(_ why: String) -> ObsError {
        if diverged == nil {
            let message = "\(why); this host refuses writes and serves what it applied until it is restarted"
            log.error("cluster: \(message)")
            diverged = message
            divergedBecause = why
            if let watch { client.cancelWatch(watch) }
            watch = nil
            watchLive = false
        }
        return ObsError(.unavailable, diverged!)
    }

    /// Asks for a new lease once this host's is found gone: its ephemeral keys were removed.
    /// etcd refused `proposal` because a lease its ephemeral keys are put with was not found: this
    /// host's own (revoked, or run out while etcd was out of reach), whose keys went with it, or
    /// another host's (`put(_:)`), gone with that host's keys, which this host applies when its
    /// watch brings their delete. etcd applied nothing. With this host's lease, the write runs
    /// again once there is a new one: not sent again as it was, since its compares would be
    /// written from revisions applied since, which its changes were not made from (another host
    /// may have taken the key). With another host's, it fails. With both, a keepalive tells which.
    private func leaseGone(_ proposal: Proposal, sentWith: Int64, _ decided: @escaping (Decision) -> Void) {
        var own = false, foreign = false
        for key in proposal.changes.putKeys {
            switch key.owner {
            case nil: break
            case StoredKey.remoteOwner?: foreign = true
            case _?: own = true
            }
        }
        if own, sentWith != lease {
            // Sent with a lease this host has replaced since: run again with the new one (and
            // not a new lease again, which would leave the keys put with this one to run out).
            decided(.retry(rev: store.rev, because: Self.leaseRenewed))
        } else if foreign && own {
            pending[client.submit(.leaseKeepAlive(id: lease), timeout: .seconds(timeout))] = .leaseCheck(decided: decided, lease: lease)
        } else if foreign {
            decided(.failed(Self.foreignLeaseGone))
        } else {
            waitingForLease.append(decided)
            renewLease()
        }
    }

    private static let foreignLeaseGone = ObsError(.unavailable, "another host's ephemeral key this write changes is gone with that "
                                                   + "host's lease (etcd: requested lease not found); try again")
    private static let leaseRenewed = "etcd had dropped this host's lease for ephemeral keys (revoked, or run out while etcd "
        + "was out of reach), and the host took a new one"

    private func renewLease() {
        guard !leaseGrantUnderWay else { return }
        leaseGrantUnderWay = true
        log.warn("cluster: lease \(lease) expired or was revoked; this host's ephemeral keys were removed")
        pending[client.submit(.leaseGrant(ttl: leaseTTL))] = .leaseGrant
    }

    /// One of this host's publishes is answered (or failed): with none left under way, the counts
    /// kept for them are of no use.
    private func publishAnswered() {
        publishesUnderWay -= 1
        if publishesUnderWay == 0 { published.removeAll(keepingCapacity: false) }
    }

    /// A request etcd refused for what it is, not for an outage: the client's error, and etcd
    /// is no less available for it. nil for any other failure.
    private func refusal(_ error: EtcdError) -> ObsError? {
        guard case .requestTooLarge(let message) = error else { return nil }
        return ObsError(.tooLarge, "etcd refused the transaction as too large (\(message)): one obsd transaction is one etcd "
                        + "transaction, bounded by etcd's --max-request-bytes (1.5 MiB by default) and --max-txn-ops (128)",
                        details: ["limit": "etcd"])
    }

    /// An etcd failure as a client sees it; logged once per outage.
    private func failure(_ error: EtcdError) -> ObsError {
        let message = "\(error)"
        if lastFailure == nil { log.warn("cluster: \(message)") }
        lastFailure = message
        switch error {
        case .unavailable(_, let mayHaveBeenApplied):
            // Said only when it can be true: a write refused before etcd took it (every member
            // refused the connection, or answered "no leader") was not applied. Said once: the
            // message may say it already, after the member whose answer was lost.
            let said = message.contains(EtcdError.mayHaveBeenAppliedNote)
            return ObsError(.unavailable, mayHaveBeenApplied && !said ? "\(message) (a write etcd received before that may still be committed)" : message)
        case .closed, .tlsFailed, .authenticationFailed, .leaseNotFound:
            // etcd cannot be reached as this host is set up to reach it (a certificate or the
            // credentials refused), or refused the new lease too: nothing was written, and a
            // fixed setup serves writes again.
            return ObsError(.unavailable, message)
        default:
            return ObsError(.internal, message)
        }
    }

    private func notApplied(_ rev: UInt64) -> ObsError {
        ObsError(.unavailable, "etcd committed revision \(rev), but this host has not applied it within \(timeout) s (its watch of etcd is behind or cut)")
    }

    private func afterApplying(_ rev: UInt64, gone: [([UInt8], Int64)] = [], now: Double, run: @escaping () -> Void,
                               late: @escaping () -> Void) {
        if store.rev >= rev, isApplied(gone) { return run() }
        waiting.append((rev, gone, now + timeout, run, late))
    }

    /// Whether this host holds none of `gone`'s records at the revision given any more.
    private func isApplied(_ gone: [([UInt8], Int64)]) -> Bool {
        gone.allSatisfy { modRevisions[$0.0] != $0.1 }
    }

    /// The held watch messages that are due, applied in order (TestHooks.holdWatch).
    private func releaseHeldWatch(now: Double) {
        while let first = heldWatch.first, first.due <= now {
            heldWatch.removeFirst()
            if first.id == watch { apply(first.update, now: now) }
        }
        while let first = heldAnswers.first, first.due <= now {
            heldAnswers.removeFirst()
            answered(first.request, first.result, now: now)
        }
    }

    private func fireWaiting(now: Double) {
        guard !waiting.isEmpty else { return }
        let applied = store.rev
        var due: [(run: () -> Void, late: () -> Void, ready: Bool)] = []
        waiting.removeAll { entry in
            let ready = entry.rev <= applied && (entry.gone.isEmpty || isApplied(entry.gone))
            guard ready || entry.deadline <= now else { return false }
            due.append((entry.run, entry.late, ready))
            return true
        }
        for entry in due {
            if entry.ready { entry.run() } else { entry.late() }
        }
    }

    // MARK: The watch

    private func startWatch() {
        watchRetryAt = nil
        guard diverged == nil else { return }
        if let until = fragmentsUntil, Int64(store.rev) >= until {
            fragmentsUntil = nil
            log.info("cluster: this host applied revision \(until), where etcd was when its watch asked for fragments; "
                     + "watching without them again")
        }
        let fragment = alwaysFragments || fragmentsUntil != nil
        watch = client.watch(.prefix(records.prefix, startRevision: Int64(store.rev) + 1, fragment: fragment))
    }

    /// A watch without fragments failed on a message over the client's bound: etcd sends a
    /// watch that fell behind up to 1,000 revisions in one message. Not an outage: the watch is
    /// set up again at once, asking etcd for fragments (`fragmentsUntil`); logged once for it.
    private func watchAgainWithFragments(limit: Int) {
        watchLive = false
        watch = nil
        fragmentsUntil = max(etcdRevision, Int64(store.rev) + 1)
        log.warn("cluster: a message of etcd's watch from revision \(store.rev + 1) passed the client's bound of \(limit) bytes "
                 + "(a watch that fell behind gets up to 1,000 revisions in one); watching again with etcd splitting its "
                 + "messages into fragments (slower for etcd on many small events) until this host applied revision "
                 + "\(fragmentsUntil!)")
        startWatch()
    }

    private func apply(_ update: WatchUpdate, now: Double) {
        switch update {
        case .created(let revision, let watchClusterID):
            // A watch that failed over to a member of another etcd cluster (endpoints that name
            // members of two) would bring that cluster's records as if they were this one's: found
            // here, before any of them is applied, not at the next answer to a request.
            if watchClusterID != clusterID, clusterID != 0, watchClusterID != 0 {
                let member = watch.flatMap { client.endpoint(ofWatch: $0) } ?? client.currentEndpoint
                _ = diverge("the watch of etcd at \(member) is for cluster "
                            + "\(String(watchClusterID, radix: 16)), not cluster \(String(clusterID, radix: 16)) this host read its "
                            + "state from (its endpoints name members of different clusters, or etcd was made again)")
                return
            }
            watchLive = true
            watchNewsAt = now
            etcdRevision = max(etcdRevision, revision)
            if let ended = watchEndedBecause {
                log.info("cluster: watching etcd again from \(watch.flatMap { client.endpoint(ofWatch: $0) } ?? client.currentEndpoint); "
                         + "the watch had ended: \(ended)")
                watchEndedBecause = nil
            }
            if lastFailure != nil { probe(again: true) }
            if revision < Int64(store.rev) {
                pending[client.submit(.range(RangeRequest(key: records.bindingsEpoch, countOnly: true)))] = .historyCheck(seen: store.rev)
            }
        case .events(let revision, let events):
            watchNewsAt = now
            etcdRevision = max(etcdRevision, revision)
            var start = 0
            while start < events.count {
                let rev = events[start].revision
                var end = start
                while end < events.count, events[end].revision == rev { end += 1 }
                applyRevision(UInt64(rev), events[start..<end])
                start = end
            }
        case .progress(let revision):
            watchNewsAt = now
            etcdRevision = max(etcdRevision, revision)
        case .compacted(let compactRevision):
            watchLive = false
            watch = nil
            log.warn("cluster: etcd compacted its history to revision \(compactRevision) past this host's \(store.rev); reading everything again")
            let reading = PrefixRead(prefix: records.prefix)
            pending[client.submit(.range(reading.nextPage))] = .resync(reading)
        case .failed(.responseTooLarge(let limit)) where fragmentsUntil == nil && !alwaysFragments:
            watchAgainWithFragments(limit: limit)
        case .failed(.watchBehind(let limit)):
            watchBehind(limit: limit)
        case .failed(let error):
            watchLive = false
            watch = nil
            watchEnded(error)
            watchRetryAt = now + 1
        }
    }

    /// A watch that ended (its member stopped or restarted, its connection cut) is no outage by
    /// itself: with one member down and the quorum kept, the others serve. The state is
    /// `degraded` until a watch is set up again, which is logged, as the end is, once. Whether
    /// etcd is out of reach, requests tell (`failure`): a write, a lease's keepalive.
    private func watchEnded(_ error: EtcdError) {
        if case .unavailable(let message, _) = error {
            if watchEndedBecause == nil { log.warn("cluster: the watch of etcd ended: \(message); watching again") }
            watchEndedBecause = message
            probe()
        } else {
            _ = failure(error)
        }
    }

    /// Asks etcd whether it answers, with a linearizable read (a count of one record) bounded by
    /// `etcd_timeout`: after a watch ended, for a host that writes nothing (an outage is then
    /// `unavailable` within that time, not at its lease's next renewal, a third of `ephemeral_ttl`
    /// later); and when a watch is set up again after a failure (etcd's answer ends the
    /// outage). One at a time. `again`: when one is under way, send another once it failed (a watch
    /// set up since it was sent: its failure may be from before the outage ended). Not after a
    /// watch that ended: watches that keep failing faster than a probe's timeout would put off
    /// saying the outage for as long.
    private func probe(again: Bool = false) {
        guard !probeUnderWay else {
            if again { probeAgain = true }
            return
        }
        probeAgain = false
        probeUnderWay = true
        let read = RangeRequest(key: records.bindingsEpoch, countOnly: true)
        pending[client.submit(.range(read), timeout: .milliseconds(Int64(timeout * 1000)))] = .probe
    }

    /// The watch ended because this host takes its messages slower than etcd sends them: more
    /// than `limit` bytes of them waited, and the client stopped reading it once it had handed
    /// them over. Not an outage: it is set up again at once from the revision after the last
    /// applied, so the host goes on as fast as it applies, its memory bounded.
    private func watchBehind(limit: Int) {
        watchLive = false
        watch = nil
        if !toldBehind {
            toldBehind = true
            log.info("cluster: this host applies etcd's history slower than etcd sends it (more than \(limit) bytes of it "
                     + "waited): watching again from revision \(store.rev + 1) whenever that many wait, until it caught up")
        }
        startWatch()
    }

    /// One etcd revision's events, applied as one store transaction.
    private func applyRevision(_ rev: UInt64, _ events: ArraySlice<WatchEvent>) {
        guard rev > store.rev else { return }
        var transaction = StoredTransaction(rev: rev)
        var publishes: [(String, JSONValue)] = []
        var leaseExpired = false
        var reasonGiven = false
        let bindingsRev = modRevisions[records.bindingsEpoch] ?? 0
        var bindingsUnseen = false
        for event in events {
            guard let (kind, name) = records.parse(event.kv.key) else {
                skip(event.kv.key, at: rev, "not a record of obsd's")
                continue
            }
            if event.kind == .delete { modRevisions[event.kv.key] = nil } else { modRevisions[event.kv.key] = event.kv.modRevision }
            do throws(ClusterRecords.Unreadable) {
                switch (kind, event.kind) {
                case (.value, .put):
                    let (key, writerBindingsRev, owner) = try records.writtenKey(name, event.kv)
                    removeReplacedDefinition(name, by: event.kv.modRevision)
                    if key.owner != nil { ephemeralKeys.insert(name) } else { ephemeralKeys.remove(name) }
                    noteOwner(name, key, owner, event.kv.lease)
                    transaction.putKeys.append(key)
                    // A put without compares, from a host that had not applied the last binding change.
                    if let writerBindingsRev, writerBindingsRev != bindingsRev { bindingsUnseen = true }
                case (.value, .delete):
                    if ephemeralKeys.remove(name) != nil { leaseExpired = true }
                    foreignOwners[name] = nil
                    transaction.deletedKeys.append(name)
                case (.definition, .put):
                    transaction.putDefinitions.append(try records.storedDefinition(name, event.kv))
                case (.definition, .delete):
                    transaction.deletedDefinitions.append(name)
                case (.binding, .put):
                    transaction.putBindings.append(try records.storedBinding(name, event.kv))
                case (.binding, .delete):
                    transaction.deletedBindings.append(name)
                case (.meta, .put) where name == "reason":
                    reasonGiven = true
                    transaction.reason = (try? JSONValue.parse(event.kv.value))?.stringValue
                case (.meta, .put) where name == "publish":
                    publishes.append(try records.published(event.kv))
                case (.meta, _):
                    break
                }
            } catch {
                skip(event.kv.key, at: rev, error.message)
                // What etcd holds under that record's key is no longer what this host applied: it
                // goes, as for a host that reads the prefix now (`state(of:)`), and is not served.
                switch kind {
                case .value:
                    ephemeralKeys.remove(name)
                    foreignOwners[name] = nil
                    transaction.deletedKeys.append(name)
                case .definition: transaction.deletedDefinitions.append(name)
                case .binding: transaction.deletedBindings.append(name)
                case .meta: break
                }
            }
        }
        // Deletes of ephemeral keys that no obsd transaction made: their host's lease ran out.
        if !reasonGiven, leaseExpired { transaction.reason = "ephemeral" }
        store.apply(transaction, bindingsUnseen: bindingsUnseen && rev > repairedUpTo)
        removeUnloadedBindingRecords()
        for (channel, payload) in publishes {
            let delivered = store.deliverPublished(channel: channel, payload: payload)
            if publishesUnderWay > 0 { published[rev] = delivered }
        }
    }

    /// Applies this host's own plain write, committed at `rev`, from etcd's answer, when this host
    /// applied every revision before it: a put is a revision of its own, of one event, whose record
    /// is the one sent. Its watch's copy, which may come later (on a connection of its own, from
    /// a goroutine of etcd's own), then finds the revision applied. The client's answer does not
    /// wait for that copy. What the answer does not say, etcd's creation revision and version of
    /// the record, follows from the record as of `rev - 1`: the next version of the value key this
    /// host holds at that record's revision, or version 1 created at `rev` when etcd held no
    /// record of that name. Otherwise (a record this host skipped as unreadable, or one it holds
    /// otherwise) the copy is waited for, as for every other write; and nothing is applied from an
    /// answer while this host has no watch (a read of everything after a compaction under way,
    /// whose snapshot must not land on revisions applied meanwhile: `resync`) or once it diverged.
    private func applyOwnPut(_ put: PutRequest, at rev: UInt64) -> Bool {
        // No watch: etcd compacted what this host had not applied and it reads everything again
        // (`resync`), or the watch failed; whatever the answer says waits for that.
        guard diverged == nil, watch != nil, let (kind, name) = records.parse(put.key), kind == .value else { return false }
        let created: Int64, version: Int64
        if let recordRev = modRevisions[put.key] {
            guard let held = store.valueKeyRevisions(name), held.rev == UInt64(recordRev) else { return false }
            (created, version) = (Int64(held.createdRev), Int64(held.version) + 1)
        } else {
            guard store.valueKeyRevisions(name) == nil else { return false }
            (created, version) = (Int64(rev), 1)
        }
        let event = WatchEvent(kind: .put, kv: KeyValue(key: put.key, value: put.value, createRevision: created,
                                                        modRevision: Int64(rev), version: version, lease: put.lease))
        applyRevision(rev, [event][...])
        return store.rev == rev
    }

    /// Notes whose ephemeral key `name` is, when it is another host's (`foreignOwners`).
    private func noteOwner(_ name: String, _ key: StoredKey, _ owner: String?, _ lease: Int64) {
        if key.owner == StoredKey.remoteOwner, let owner {
            foreignOwners[name] = (owner, lease)
        } else if !foreignOwners.isEmpty {
            foreignOwners[name] = nil
        }
    }

    /// A record that could not be read, committed at `revision` (its put or delete), which
    /// this host had not seen before (`state(of:at:seen:)`).
    private func skip(_ key: [UInt8], at revision: UInt64, _ why: String) {
        let name = String(decoding: key, as: UTF8.self)
        lastSkipped = name
        guard Int64(revision) > startedAt else {
            skippedBeforeStart.insert(key)
            return
        }
        skipped += 1
        if lastLoggedSkip != name { log.warn("cluster: skipped \(name): \(why)") }
        lastLoggedSkip = name
    }

    /// After etcd compacted what this host had not applied: everything under the prefix as of now
    /// becomes the store's state in one transaction, every watch gets `compacted` and a snapshot,
    /// and the watch starts again after it.
    private func resync(_ range: RangeResponse, at revision: Int64) {
        // What this host applied is no longer etcd's state (`diverge`): it serves that until
        // restarted, and takes nothing more.
        guard diverged == nil else { return }
        // Every revision up to the read's applied already (this host's own writes, applied from
        // etcd's answers while its watch lagged): the read brings nothing, and its snapshot would
        // take a revision etcd does not have. The watch goes on from the next.
        guard UInt64(revision) > store.rev else {
            log.info("cluster: this host had applied revision \(store.rev), the read of everything after the compaction was at \(revision); watching again")
            return startWatch()
        }
        modRevisions.removeAll()
        ephemeralKeys.removeAll()
        foreignOwners.removeAll()
        store.applySnapshot(state(of: range, at: revision, seen: store.rev))
        removeUnloadedBindingRecords()
        resyncedAt = UInt64(revision)
        startWatch()
    }

    /// Binding records whose binding a record written after them displaced (put by something
    /// else than obsd, or left by an earlier version): every host resolves them alike, by
    /// revision, but each host that reads the prefix would meet them again. Each is removed,
    /// compared on its revision (every host asks; the first wins; a record put again since is
    /// kept).
    private func removeUnloadedBindingRecords() {
        for name in store.takeUnloadedBindingRecords() {
            let key = records.key(.binding, name)
            guard let revision = modRevisions[key] else { continue }
            let remove = Txn(compares: [Compare(key: key, .equal, .modRevision(revision))], success: [.deleteRange(DeleteRangeRequest(key: key))])
            pending[client.submit(.txn(remove))] = .cleanup
        }
    }

    /// A value put without compares (a plain `set`) can commit after another host's `define` of
    /// the same name that its host had not seen: every host then holds the value, which replaced
    /// the definition, but etcd holds both records. The definition's record is removed, compared
    /// on its revision (every host asks; the first wins), so that a host reading the prefix later
    /// finds only the value, and no later delete of the value brings the definition back.
    private func removeReplacedDefinition(_ name: String, by valueRevision: Int64) {
        guard modRevisions.definitions > 0 else { return }
        let definition = records.key(.definition, name)
        guard let definitionRevision = modRevisions[definition], definitionRevision < valueRevision else { return }
        let remove = Txn(compares: [Compare(key: definition, .equal, .modRevision(definitionRevision))],
                         success: [.deleteRange(DeleteRangeRequest(key: definition))])
        pending[client.submit(.txn(remove))] = .cleanup
    }

    /// The state a range of the whole prefix as of `revision` holds; the records it reads are
    /// noted as applied. Those this host cannot read are skipped, and counted unless it had seen
    /// them: committed at `seen` or before, the revision it had applied (read again after a
    /// compaction).
    private func state(of range: RangeResponse, at revision: Int64, seen: UInt64 = 0) -> StoredState {
        func skip(_ kv: KeyValue, _ why: String) {
            if UInt64(kv.modRevision) > seen { self.skip(kv.key, at: UInt64(kv.modRevision), why) }
        }
        var state = StoredState(rev: UInt64(revision))
        state.bindingsInWriteOrder = true
        etcdRevision = max(etcdRevision, range.header.revision)
        // A name with both a value and a definition record (a plain `set` that committed after a
        // `define` its host had not seen): the later one is what every running host holds, the
        // value when both came in one revision. Only records that can be read count: a running
        // host took an unreadable one as the delete of its name's record of that kind.
        var values: [String: (key: StoredKey, owner: String?, kv: KeyValue)] = [:]
        var definitions: [String: (definition: StoredDefinition, revision: Int64)] = [:]
        var bindings: [(binding: StoredBinding, revision: Int64)] = []
        for kv in range.kvs {
            guard let (kind, name) = records.parse(kv.key) else {
                skip(kv, "not a record of obsd's")
                continue
            }
            modRevisions[kv.key] = kv.modRevision
            do throws(ClusterRecords.Unreadable) {
                switch kind {
                case .value:
                    let (key, _, owner) = try records.writtenKey(name, kv)
                    values[name] = (key, owner, kv)
                case .definition: definitions[name] = (try records.storedDefinition(name, kv), kv.modRevision)
                case .binding: bindings.append((try records.storedBinding(name, kv), kv.modRevision))
                case .meta: break
                }
            } catch {
                skip(kv, error.message)
            }
        }
        // Bindings in the order they were written: records of two bindings over one key (put by
        // something else than obsd, or left by an older version) are resolved as a running host
        // resolved them when its watch brought them, the later displacing the earlier
        // (`Store.load`, `Store.applyChanges`). Records of one revision (one transaction of
        // something else than obsd) go in the range's order, by key, where a running host took
        // them in the order the transaction put them: the same only across revisions.
        state.bindings = bindings.enumerated().sorted { ($0.element.revision, $0.offset) < ($1.element.revision, $1.offset) }
            .map(\.element.binding)
        // In the range's order (by record key), as etcd keeps them.
        for kv in range.kvs {
            switch records.parse(kv.key) {
            case (.value, let name)?:
                guard let value = values[name], (definitions[name]?.revision).map({ value.kv.modRevision >= $0 }) ?? true else { continue }
                if value.key.owner != nil { ephemeralKeys.insert(name) }
                noteOwner(name, value.key, value.owner, value.kv.lease)
                state.keys.append(value.key)
            case (.definition, let name)?:
                guard let definition = definitions[name] else { continue }
                if let value = values[name]?.kv.modRevision, value >= definition.revision {
                    removeReplacedDefinition(name, by: value)
                } else {
                    state.definitions.append(definition.definition)
                }
            default: break
            }
        }
        return state
    }

    /// Waits a moment for etcd's answers and takes them: for start-up (the definitions file), when
    /// nothing else runs yet.
    func settle() {
        var descriptor = pollfd(fd: completionFD, events: Int16(POLLIN), revents: 0)
        _ = poll(&descriptor, 1, 100)
        let now = monotonicSeconds()
        processCompletions(now: now)
        tick(now: now)
    }

    // MARK: Timers

    /// Monotonic seconds of the next thing to do: a lease renewal, a watch to set up again, an
    /// answer that waited too long.
    var nextDeadline: Double? {
        // Without building arrays: this runs at every turn of the daemon's loop.
        var next = nextKeepAlive
        func consider(_ deadline: Double?) {
            if let deadline, next.map({ deadline < $0 }) ?? true { next = deadline }
        }
        consider(watchRetryAt)
        consider(watchStalledAt)
        for entry in waiting { consider(entry.deadline) }
        consider(heldWatch.first?.due)
        consider(heldAnswers.first?.due)
        return next
    }

    func tick(now: Double) {
        if let due = nextKeepAlive, due <= now {
            nextKeepAlive = now + Double(leaseTTL) / 3
            pending[client.submit(.leaseKeepAlive(id: lease), timeout: .seconds(Double(leaseTTL) / 3))] = .keepAlive(lease: lease)
        }
        if let due = watchRetryAt, due <= now, watch == nil { startWatch() }
        restartStalledWatch(now: now)
        releaseHeldWatch(now: now)
        fireWaiting(now: now)
    }
}

extension EtcdClient {
    /// Waits for the answer to `id` (the request's own timeout bounds the wait): for start-up and
    /// shutdown, never while the loop runs.
    func waitForAnswer(_ id: EtcdRequestID) throws(EtcdError) -> EtcdResponse {
        while true {
            var descriptor = pollfd(fd: completionFD, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, -1)
            for case .response(id, let result) in takeCompletions() {
                return try result.get()
            }
        }
    }
}
