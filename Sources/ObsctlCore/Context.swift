import ObsClient
import ObsCore

/// What every command gets: where the daemon is, the global timeout, and where to write.
public struct Context {
    public let socketPath: String
    /// `--timeout`, in seconds.
    public let timeout: Double?
    public let output: Output
    public let environment: [String: String]

    /// The deadline for a request sent now.
    var deadline: Double? { timeout.map { monotonicNow() + $0 } }

    /// Connects; a daemon that accepts no connection is waited for up to `--timeout` (then
    /// `timedOut`), or without it for `ObsConnection.connectTimeout`.
    func connect() throws(ClientError) -> ObsConnection {
        try connect(until: deadline)
    }

    /// Connects, waiting until `deadline` at most for a daemon that accepts no connection.
    func connect(until deadline: Double?) throws(ClientError) -> ObsConnection {
        try ObsConnection(path: socketPath, deadline: deadline)
    }

    /// Connects, sends one request and returns its answer, all within one `--timeout`.
    func request(_ op: String, _ fields: [String: JSONValue] = [:]) throws(ClientError) -> Response {
        let deadline = self.deadline
        return try connect(until: deadline).request(op, fields, deadline: deadline)
    }
}
