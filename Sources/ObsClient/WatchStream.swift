import Glibc
import ObsCore

/// One watch as a blocking stream of events, for one thread at a time. With `reconnect`, a dropped
/// connection (or a daemon restart) is retried with backoff and the watch resumes with `since` =
/// the last revision seen, so the caller sees every change once: none lost, none repeated.
public final class WatchStream: @unchecked Sendable {
    // @unchecked: one thread reads; `cancel` from another thread only shuts the socket down.
    public let path: String
    public let options: WatchOptions
    private var connection: ObsConnection?
    /// The last revision seen, and the keys of that revision already delivered. A connection can
    /// drop in the middle of a transaction's events (a daemon killed while writing them); so a
    /// resumed watch asks for that whole revision again (`since` one before it) and drops what it
    /// already delivered: every change once, none lost, none repeated (docs/cli.md, `watch --reconnect`).
    private var lastRevision: UInt64?
    private var deliveredAtLast = Set<String>()
    /// Between a reconnection and its `synced`: replayed events are checked against the above.
    private var resuming = false
    /// Whether the last connection ended with the daemon's `goodbye`: it flushes every event before
    /// it, so no transaction was cut and the watch can resume after the last revision itself.
    private var endedCleanly = true
    private var cancelled = false
    /// Set on reconnecting, until the next event delivered carries `followsReconnection`.
    private var reconnected = false
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
    /// `reconnect` waits out.
    public init(path: String, options: WatchOptions, deadline: Double? = nil,
                waiting: (@Sendable (ClientError) -> Void)? = nil) throws(ClientError) {
        self.path = path
        self.options = options
        self.waiting = waiting
        guard options.reconnect else {
            try start(deadline: deadline)
            return
        }
        guard try reconnect(deadline: deadline) else { throw .timedOut }
    }

    private func start(deadline: Double?) throws(ClientError) {
        let connection = try ObsConnection(path: path)
        let resumeAfter = lastRevision.map { $0 > 0 && !endedCleanly && !deliveredAtLast.isEmpty ? $0 - 1 : $0 }
        try connection.request("watch", options.fields(resumeAfter: resumeAfter), deadline: deadline)
        self.connection = connection
    }

    /// Stops the stream from another thread: `next` then throws `connectionLost`.
    public func cancel() {
        cancelled = true
        connection?.shutDown()
    }

    /// The next event, or nil when `deadline` passes first.
    public func next(deadline: Double? = nil) throws(ClientError) -> WatchEvent? {
        while true {
            do throws(ClientError) {
                guard let connection else { throw .connectionLost(path: path, reason: nil) }
                guard var event = try connection.nextEvent(deadline: deadline) else { return nil }
                if resuming, isAlreadyDelivered(event) { continue }
                if event.name == .synced { resuming = false }
                record(event)
                event.followsReconnection = reconnected
                reconnected = false
                return event
            } catch .connectionLost(let path, let reason) {
                guard options.reconnect, !cancelled else { throw .connectionLost(path: path, reason: reason) }
                connection = nil
                endedCleanly = reason != nil
                guard try reconnect(deadline: deadline) else { return nil }
                resuming = lastRevision != nil
                reconnected = true
            }
        }
    }

    /// Notes a delivered event's revision and key.
    private func record(_ event: WatchEvent) {
        guard let rev = event.resumeRevision else { return }
        let key = event["key"]?.stringValue
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
        while !cancelled {
            do {
                try start(deadline: deadline)
                return true
            } catch .server(let error) where !Self.passing.contains(error.code) {
                throw .server(error)
            } catch {
                // Not there yet, or it went away again while answering.
                if !told { waiting?(error) }
                told = true
            }
            if let deadline, monotonicNow() + backoff > deadline { return false }
            usleep(UInt32(backoff * 1_000_000))
            backoff = min(backoff * 2, Self.maxBackoff)
        }
        throw .connectionLost(path: path, reason: nil)
    }
}
