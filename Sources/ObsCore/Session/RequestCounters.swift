/// What `stats` reports of the requests all sessions of a store answered, by operation and by
/// error code, and of the sessions opened. The store keeps them, so they outlive every session.
struct RequestCounters {
    /// Requests with a known operation, by the operation's index in `Operations.all`.
    var byOperation = [UInt64](repeating: 0, count: Operations.all.count)
    /// Error answers by code, including lines that were no request at all (bad_json, too_large).
    var byError: [ObsError.Code: UInt64] = [:]
    /// Sessions (connections) opened since the store started.
    var sessionsOpened: UInt64 = 0

    mutating func count(_ error: ObsError) {
        byError[error.code, default: 0] += 1
    }

    /// The counts as `stats` fields: every operation and every error code, zeros included, so a
    /// time series exists before its first increment.
    var fields: [(String, JSONValue)] {
        let requests = Dictionary(uniqueKeysWithValues: Operations.all.indices.map { (Operations.all[$0].name, JSONValue.int(Int64(byOperation[$0]))) })
        let errors = Dictionary(uniqueKeysWithValues: ObsError.Code.all.map { ($0.rawValue, JSONValue.int(Int64(byError[$0] ?? 0))) })
        return [("connections_accepted", .int(Int64(sessionsOpened))), ("requests", .object(requests)), ("errors", .object(errors))]
    }
}
