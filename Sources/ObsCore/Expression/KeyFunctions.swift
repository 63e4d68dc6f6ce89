extension Builtin {
    static let keys: [Builtin] = [
        unary("peek", .readsKeys) { v, call throws(ObsError) in
            try call.context.peek(key: try call.string(v, "key name")) ?? .null
        },
        unary("exists", .readsKeys) { v, call throws(ObsError) in
            .bool(call.context.exists(key: try call.string(v, "key name")))
        },
        unary("match", .readsKeys) { v, call throws(ObsError) in
            let pattern = try call.string(v, "pattern")
            let matches: [(key: String, value: JSONValue)]
            do throws(ObsError) {
                matches = try call.context.match(pattern: pattern)
            } catch where error.code == .badKey {
                // A malformed pattern is this expression's fault, and reads as one.
                throw call.error(error.message)
            }
            var result: [String: JSONValue] = [:]
            result.reserveCapacity(matches.count)
            for match in matches { result[match.key] = match.value }
            return .object(result)
        },
    ]
}
