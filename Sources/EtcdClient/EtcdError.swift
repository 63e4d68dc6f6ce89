/// Why a request failed or a watch ended. A transaction whose compares fail is not an error: it
/// answers with `succeeded == false`.
public enum EtcdError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No endpoint answered within the timeout, or etcd could not serve the request (no leader,
    /// no quorum: "etcdserver: request timed out", "etcdserver: no leader"). The message names the
    /// endpoints tried. `mayHaveBeenApplied`: a write may have reached a member that could
    /// propose it (sent, then cut or unanswered; or answered with etcd's own timeout), so it may
    /// still be committed. False when no attempt can have been applied: every one was refused
    /// before a connection or a TLS handshake took it, never sent, or refused "no leader" (which
    /// etcd answers before proposing anything), and for reads and watches.
    case unavailable(String, mayHaveBeenApplied: Bool)
    /// What the message of `unavailable` says after the endpoint whose answer to a write was lost.
    public static let mayHaveBeenAppliedNote = "(the request may have been applied)"
    /// etcd refused the user, the password or the token, or the user lacks the permission.
    case authenticationFailed(String)
    /// The TLS handshake failed: a certificate was refused on either side, or a file is unreadable.
    case tlsFailed(String)
    /// The revision asked for is older than etcd keeps (it has been compacted).
    case compacted(String)
    /// An answer that is not what etcd's gateway sends.
    case malformedResponse(String)
    /// An answer (or one message of a watch) larger than the configured bound.
    case responseTooLarge(limit: Int)
    /// etcd refused the request as larger than it takes: more bytes than its
    /// `--max-request-bytes` (1.5 MiB by default) or more operations in one transaction than its
    /// `--max-txn-ops` (128). Nothing was applied, and sending it again changes nothing.
    case requestTooLarge(String)
    /// The lease a put names does not exist (it ran out, or was revoked): nothing was applied.
    case leaseNotFound(String)
    /// etcd refused the request: its gRPC status code and message.
    case etcd(code: Int, message: String)
    /// The configuration cannot work (no endpoint, an endpoint that is not http:// or https://...).
    case invalidConfiguration(String)
    /// libcurl, which the client needs, could not be loaded on this host (the message says why).
    case libraryUnavailable(String)
    /// A gRPC watch whose messages not yet taken (`takeCompletions`) passed
    /// `maxWatchBacklogBytes`: its caller takes them slower than etcd sends them. Not an outage:
    /// the stream was stopped, what it had received was handed over, and the watch ended; watch
    /// again from one past the last revision taken, at once.
    case watchBehind(limit: Int)
    /// The client was closed before the request was answered.
    case closed

    public var description: String {
        switch self {
        case .unavailable(let message, _): "etcd unavailable: \(message)"
        case .authenticationFailed(let message) where message.contains("permission denied"):
            // The user is known and the password right: a role is missing, which "authentication
            // failed" would hide.
            "etcd denied the permission: \(message) (etcd's user has no role granting read and write on these keys)"
        case .authenticationFailed(let message): "etcd authentication failed: \(message)"
        case .tlsFailed(let message): "TLS to etcd failed: \(message)"
        case .compacted(let message): "revision compacted: \(message)"
        case .malformedResponse(let message): "malformed answer from etcd: \(message)"
        case .responseTooLarge(let limit): "an answer from etcd is larger than \(limit) bytes"
        case .requestTooLarge(let message): "etcd refused the request as too large: \(message)"
        case .leaseNotFound(let message): "etcd refused the request: \(message)"
        case .etcd(let code, let message): "etcd refused the request (code \(code)): \(message)"
        case .invalidConfiguration(let message): "invalid etcd configuration: \(message)"
        case .libraryUnavailable(let message): message
        case .watchBehind(let limit): "a watch's messages not taken yet passed \(limit) bytes (taken slower than etcd sends them)"
        case .closed: "the etcd client is closed"
        }
    }
}
