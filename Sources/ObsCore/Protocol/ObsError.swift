/// An error with a stable code, a message for humans, and optional details.
///
/// Codes are the wire protocol's error codes (docs/protocol.md); a code is never reused for another
/// meaning. `details` become extra members of the wire error object (`pos`, `path`, `rev`, `index`).
public struct ObsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable error code, as written on the wire.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let badJSON = Code(rawValue: "bad_json")
        public static let badRequest = Code(rawValue: "bad_request")
        public static let unknownOp = Code(rawValue: "unknown_op")
        public static let badKey = Code(rawValue: "bad_key")
        public static let badValue = Code(rawValue: "bad_value")
        public static let notFound = Code(rawValue: "not_found")
        public static let exists = Code(rawValue: "exists")
        public static let readOnly = Code(rawValue: "read_only")
        public static let conflict = Code(rawValue: "conflict")
        public static let typeMismatch = Code(rawValue: "type_mismatch")
        public static let parseError = Code(rawValue: "parse_error")
        public static let evalError = Code(rawValue: "eval_error")
        public static let cycle = Code(rawValue: "cycle")
        public static let tooLarge = Code(rawValue: "too_large")
        public static let limit = Code(rawValue: "limit")
        public static let permissionDenied = Code(rawValue: "permission_denied")
        public static let shuttingDown = Code(rawValue: "shutting_down")
        public static let `internal` = Code(rawValue: "internal")
        /// Cluster mode: the shared log (etcd) cannot decide writes now (no quorum, unreachable).
        public static let unavailable = Code(rawValue: "unavailable")

        /// Every code of docs/protocol.md, in its table's order.
        public static let all: [Code] = [
            .badJSON, .badRequest, .unknownOp, .badKey, .badValue, .notFound, .exists, .readOnly,
            .conflict, .typeMismatch, .parseError, .evalError, .cycle, .tooLarge, .limit,
            .permissionDenied, .shuttingDown, .internal, .unavailable,
        ]
    }

    public var code: Code
    public var message: String
    public var details: [String: JSONValue]

    public init(_ code: Code, _ message: String, details: [String: JSONValue] = [:]) {
        self.code = code
        self.message = message
        self.details = details
    }

    public var description: String { "\(code.rawValue): \(message)" }
}
