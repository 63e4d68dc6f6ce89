// etcd's refusals as the gateway sends them, and what each means to the client. Over gRPC a
// refusal is the call's status (`grpc-status`, `grpc-message`: Wire/GRPC.swift), the same code and
// message, read into the same type.
//
// A unary call answers `{"error": "...", "message": "...", "code": N}` (N a gRPC status code) with
// an HTTP error status; a stream (watch, keepalive) ends with
// `{"error": {"grpc_code": N, "http_code": ..., "message": "..."}}`; a watch etcd refuses after
// creating it says `"canceled": true` with a `cancel_reason` ("rpc error: code = ... desc = ...").

/// A refusal from etcd: its gRPC status code and message.
struct GatewayFailure: Sendable, Hashable {
    var code: Int
    var message: String

    /// gRPC status codes etcd uses.
    enum Code {
        static let invalidArgument = 3
        static let deadlineExceeded = 4
        static let notFound = 5
        static let permissionDenied = 7
        static let resourceExhausted = 8
        static let outOfRange = 11
        static let unavailable = 14
        static let unauthenticated = 16
    }

    /// The refusal in `object`, nil when it is an answer.
    init?(_ object: GatewayObject) {
        if case .object(let error)? = object.fields["error"] {
            let stream = GatewayObject(error)
            code = Int((try? stream.int64("grpc_code")) ?? 0)
            message = (try? stream.string("message")) ?? "etcd ended the stream"
        } else if object.has("code"), !object.has("header") {
            code = Int((try? object.int64("code")) ?? 0)
            message = (try? object.string("message")) ?? (try? object.string("error")) ?? "no message"
        } else {
            return nil
        }
    }

    init(code: Int, message: String) {
        self.code = code
        self.message = message
    }

    /// A watch's `cancel_reason`: "rpc error: code = Unauthenticated desc = etcdserver: invalid auth token".
    init(cancelReason reason: String) {
        let names = ["InvalidArgument": Code.invalidArgument, "DeadlineExceeded": Code.deadlineExceeded,
                     "PermissionDenied": Code.permissionDenied, "ResourceExhausted": Code.resourceExhausted,
                     "OutOfRange": Code.outOfRange,
                     "Unavailable": Code.unavailable, "Unauthenticated": Code.unauthenticated]
        var code = 0
        var message = reason
        if let codeRange = reason.range(of: "code = "), let descRange = reason.range(of: " desc = ") {
            code = names[String(reason[codeRange.upperBound..<descRange.lowerBound])] ?? 0
            message = String(reason[descRange.upperBound...])
        }
        self.init(code: code, message: message)
    }

    /// The member has no leader: it proposed nothing, so another member may be asked.
    var isNoLeader: Bool { message.contains("etcdserver: no leader") }

    /// The token expired or the member does not know it: authenticate again.
    var isInvalidToken: Bool { message.contains("invalid auth token") }

    /// etcd could not decide: "request timed out", "leader changed" (a write proposed, its fate
    /// unknown to the member), or "no leader" (nothing proposed: `isNoLeader`).
    var isUnavailable: Bool { code == Code.unavailable || code == Code.deadlineExceeded }

    /// The refusal as the client's error, for a read or a watch.
    var error: EtcdError { error(mayHaveBeenApplied: false) }

    /// The refusal as the client's error; `mayHaveBeenApplied` for an `unavailable` one: whether
    /// the member may have proposed the write.
    func error(mayHaveBeenApplied: Bool) -> EtcdError {
        switch code {
        case Code.unavailable, Code.deadlineExceeded:
            return .unavailable(message, mayHaveBeenApplied: mayHaveBeenApplied)
        case Code.unauthenticated, Code.permissionDenied:
            return .authenticationFailed(message)
        case Code.invalidArgument where message.contains("authentication failed") || message.contains("user name is empty"):
            return .authenticationFailed(message)
        case Code.notFound where message.contains("requested lease not found"):
            return .leaseNotFound(message)
        case Code.outOfRange where message.contains("compacted"):
            return .compacted(message)
        // etcd's own bounds on a request (etcdserver's ErrGRPCRequestTooLarge and
        // ErrGRPCTooManyOps), and gRPC's on the message it reads (etcd sets it a little above
        // --max-request-bytes): "received message larger than max".
        case Code.invalidArgument where message.contains("request is too large") || message.contains("too many operations in txn request"),
             Code.resourceExhausted where message.contains("larger than max"):
            return .requestTooLarge(message)
        // The NOSPACE alarm: etcd's backend reached its quota (--quota-backend-bytes) and takes
        // no write until an operator compacts, defragments and disarms it.
        case Code.resourceExhausted where message.contains("database space exceeded"):
            return .unavailable(message, mayHaveBeenApplied: false)
        // etcd's applying is far behind what it committed (ErrTooManyRequests, checked before a
        // request is proposed): a write is refused, not applied, and may be sent again later.
        case Code.resourceExhausted where message.contains("too many requests"):
            return .unavailable(message, mayHaveBeenApplied: false)
        default:
            return .etcd(code: code, message: message)
        }
    }
}
