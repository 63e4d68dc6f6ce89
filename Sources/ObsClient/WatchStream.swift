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
    /// The last revision seen, where a resumed watch starts (cli.md). The daemon writes a
    /// transaction's events together and flushes before it says goodbye, so a restart never
    /// splits one; and after a restart its history starts at the restored revision, so an
    /// earlier `since` would only get `compacted` and a snapshot.
    private var lastRevision: UInt64?
    private var cancelled = false
    /// Backoff between attempts: it starts small so a quick restart costs little, and doubles.
    static let firstBackoff = 0.05, maxBackoff = 2.0

    /// Connects and starts the watch; fails at once (no retry) if the daemon is not there or refuses.
    public init(path: String, options: WatchOptions, deadline: Double? = nil) throws(ClientError) {
        self.path = path
        self.options = options
        try start(deadline: deadline)
    }

    private func start(deadline: Double?) throws(ClientError) {
        let connection = try ObsConnection(path: path)
        try connection.request("watch", options.fields(resumeAfter: lastRevision), deadline: deadline)
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
                guard let event = try connection.nextEvent(deadline: deadline) else { return nil }
                if let rev = event.resumeRevision { lastRevision = max(lastRevision ?? 0, rev) }
                return event
            } catch .connectionLost(let path, let reason) {
                guard options.reconnect, !cancelled else { throw .connectionLost(path: path, reason: reason) }
                connection = nil
                guard try reconnect(deadline: deadline) else { return nil }
            }
        }
    }

    /// Retries until connected again (true) or `deadline` passes (false).
    private func reconnect(deadline: Double?) throws(ClientError) -> Bool {
        var backoff = Self.firstBackoff
        while !cancelled {
            do {
                try start(deadline: deadline)
                return true
            } catch .server(let error) {
                throw .server(error)
            } catch {
                // Not there yet, or it went away again while answering.
            }
            if let deadline, monotonicNow() + backoff > deadline { return false }
            usleep(UInt32(backoff * 1_000_000))
            backoff = min(backoff * 2, Self.maxBackoff)
        }
        throw .connectionLost(path: path, reason: nil)
    }
}
