/// One built-in function: its name, how many arguments it takes, what it may read, and its
/// implementation. The parser resolves calls to these at compile time, so evaluation never looks
/// a name up.
struct Builtin: Sendable, Equatable {
    enum Effect: Sendable {
        /// Depends only on its arguments, so calls with constant arguments are folded.
        case pure
        /// Reads keys through the context.
        case readsKeys
        /// Reads the clock; an expression calling it is re-evaluated as time passes.
        case readsClock
        /// Renders a time it is given using the system's time zone data: not folded, since
        /// that data belongs to the running system, but not re-evaluated as time passes either.
        case rendersTime
    }

    enum Implementation: Sendable {
        case nullary(@Sendable (BuiltinCall) throws(ObsError) -> JSONValue)
        case unary(@Sendable (JSONValue, BuiltinCall) throws(ObsError) -> JSONValue)
        case binary(@Sendable (JSONValue, JSONValue, BuiltinCall) throws(ObsError) -> JSONValue)
        case variadic(@Sendable ([JSONValue], BuiltinCall) throws(ObsError) -> JSONValue)
    }

    let name: String
    let arity: ClosedRange<Int>
    let effect: Effect
    let implementation: Implementation

    static func == (lhs: Builtin, rhs: Builtin) -> Bool { lhs.name == rhs.name }

    static func named(_ name: String) -> Builtin? { table[name] }

    var arityDescription: String {
        if arity.upperBound == Int.max { return "at least \(arity.lowerBound) argument\(arity.lowerBound == 1 ? "" : "s")" }
        if arity.count == 1 { return "\(arity.lowerBound) argument\(arity.lowerBound == 1 ? "" : "s")" }
        return "\(arity.lowerBound) to \(arity.upperBound) arguments"
    }

    private static let table: [String: Builtin] = {
        let all = Builtin.math + Builtin.strings + Builtin.types + Builtin.collections + Builtin.keys + Builtin.time
        return Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })
    }()

    /// Every built-in function, sorted by name (for docs and tests).
    static var all: [Builtin] { table.values.sorted { $0.name < $1.name } }

    static func unary(_ name: String, _ effect: Effect = .pure,
                      _ body: @escaping @Sendable (JSONValue, BuiltinCall) throws(ObsError) -> JSONValue) -> Builtin {
        Builtin(name: name, arity: 1...1, effect: effect, implementation: .unary(body))
    }

    static func binary(_ name: String, _ effect: Effect = .pure,
                       _ body: @escaping @Sendable (JSONValue, JSONValue, BuiltinCall) throws(ObsError) -> JSONValue) -> Builtin {
        Builtin(name: name, arity: 2...2, effect: effect, implementation: .binary(body))
    }

    static func variadic(_ name: String, _ arity: ClosedRange<Int>, _ effect: Effect = .pure,
                         _ body: @escaping @Sendable ([JSONValue], BuiltinCall) throws(ObsError) -> JSONValue) -> Builtin {
        Builtin(name: name, arity: arity, effect: effect, implementation: .variadic(body))
    }
}

/// The site of one function call while it runs: what it reads, and how its errors read.
struct BuiltinCall {
    let context: any ExpressionContext
    let name: String
    let pos: Int

    func error(_ message: String) -> ObsError {
        evalError("\(name): \(message)", at: pos)
    }

    func number(_ v: JSONValue, _ what: String = "argument") throws(ObsError) -> Double {
        switch v {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: throw error("\(what) must be a number, got \(v.typeName)")
        }
    }

    func integer(_ v: JSONValue, _ what: String) throws(ObsError) -> Int64 {
        switch v {
        case .int(let i): return i
        case .double(let d) where d == d.rounded() && abs(d) < 9.2e18: return Int64(d)
        case .double: throw error("\(what) must be an integer")
        default: throw error("\(what) must be an integer, got \(v.typeName)")
        }
    }

    func string(_ v: JSONValue, _ what: String = "argument") throws(ObsError) -> String {
        guard case .string(let s) = v else { throw error("\(what) must be a string, got \(v.typeName)") }
        return s
    }

    func array(_ v: JSONValue, _ what: String = "argument") throws(ObsError) -> [JSONValue] {
        guard case .array(let a) = v else { throw error("\(what) must be an array, got \(v.typeName)") }
        return a
    }

    func object(_ v: JSONValue, _ what: String = "argument") throws(ObsError) -> [String: JSONValue] {
        guard case .object(let o) = v else { throw error("\(what) must be an object, got \(v.typeName)") }
        return o
    }

    /// A double result, or an error when it is NaN or infinite (values must stay JSON).
    func finite(_ d: Double) throws(ObsError) -> JSONValue {
        guard d.isFinite else { throw error("result is not a finite number") }
        return .double(d)
    }

    /// An integral double as an int, or an error when it does not fit in int64.
    func integral(_ d: Double) throws(ObsError) -> JSONValue {
        guard d.isFinite, d >= -9223372036854775808.0, d < 9223372036854775808.0 else {
            throw error("result \(d) is out of the integer range")
        }
        return .int(Int64(d))
    }
}
