/// The semantics of the binary and unary operators on values, shared by the evaluator and
/// constant folding. Each failure names the operation and the operator's position.
enum ValueOperators {
    static func compare(_ op: BinaryOperator, _ a: JSONValue, _ b: JSONValue, at pos: Int) throws(ObsError) -> Bool {
        let order: Int
        switch (a, b) {
        case let (.string(x), .string(y)): order = scalarOrder(x, y)
        default:
            guard let o = numericOrder(a, b) else {
                throw evalError("cannot compare \(a.typeName) with \(b.typeName)", at: pos)
            }
            order = o
        }
        switch op {
        case .less: return order < 0
        case .lessEqual: return order <= 0
        case .greater: return order > 0
        default: return order >= 0
        }
    }

    /// -1, 0 or 1 comparing two numbers exactly (an int64 is never rounded to a double), or nil
    /// when either is not a number.
    static func numericOrder(_ a: JSONValue, _ b: JSONValue) -> Int? {
        switch (a, b) {
        case let (.int(x), .int(y)): return x < y ? -1 : (x == y ? 0 : 1)
        case let (.double(x), .double(y)): return x < y ? -1 : (x == y ? 0 : 1)
        case let (.int(x), .double(y)): return intDoubleOrder(x, y)
        case let (.double(x), .int(y)): return -intDoubleOrder(y, x)
        default: return nil
        }
    }

    private static func intDoubleOrder(_ i: Int64, _ d: Double) -> Int {
        if d >= 9223372036854775808.0 { return -1 }
        if d < -9223372036854775808.0 { return 1 }
        let floor = d.rounded(.down)
        let f = Int64(floor)
        if i < f { return -1 }
        if i > f { return 1 }
        return d > floor ? -1 : 0
    }

    /// Orders strings by Unicode scalar values, not by Swift's canonical-equivalence order.
    static func scalarOrder(_ x: String, _ y: String) -> Int {
        var i = x.unicodeScalars.makeIterator()
        var j = y.unicodeScalars.makeIterator()
        while true {
            switch (i.next(), j.next()) {
            case (nil, nil): return 0
            case (nil, _): return -1
            case (_, nil): return 1
            case let (a?, b?) where a != b: return a.value < b.value ? -1 : 1
            default: continue
            }
        }
    }

    static func add(_ a: JSONValue, _ b: JSONValue, at pos: Int) throws(ObsError) -> JSONValue {
        switch (a, b) {
        case let (.int(x), .int(y)):
            let (r, overflow) = x.addingReportingOverflow(y)
            guard !overflow else { throw overflowError("+", at: pos) }
            return .int(r)
        case let (.string(x), .string(y)): return .string(x + y)
        case (.string(let x), _): return .string(x + ValueConversions.string(b))
        case (_, .string(let y)): return .string(ValueConversions.string(a) + y)
        case let (.array(x), .array(y)): return .array(x + y)
        default:
            guard let (x, y) = doubles(a, b) else {
                throw evalError("cannot add \(a.typeName) and \(b.typeName)", at: pos)
            }
            return try finite(x + y, "+", at: pos)
        }
    }

    static func arithmetic(_ op: BinaryOperator, _ a: JSONValue, _ b: JSONValue, at pos: Int) throws(ObsError) -> JSONValue {
        if case let (.int(x), .int(y)) = (a, b) { return try integer(op, x, y, at: pos) }
        guard let (x, y) = doubles(a, b) else {
            throw evalError("cannot \(verb(op)) \(a.typeName) and \(b.typeName)", at: pos)
        }
        switch op {
        case .subtract: return try finite(x - y, "-", at: pos)
        case .multiply: return try finite(x * y, "*", at: pos)
        case .divide:
            guard y != 0 else { throw evalError("division by zero", at: pos) }
            return try finite(x / y, "/", at: pos)
        default:
            guard y != 0 else { throw evalError("modulo by zero", at: pos) }
            return try finite(x.truncatingRemainder(dividingBy: y), "%", at: pos)
        }
    }

    private static func integer(_ op: BinaryOperator, _ x: Int64, _ y: Int64, at pos: Int) throws(ObsError) -> JSONValue {
        let result: (partialValue: Int64, overflow: Bool)
        switch op {
        case .subtract: result = x.subtractingReportingOverflow(y)
        case .multiply: result = x.multipliedReportingOverflow(by: y)
        case .divide:
            guard y != 0 else { throw evalError("division by zero", at: pos) }
            let (q, overflow) = x.dividedReportingOverflow(by: y)
            guard !overflow else { throw overflowError("/", at: pos) }
            // Exact quotients stay integers; others are doubles, as in most dynamic languages.
            return x % y == 0 ? .int(q) : .double(Double(x) / Double(y))
        default:
            guard y != 0 else { throw evalError("modulo by zero", at: pos) }
            // Swift's % already takes the sign of the dividend; only int64.min % -1 overflows,
            // and its mathematical result is 0.
            result = x.remainderReportingOverflow(dividingBy: y)
            if result.overflow { return .int(0) }
        }
        guard !result.overflow else { throw overflowError(op.rawValue, at: pos) }
        return .int(result.partialValue)
    }

    static func negate(_ a: JSONValue, at pos: Int) throws(ObsError) -> JSONValue {
        switch a {
        case .int(let i):
            guard i != .min else { throw overflowError("-", at: pos) }
            return .int(-i)
        case .double(let d): return .double(-d)
        default: throw evalError("cannot negate \(a.typeName)", at: pos)
        }
    }

    private static func doubles(_ a: JSONValue, _ b: JSONValue) -> (Double, Double)? {
        switch (a, b) {
        case let (.int(x), .int(y)): return (Double(x), Double(y))
        case let (.int(x), .double(y)): return (Double(x), y)
        case let (.double(x), .int(y)): return (x, Double(y))
        case let (.double(x), .double(y)): return (x, y)
        default: return nil
        }
    }

    private static func finite(_ d: Double, _ op: String, at pos: Int) throws(ObsError) -> JSONValue {
        guard d.isFinite else { throw evalError("result of '\(op)' is not a finite number", at: pos) }
        return .double(d)
    }

    private static func overflowError(_ op: String, at pos: Int) -> ObsError {
        evalError("integer overflow in '\(op)'", at: pos)
    }

    private static func verb(_ op: BinaryOperator) -> String {
        switch op {
        case .subtract: return "subtract"
        case .multiply: return "multiply"
        case .divide: return "divide"
        default: return "take the remainder of"
        }
    }
}
