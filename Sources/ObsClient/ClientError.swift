import ObsCore

/// Why a client call failed. Each case maps to one of obsctl's exit codes.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The socket could not be reached (no daemon, wrong path, no permission).
    case cannotConnect(path: String)
    /// The connection closed or broke before the answer came; `reason` is the daemon's goodbye, if any.
    case connectionLost(path: String, reason: String?)
    /// The daemon answered with an error.
    case server(ObsError)
    /// No answer (or no event) before the deadline.
    case timedOut

    public var description: String {
        switch self {
        case .cannotConnect(let path): "cannot connect to \(path): is obsd running?"
        case .connectionLost(let path, let reason):
            "lost the connection to \(path)\(reason.map { " (\($0))" } ?? ""): is obsd running?"
        case .server(let error): "\(error.code.rawValue): \(error.message)"
        case .timedOut: "timed out"
        }
    }
}
