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

    func connect() throws(ClientError) -> ObsConnection {
        try ObsConnection(path: socketPath)
    }

    /// Connects, sends one request and returns its answer.
    func request(_ op: String, _ fields: [String: JSONValue] = [:]) throws(ClientError) -> Response {
        try connect().request(op, fields, deadline: deadline)
    }
}
