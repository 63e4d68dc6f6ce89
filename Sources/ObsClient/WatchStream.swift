import Glibc
import ObsCore

/// One watch as a blocking stream of events, for one thread at a time. With `reconnect`, a dropped
/// connection (or a daemon restart) is retried with backoff and the watch resumes with `since` =
/// the last revision seen, so the caller sees every change once: none lost, none repeated.
///
/// Unless the daemon reconnected to holds another state than the one followed (`Reconnection`'s
/// rule: a new process of a daemon that keeps its state in memory only, or a daemon whose revision
/// went back): then there is nothing to resume. The stream starts the watch afresh and tells the
/// caller, in this order:
/// 1. a `reset` event it makes itself, `{"event":"reset","rev":R,"reason":"..."}`: R the daemon's
///    revision when it answered `hello`, the reason in words;
/// 2. the daemon's snapshot (`initial` events, even when `options.initial` is false: what the
///    caller holds is void) and its `synced`;
/// 3. a `delete` it makes itself, `{"event":"delete","key":K,"rev":S,"reason":"reset"}` (S the
///    revision of that `synced`; no `old`: the stream keeps the names of keys, not their values),
///    for each key it had delivered as present (an `initial`, `change` or `error` without a
///    `delete` since) that the snapshot did not list, in key order.
/// The caller's view is then the daemon's state. A connection cut before that `synced` repeats
/// step 2 (and 1, if the daemon is yet another state); the deletes come once, after the snapshot
/// that completes.
///
/// Likewise, with `reconnect`, after the snapshot that follows `compacted` (a resume the daemon
/// could not replay: it restarted after a crash, or the history no longer reaches back), the
/// stream makes `{"event":"delete","key":K,"rev":S,"reason":"compacted"}` for each key it had
/// delivered as present that the snapshot did not list: deleted in the gap, which no replay told.
/// So it does after the snapshot that replaces a first snapshot cut short (no revision seen yet,
/// so nothing to resume from): a key of the cut one that the new one does not list is gone.
public final class WatchStream: @unchecked Sendable {
    // @unchecked: one thread reads; `cancel` from another thread only raises `cancellation` and
    // shuts the socket down.
    public let path: String
    public let options: WatchOptions
    private var connection: ObsConnection?
    /// The last revision seen, and the keys of that revision already delivered. A connection can
    /// drop in the middle of a transaction's events (a daemon killed while writing them); so a
    /// resumed watch asks for that whole revision again (`since` one before it) and drops what it
    /// already delivered: every change once, none lost, none repeated (docs/cli.md, `watch --reconnect`).
    private var lastRevision: UInt64?
    private var deliveredAtLast = Set<String>()
    /// The daemon's run (hello's `run`) on this connection, given to every event delivered, and
    /// the run `lastRevision` was seen in: a resume names it, so that a daemon whose state does not
    /// continue that run sends a snapshot (after `compacted`) rather than a replay that would leave
    /// the caller's view wrong.
    private var currentRun: String?
    private var lastRun: String?
    /// Between a reconnection and its `synced`: replayed events are checked against the above.
    private var resuming = false
    /// Whether the last connection ended with the daemon's `goodbye`: it flushes every event before
    /// it, so no transaction was cut and the watch can resume after the last revision itself.
    private var endedCleanly = true
    /// Raised by `cancel`: it ends a connection attempt and the pause between two at once.
    private let cancellation: Cancellation
    /// Set on reconnecting, until the next event delivered carries `followsReconnection`.
    private var reconnected = false
    /// The pid of the daemon last connected to (from `hello`; kept only with `reconnect`).
    private var lastPid: Int64?
    /// Only with `reconnect`: the keys delivered as present (an `initial`, `change` or `error`
    /// without a `delete` since), so that a reset can tell the caller which are gone. Names only,
    /// and at most one per key of the daemon's state that the watch matches: each complete snapshot
    /// (the first, and after `overflow`, `compacted` or a reset) replaces it with the keys it
    /// listed, so keys deleted in a gap the daemon skipped do not stay.
    private var present = Set<String>()
    /// The keys listed so far by the snapshot under way on this connection (nil: none under way).
    private var listing: Set<String>?
    /// A reset under way, until the `synced` of its snapshot: the keys delivered as present before
    /// it (nil: none under way).
    private var voided: Set<String>?
    /// Between `compacted` (or a reconnection that takes a cut first snapshot again) and the
    /// `synced` of its snapshot.
    private var compactedSnapshot = false
    /// Events the stream made itself (`reset`, and the deletes after its snapshot), delivered
    /// before anything more is read.
    private var made: [WatchEvent] = []
    /// Called once per outage, with the reason, when a connection attempt fails and the stream
    /// starts waiting for the daemon (obsctl prints it as a notice).
    private let waiting: (@Sendable (ClientError) -> Void)?
    /// Backoff between attempts: it starts small so a quick restart costs little, and doubles.
    static let firstBackoff = 0.05, maxBackoff = 2.0
    /// Refusals a client that reconnects waits out like an absent daemon (here and obsctl web's
    /// live feed): one that has all the connections it takes (`limit`), or is stopping
    /// (`shutting_down`: a restart reconnected into). Any other (a bad pattern, no permission)
    /// would be answered the same next time.
    public static let passing: Set<ObsError.Code> = [.limit, .shuttingDown]

    /// Connects and starts the watch. Without `options.reconnect` it fails at once if the daemon is
    /// not there; with it, it waits for the daemon (a status bar may start before obsd) with the
    /// same backoff as after a drop, until `deadline` (then `timedOut`). A refusal by the daemon
    /// (`.server`) fails at once either way, but for `limit` and `shutting_down`, which
    /// `reconnect` waits out. A daemon that accepts no connection (stopped or stuck, its queue of
    /// connections full) is waited for until `deadline`, or for `ObsConnection.connectTimeout` per
    /// attempt without one (`ObsConnection.init`). `cancellation` (else one of its own), raised
    /// from another thread while this waits, makes it fail at once; `cancel()` raises it.
    public init(path: String, options: WatchOptions, deadline: Double? = nil, cancellation: Cancellation? = nil,
                waiting: (@Sendable (ClientError) -> Void)? = nil) throws(ClientError) {
        self.path = path
        self.options = options
        self.cancellation = cancellation ?? Cancellation()
        self.waiting = waiting
        guard options.reconnect else {
            try start(deadline: deadline)
            return
        }
        guard try reconnect(deadline: deadline) else { throw .timedOut }
    }

    private func start(deadline: Double?) throws(ClientError) {
        let connection = try ObsConnection(path: path, deadline: deadline, cancellation: cancellation)
        // `hello` first, also without `reconnect`: its `run` goes with every event delivered.
        // What the caller follows: a revision seen, or (a first snapshot cut short) keys delivered
        // before any revision was; a daemon cannot have gone back from before 0.
        let followed = options.reconnect ? lastRevision ?? (present.isEmpty && voided == nil ? nil : 0) : nil
        let greeted = try Reconnection.greet(connection, client: nil, lastRevision: followed, lastPid: lastPid, deadline: deadline)
        let greeting = options.reconnect ? greeted : nil
        let reset = greeting?.reset
        // A reset, or one whose snapshot was cut short: the snapshot, whatever was asked.
        let afresh = reset != nil || voided != nil
        let resumeAfter = afresh ? nil : lastRevision.map { $0 > 0 && !endedCleanly && !deliveredAtLast.isEmpty ? $0 - 1 : $0 }
        try connection.request("watch", options.fields(resumeAfter: resumeAfter, seenIn: lastRun, afresh: afresh), deadline: deadline)
        // Nothing above changed the stream's state: a connection lost before here is retried as if
        // this one had never been made.
        self.connection = connection
        currentRun = greeted.run
        guard let greeting else { return }
        lastPid = greeting.pid
        if afresh {
            if let reset { made.append(Self.made(["event": "reset", "rev": .int(Int64(greeting.rev)), "reason": .string(reset)])) }
            voided = (voided ?? []).union(present)
            present = []
            lastRevision = nil
            deliveredAtLast = []
        }
        listing = afresh || (options.initial && (resumeAfter ?? options.since) == nil) ? [] : nil
        // A first snapshot cut short (keys delivered, no revision seen yet) is taken again, whole:
        // keys it delivered that this one does not list went meanwhile (a daemon killed took its
        // ephemeral keys with it), and get their deletes as after `compacted`.
        compactedSnapshot = !afresh && listing != nil && lastRevision == nil && !present.isEmpty
    }

    /// Stops the stream from another thread: `next` then throws `connectionLost`.
    public func cancel() {
        cancellation.cancel()
        connection?.shutDown()
    }

    /// The next event, or nil when `deadline` passes first.
    public func next(deadline: Double? = nil) throws(ClientError) -> WatchEvent? {
        while true {
            if !made.isEmpty { return delivering(made.removeFirst()) }
            do throws(ClientError) {
                guard let connection else { throw .connectionLost(path: path, reason: nil) }
                guard let event = try connection.nextEvent(deadline: deadline) else { return nil }
                // Before the check below: a snapshot item left out as delivered is still listed.
                if options.reconnect { follow(event) }
                if resuming, isAlreadyDelivered(event) { continue }
                if event.name == .synced { resuming = false }
                record(event)
                return delivering(event)
            } catch .connectionLost(let path, let reason) {
                guard options.reconnect, !cancellation.isCancelled else { throw .connectionLost(path: path, reason: reason) }
                connection = nil
                // A snapshot cut short lists only part of the keys.
                listing = nil
                compactedSnapshot = false
                endedCleanly = reason != nil
                guard try reconnect(deadline: deadline) else { return nil }
                resuming = lastRevision != nil
                reconnected = true
            }
        }
    }

    private func delivering(_ event: WatchEvent) -> WatchEvent {
        var event = event
        event.run = currentRun
        event.followsReconnection = reconnected
        reconnected = false
        return event
    }

    /// Keeps `present` (with `reconnect`), and at the `synced` of a reset's snapshot makes the
    /// deletes of the keys it did not list.
    private func follow(_ event: WatchEvent) {
        let key = event["key"]?.stringValue
        switch event.name {
        case .initial, .change, .error:
            guard let key else { return }
            present.insert(key)
            listing?.insert(key)
        case .delete:
            guard let key else { return }
            present.remove(key)
            listing?.remove(key)
        case .overflow, .compacted:
            // A snapshot follows: the state as a whole.
            listing = []
            compactedSnapshot = event.name == .compacted
        case .synced:
            guard let listed = listing else { return }
            listing = nil
            let rev = event["rev"] ?? .int(0)
            if let before = voided {
                voided = nil
                for gone in before.subtracting(listed).sorted() {
                    made.append(Self.made(["event": "delete", "key": .string(gone), "rev": rev, "reason": "reset"]))
                }
            } else if compactedSnapshot {
                // The daemon could not replay what the stream missed (a resume after a restart,
                // or older than its history): keys deleted in that gap are simply not listed.
                // The caller gets their deletes here, as it gets the daemon's own.
                for gone in present.subtracting(listed).sorted() {
                    made.append(Self.made(["event": "delete", "key": .string(gone), "rev": rev, "reason": "compacted"]))
                }
            }
            compactedSnapshot = false
            present = listed
        default:
            break
        }
    }

    /// An event the stream makes itself, its line with the fields in the order given (as the
    /// daemon orders its own: `event` first).
    private static func made(_ fields: KeyValuePairs<String, JSONValue>) -> WatchEvent {
        let line = "{" + fields.map { JSONValue.string($0.key).encoded + ":" + $0.value.encoded }.joined(separator: ",") + "}"
        return WatchEvent(fields: Dictionary(uniqueKeysWithValues: fields.map { ($0.key, $0.value) }), line: Array(line.utf8))
    }

    /// Notes a delivered event's revision and key.
    private func record(_ event: WatchEvent) {
        guard let rev = event.resumeRevision else { return }
        let key = event["key"]?.stringValue
        // Seen on this connection: this run has it (a resumed one vouched for what it continued).
        lastRun = currentRun
        if rev > lastRevision ?? 0 || lastRevision == nil {
            lastRevision = rev
            deliveredAtLast = key.map { [$0] } ?? []
        } else if rev == lastRevision, let key {
            deliveredAtLast.insert(key)
        }
    }

    /// Whether a replayed event (or, after `compacted`, a snapshot item) was delivered before the
    /// connection dropped: older than the last revision seen, or of that revision and a key
    /// already delivered.
    private func isAlreadyDelivered(_ event: WatchEvent) -> Bool {
        guard let lastRevision, let rev = event["rev"]?.intValue, rev >= 0 else { return false }
        switch event.name {
        case .change, .delete, .error, .initial: break
        default: return false
        }
        if UInt64(rev) < lastRevision { return true }
        return UInt64(rev) == lastRevision && (event["key"]?.stringValue).map(deliveredAtLast.contains) == true
    }

    /// Tries, then retries with backoff, until connected (true) or `deadline` passes (false).
    private func reconnect(deadline: Double?) throws(ClientError) -> Bool {
        var backoff = Self.firstBackoff
        var told = false
        while !cancellation.isCancelled {
            do {
                try start(deadline: deadline)
                return true
            } catch .server(let error) where !Self.passing.contains(error.code) {
                throw .server(error)
            } catch .timedOut where deadline.map({ monotonicNow() >= $0 }) == true {
                // The caller's deadline passed while connecting or greeting: no notice, the end.
                return false
            } catch {
                // Not there yet, or it went away again while answering.
                if !told { waiting?(error) }
                told = true
            }
            // Up to the deadline itself, with a last attempt there: a daemon that starts in the
            // last second of the wait is not missed for a pause that would have ended past it.
            var pause = backoff
            if let deadline {
                let left = deadline - monotonicNow()
                if left <= 0 { return false }
                pause = min(pause, left)
            }
            cancellation.sleep(pause)
            backoff = min(backoff * 2, Self.maxBackoff)
        }
        throw .connectionLost(path: path, reason: nil)
    }
}
