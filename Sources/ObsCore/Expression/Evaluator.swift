/// What one evaluation reads: the store's context and, in a binding map, the bound value.
struct EvalEnvironment {
    let context: any ExpressionContext
    let value: JSONValue?
}

/// A compiled node. Each node is an immutable final class holding its compiled children, so
/// evaluation is one virtual call per node with no name lookups and typed errors throughout.
protocol Evaluable: AnyObject, Sendable {
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue
}

final class EvalConstant: Evaluable {
    let value: JSONValue
    init(_ value: JSONValue) { self.value = value }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue { value }
}

final class EvalKeyRead: Evaluable {
    let name: String
    init(_ name: String) { self.name = name }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        try env.context.value(ofKey: name) ?? .null
    }
}

final class EvalBoundValue: Evaluable {
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue { env.value ?? .null }
}

final class EvalArray: Evaluable {
    let items: [any Evaluable]
    init(_ items: [any Evaluable]) { self.items = items }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        var result: [JSONValue] = []
        result.reserveCapacity(items.count)
        for item in items { result.append(try item.evaluate(env)) }
        return .array(result)
    }
}

final class EvalObject: Evaluable {
    let members: [(name: String, value: any Evaluable)]
    init(_ members: [(name: String, value: any Evaluable)]) { self.members = members }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        var result: [String: JSONValue] = [:]
        result.reserveCapacity(members.count)
        for member in members { result[member.name] = try member.value.evaluate(env) }
        return .object(result)
    }
}

final class EvalMember: Evaluable {
    let base: any Evaluable
    let name: String
    init(_ base: any Evaluable, _ name: String) {
        self.base = base
        self.name = name
    }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        ValueAccess.member(try base.evaluate(env), name)
    }
}

final class EvalIndex: Evaluable {
    let base: any Evaluable
    let index: any Evaluable
    init(_ base: any Evaluable, _ index: any Evaluable) {
        self.base = base
        self.index = index
    }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        ValueAccess.index(try base.evaluate(env), try index.evaluate(env))
    }
}

final class EvalNot: Evaluable {
    let operand: any Evaluable
    init(_ operand: any Evaluable) { self.operand = operand }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        .bool(!(try operand.evaluate(env)).isTruthy)
    }
}

final class EvalNegate: Evaluable {
    let operand: any Evaluable
    let pos: Int
    init(_ operand: any Evaluable, pos: Int) {
        self.operand = operand
        self.pos = pos
    }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        try ValueOperators.negate(try operand.evaluate(env), at: pos)
    }
}

final class EvalAnd: Evaluable {
    let lhs: any Evaluable, rhs: any Evaluable
    init(_ lhs: any Evaluable, _ rhs: any Evaluable) { (self.lhs, self.rhs) = (lhs, rhs) }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        let left = try lhs.evaluate(env)
        return left.isTruthy ? try rhs.evaluate(env) : left
    }
}

final class EvalOr: Evaluable {
    let lhs: any Evaluable, rhs: any Evaluable
    init(_ lhs: any Evaluable, _ rhs: any Evaluable) { (self.lhs, self.rhs) = (lhs, rhs) }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        let left = try lhs.evaluate(env)
        return left.isTruthy ? left : try rhs.evaluate(env)
    }
}

final class EvalCoalesce: Evaluable {
    let lhs: any Evaluable, rhs: any Evaluable
    init(_ lhs: any Evaluable, _ rhs: any Evaluable) { (self.lhs, self.rhs) = (lhs, rhs) }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        let left = try lhs.evaluate(env)
        if case .null = left { return try rhs.evaluate(env) }
        return left
    }
}

final class EvalConditional: Evaluable {
    let condition: any Evaluable, then: any Evaluable, otherwise: any Evaluable
    init(_ condition: any Evaluable, _ then: any Evaluable, _ otherwise: any Evaluable) {
        (self.condition, self.then, self.otherwise) = (condition, then, otherwise)
    }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        try condition.evaluate(env).isTruthy ? try then.evaluate(env) : try otherwise.evaluate(env)
    }
}

/// The strict binary operators: both operands are always evaluated.
final class EvalBinary: Evaluable {
    let op: BinaryOperator
    let lhs: any Evaluable, rhs: any Evaluable
    let pos: Int
    init(_ op: BinaryOperator, _ lhs: any Evaluable, _ rhs: any Evaluable, pos: Int) {
        (self.op, self.lhs, self.rhs, self.pos) = (op, lhs, rhs, pos)
    }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        try EvalBinary.apply(op, try lhs.evaluate(env), try rhs.evaluate(env), at: pos)
    }

    static func apply(_ op: BinaryOperator, _ a: JSONValue, _ b: JSONValue, at pos: Int) throws(ObsError) -> JSONValue {
        // Two integers, the common case (counters, offsets, chains of `$x + 1`), taken before the
        // general switches, which copy both values into a tuple of enums that may hold strings,
        // arrays and objects (a retain and a release of each, and outlined copies).
        if case .int(let x) = a, case .int(let y) = b {
            switch op {
            case .add:
                let (sum, overflow) = x.addingReportingOverflow(y)
                if !overflow { return .int(sum) }
            case .equal: return .bool(x == y)
            case .notEqual: return .bool(x != y)
            case .less: return .bool(x < y)
            case .lessEqual: return .bool(x <= y)
            case .greater: return .bool(x > y)
            case .greaterEqual: return .bool(x >= y)
            default: break
            }
        }
        switch op {
        case .equal: return .bool(a == b)
        case .notEqual: return .bool(a != b)
        case .less, .lessEqual, .greater, .greaterEqual: return .bool(try ValueOperators.compare(op, a, b, at: pos))
        case .add: return try ValueOperators.add(a, b, at: pos)
        case .subtract, .multiply, .divide, .remainder: return try ValueOperators.arithmetic(op, a, b, at: pos)
        case .and, .or, .coalesce: preconditionFailure("short-circuit operators have their own nodes")
        }
    }
}

final class EvalCall0: Evaluable {
    let body: @Sendable (BuiltinCall) throws(ObsError) -> JSONValue
    let name: String, pos: Int
    init(_ body: @escaping @Sendable (BuiltinCall) throws(ObsError) -> JSONValue, name: String, pos: Int) {
        (self.body, self.name, self.pos) = (body, name, pos)
    }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        try body(BuiltinCall(context: env.context, name: name, pos: pos))
    }
}

final class EvalCall1: Evaluable {
    let body: @Sendable (JSONValue, BuiltinCall) throws(ObsError) -> JSONValue
    let arg: any Evaluable
    let name: String, pos: Int
    init(_ body: @escaping @Sendable (JSONValue, BuiltinCall) throws(ObsError) -> JSONValue, _ arg: any Evaluable, name: String, pos: Int) {
        (self.body, self.arg, self.name, self.pos) = (body, arg, name, pos)
    }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        try body(try arg.evaluate(env), BuiltinCall(context: env.context, name: name, pos: pos))
    }
}

final class EvalCall2: Evaluable {
    let body: @Sendable (JSONValue, JSONValue, BuiltinCall) throws(ObsError) -> JSONValue
    let first: any Evaluable, second: any Evaluable
    let name: String, pos: Int
    init(_ body: @escaping @Sendable (JSONValue, JSONValue, BuiltinCall) throws(ObsError) -> JSONValue,
         _ first: any Evaluable, _ second: any Evaluable, name: String, pos: Int) {
        (self.body, self.first, self.second, self.name, self.pos) = (body, first, second, name, pos)
    }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        let a = try first.evaluate(env)
        return try body(a, try second.evaluate(env), BuiltinCall(context: env.context, name: name, pos: pos))
    }
}

final class EvalCallN: Evaluable {
    let body: @Sendable ([JSONValue], BuiltinCall) throws(ObsError) -> JSONValue
    let args: [any Evaluable]
    let name: String, pos: Int
    init(_ body: @escaping @Sendable ([JSONValue], BuiltinCall) throws(ObsError) -> JSONValue, _ args: [any Evaluable], name: String, pos: Int) {
        (self.body, self.args, self.name, self.pos) = (body, args, name, pos)
    }
    func evaluate(_ env: EvalEnvironment) throws(ObsError) -> JSONValue {
        var values: [JSONValue] = []
        values.reserveCapacity(args.count)
        for arg in args { values.append(try arg.evaluate(env)) }
        return try body(values, BuiltinCall(context: env.context, name: name, pos: pos))
    }
}

/// Member and index access: anything missing, or of the wrong kind, is null.
enum ValueAccess {
    static func member(_ base: JSONValue, _ name: String) -> JSONValue {
        guard case .object(let o) = base else { return .null }
        return o[name] ?? .null
    }

    static func index(_ base: JSONValue, _ index: JSONValue) -> JSONValue {
        switch (base, index) {
        case let (.object(o), .string(name)): return o[name] ?? .null
        case let (.array(a), _):
            guard let i = arrayIndex(index, count: a.count) else { return .null }
            return a[i]
        default: return .null
        }
    }

    /// A position in an array of `count` items, counting negative indexes from the end; nil
    /// when it is out of range or not an integer.
    static func arrayIndex(_ index: JSONValue, count: Int) -> Int? {
        let i: Int64
        switch index {
        case .int(let v): i = v
        case .double(let d) where d == d.rounded() && abs(d) < 1e15: i = Int64(d)
        default: return nil
        }
        let resolved = i < 0 ? Int64(count) + i : i
        return resolved >= 0 && resolved < count ? Int(resolved) : nil
    }
}
