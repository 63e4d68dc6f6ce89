import Foundation
import ObsClient
import Synchronization

/// Something under way with the daemon that another thread can end at once.
protocol Cancellable: AnyObject, Sendable {
    func cancel()
}

/// What `obsctl web` has under way with the daemon: the page's event streams, and the requests
/// being answered. Stopping the server ends them all first: a stream waits for the daemon's next
/// event, a request for its answer, or for the daemon to accept its connection (up to
/// `--timeout`, from a daemon that is stuck or stopped with Ctrl-Z), and libmicrohttpd's stop
/// waits for every connection's thread, so Ctrl-C waited for them too.
final class DaemonCalls: Sendable {
    private let state = Mutex<(calls: [ObjectIdentifier: any Cancellable], stopped: Bool)>(([:], false))

    init() {}

    /// Tracks `call` until `remove`; one added after `cancelAll` is cancelled at once.
    func add(_ call: any Cancellable) {
        let stopped = state.withLock {
            $0.calls[ObjectIdentifier(call)] = call
            return $0.stopped
        }
        if stopped { call.cancel() }
    }

    func remove(_ call: any Cancellable) {
        _ = state.withLock { $0.calls.removeValue(forKey: ObjectIdentifier(call)) }
    }

    /// Cancels every call, and any added from now on.
    func cancelAll() {
        let calls = state.withLock {
            $0.stopped = true
            return Array($0.calls.values)
        }
        for call in calls { call.cancel() }
    }

    /// Runs `body` on a new connection to the daemon at `path` (connecting waits until `deadline`
    /// at most), which `cancelAll` ends: connecting fails with `cancelled`, `body` with
    /// `connectionLost`, instead of waiting on.
    func withConnection<T>(to path: String, deadline: Double,
                           _ body: (ObsConnection) throws(ClientError) -> T) throws(ClientError) -> T {
        let call = ConnectionCall()
        add(call)
        defer { remove(call) }
        let connection = try ObsConnection(path: path, deadline: deadline, cancellation: call.cancellation)
        call.opened(connection)
        return try body(connection)
    }
}

/// A request's connection, as a call to cancel: while it connects, and once it is open.
private final class ConnectionCall: Cancellable, @unchecked Sendable {
    // @unchecked: `connection` is guarded by `lock`. `cancel` raises `cancellation` and shuts the
    // open connection's socket down (shutdown(2), which any thread may do while the connection
    // is open); whoever holds this holds the connection open, so the descriptor cannot be closed
    // and reused meanwhile.
    let cancellation = Cancellation()
    private var connection: ObsConnection?
    private let lock = NSLock()

    func opened(_ open: ObsConnection) {
        lock.withLock { connection = open }
        // A `cancel` that came before it was stored did not shut it down.
        if cancellation.isCancelled { open.shutDown() }
    }

    func cancel() {
        cancellation.cancel()
        lock.withLock { connection?.shutDown() }
    }
}
