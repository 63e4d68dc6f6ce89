import Foundation

extension Builtin {
    static let math: [Builtin] = [
        unary("abs") { v, call throws(ObsError) in
            if case .int(let i) = v {
                guard i != .min else { throw call.error("integer overflow") }
                return .int(Swift.abs(i))
            }
            return .double(Swift.abs(try call.number(v)))
        },
        variadic("min", 1...Int.max) { args, call throws(ObsError) in try extreme(args, call, wantLess: true) },
        variadic("max", 1...Int.max) { args, call throws(ObsError) in try extreme(args, call, wantLess: false) },
        variadic("round", 1...2) { args, call throws(ObsError) in
            if args.count == 1 {
                if case .int = args[0] { return args[0] }
                return try call.integral(try call.number(args[0]).rounded(.toNearestOrAwayFromZero))
            }
            let x = try call.number(args[0])
            let digits = try call.integer(args[1], "digits")
            return .double(round(x, digits: digits))
        },
        unary("floor") { v, call throws(ObsError) in
            if case .int = v { return v }
            return try call.integral(try call.number(v).rounded(.down))
        },
        unary("ceil") { v, call throws(ObsError) in
            if case .int = v { return v }
            return try call.integral(try call.number(v).rounded(.up))
        },
        variadic("clamp", 3...3) { args, call throws(ObsError) in
            for (arg, what) in zip(args, ["x", "lo", "hi"]) { _ = try call.number(arg, what) }
            guard ValueOperators.numericOrder(args[1], args[2])! <= 0 else { throw call.error("lo is greater than hi") }
            // The chosen argument itself is returned, so integers stay integers.
            if ValueOperators.numericOrder(args[0], args[1])! < 0 { return args[1] }
            if ValueOperators.numericOrder(args[0], args[2])! > 0 { return args[2] }
            return args[0]
        },
        unary("sqrt") { v, call throws(ObsError) in
            let x = try call.number(v)
            guard x >= 0 else { throw call.error("square root of a negative number") }
            return .double(x.squareRoot())
        },
        binary("pow") { a, b, call throws(ObsError) in
            if case let (.int(base), .int(exponent)) = (a, b), exponent >= 0 {
                return .int(try integerPower(base, exponent, call))
            }
            return try call.finite(Foundation.pow(try call.number(a), try call.number(b)))
        },
    ]

    /// The least or greatest of numbers, or of strings by Unicode scalar values; null when empty.
    private static func extreme(_ args: [JSONValue], _ call: BuiltinCall, wantLess: Bool) throws(ObsError) -> JSONValue {
        var items = args
        if args.count == 1, case .array(let elements) = args[0] { items = elements }
        guard var best = items.first else { return .null }
        switch best {
        case .int, .double, .string: break
        default: throw call.error("arguments must be numbers or strings, got \(best.typeName)")
        }
        for item in items.dropFirst() {
            let order: Int
            if case let (.string(x), .string(y)) = (item, best) {
                order = ValueOperators.scalarOrder(x, y)
            } else if let o = ValueOperators.numericOrder(item, best) {
                order = o
            } else {
                throw call.error("cannot compare \(item.typeName) with \(best.typeName)")
            }
            if wantLess ? order < 0 : order > 0 { best = item }
        }
        return best
    }

    /// Rounds half away from zero at `digits` decimal places (negative: tens, hundreds, ...).
    private static func round(_ x: Double, digits: Int64) -> Double {
        let clamped = Int(Swift.max(-400, Swift.min(400, digits)))
        let scale = Foundation.pow(10.0, Double(Swift.abs(clamped)))
        if clamped >= 0 {
            let scaled = x * scale
            // Past double precision there is nothing left to round.
            guard scaled.isFinite, Swift.abs(scaled) < 1e17 else { return x }
            return scaled.rounded(.toNearestOrAwayFromZero) / scale
        }
        guard scale.isFinite else { return 0 }
        return (x / scale).rounded(.toNearestOrAwayFromZero) * scale
    }

    private static func integerPower(_ base: Int64, _ exponent: Int64, _ call: BuiltinCall) throws(ObsError) -> Int64 {
        var result: Int64 = 1, b = base, e = exponent
        while e > 0 {
            if e & 1 == 1 {
                let (r, overflow) = result.multipliedReportingOverflow(by: b)
                guard !overflow else { throw call.error("integer overflow") }
                result = r
            }
            e >>= 1
            if e > 0 {
                let (sq, overflow) = b.multipliedReportingOverflow(by: b)
                guard !overflow else { throw call.error("integer overflow") }
                b = sq
            }
        }
        return result
    }
}
