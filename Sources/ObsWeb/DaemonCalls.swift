import ObsClient
import Synchronization

/// Something under way with the daemon that another thread can end at once.
protocol Cancellable: AnyObject, Sendable {
    func cancel()
}

/// What `obsctl web` has under way with the daemon: the page's event streams, and the requests
/// being answered. Stopping the server ends them all first: a stream waits for the daemon's next
/// event, a request for its answer (up to `--timeout`, from a daemon that is stuck or stopped
/// with Ctrl-Z), and libmicrohttpd's stop waits for every connection's thread, so Ctrl-C waited
/// for them too.
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

    /// Runs `body` on a new connection to the daemon at `path`, which `cancelAll` shuts down:
    /// `body` then fails with `connectionLost` instead of waiting on.
    func withConnection<T>(to path: String, _ body: (ObsConnection) throws(ClientError) -> T) throws(ClientError) -> T {
        let call = ConnectionCall(try ObsConnection(path: path))
        add(call)
        defer { remove(call) }
        return try body(call.connection)
    }
}

/// A request's connection, as a call to cancel.
private final class ConnectionCall: Cancellable, @unchecked Sendable {
    // @unchecked: `cancel` is shutdown(2) of the connection's socket, which any thread may do while
    // the connection is open; whoever holds this holds the connection open, so the descriptor
    // cannot be closed and reused meanwhile.
    let connection: ObsConnection

    init(_ connection: ObsConnection) { self.connection = connection }

    func cancel() { connection.shutDown() }
}
