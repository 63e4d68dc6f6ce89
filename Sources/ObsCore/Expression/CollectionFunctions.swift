extension Builtin {
    static let collections: [Builtin] = [
        unary("keys") { v, call throws(ObsError) in
            .array(sortedMembers(try call.object(v)).map { .string($0.key) })
        },
        unary("values") { v, call throws(ObsError) in
            .array(sortedMembers(try call.object(v)).map(\.value))
        },
        unary("sum") { v, call throws(ObsError) in try sum(try call.array(v), call) },
        unary("avg") { v, call throws(ObsError) in
            let items = try call.array(v)
            guard !items.isEmpty else { return .null }
            return try ValueOperators.arithmetic(.divide, try sum(items, call), .int(Int64(items.count)), at: call.pos)
        },
        unary("sort") { v, call throws(ObsError) in
            let items = try call.array(v)
            if items.allSatisfy({ if case .string = $0 { true } else { false } }) {
                return .array(items.sorted { ValueOperators.scalarOrder($0.stringOrEmpty, $1.stringOrEmpty) < 0 })
            }
            guard let bad = items.first(where: { ValueOperators.numericOrder($0, $0) == nil }) else {
                return .array(items.sorted { ValueOperators.numericOrder($0, $1)! < 0 })
            }
            throw call.error("can only sort numbers or strings, not \(bad.typeName) among them")
        },
        unary("reverse") { v, call throws(ObsError) in
            switch v {
            case .array(let a): return .array(a.reversed())
            case .string(let s): return .string(String(String.UnicodeScalarView(s.unicodeScalars.reversed())))
            default: throw call.error("argument must be an array or a string, got \(v.typeName)")
            }
        },
        unary("first") { v, call throws(ObsError) in try call.array(v).first ?? .null },
        unary("last") { v, call throws(ObsError) in try call.array(v).last ?? .null },
        unary("unique") { v, call throws(ObsError) in
            var seen = Set<JSONValue>()
            return .array(try call.array(v).filter { seen.insert($0).inserted })
        },
        variadic("get", 2...3) { args, call throws(ObsError) in
            let path = try call.string(args[1], "path")
            let fallback = args.count == 3 ? args[2] : .null
            var current = args[0]
            guard !path.isEmpty else { return current }
            for segment in path.split(separator: ".", omittingEmptySubsequences: false) {
                switch current {
                case .object(let o):
                    guard let next = o[String(segment)] else { return fallback }
                    current = next
                case .array(let a):
                    guard let i = Int64(segment), let index = ValueAccess.arrayIndex(.int(i), count: a.count) else { return fallback }
                    current = a[index]
                default:
                    return fallback
                }
            }
            return current
        },
    ]

    /// Members in key-name order (by Unicode scalars), the order keys, values and match share.
    static func sortedMembers(_ o: [String: JSONValue]) -> [(key: String, value: JSONValue)] {
        o.sorted { ValueOperators.scalarOrder($0.key, $1.key) < 0 }.map { (key: $0.key, value: $0.value) }
    }

    private static func sum(_ items: [JSONValue], _ call: BuiltinCall) throws(ObsError) -> JSONValue {
        var total: JSONValue = .int(0)
        for item in items {
            guard ValueOperators.numericOrder(item, item) != nil else {
                throw call.error("can only sum numbers, not \(item.typeName)")
            }
            total = try ValueOperators.add(total, item, at: call.pos)
        }
        return total
    }
}

extension JSONValue {
    fileprivate var stringOrEmpty: String {
        if case .string(let s) = self { return s }
        return ""
    }
}
