import ObsCore

/// Why a client call failed. Each case maps to one of obsctl's exit codes.
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The socket could not be reached; `reason` tells a missing socket, a path that is not a
    /// socket, a stale one and a permission problem apart.
    case cannotConnect(path: String, reason: ConnectFailure)
    /// The connection closed or broke before the answer came; `reason` is the daemon's goodbye, if any.
    case connectionLost(path: String, reason: String?)
    /// The daemon answered with an error.
    case server(ObsError)
    /// No answer (or no event) before the deadline.
    case timedOut

    public var description: String {
        switch self {
        case .cannotConnect(let path, let reason): "cannot connect to \(path): \(reason)"
        case .connectionLost(let path, let reason):
            "lost the connection to \(path)\(reason.map { " (\($0))" } ?? ""): is obsd running?"
        case .server(let error): Self.describe(error)
        case .timedOut: "timed out"
        }
    }

    /// `CODE: MESSAGE`, with the code once even when the message starts with it too
    /// ("cycle: a -> b -> a").
    public static func describe(_ error: ObsError) -> String {
        let code = error.code.rawValue
        let message = error.message.hasPrefix(code + ": ") ? String(error.message.dropFirst(code.count + 2)) : error.message
        return "\(code): \(message)"
    }
}
