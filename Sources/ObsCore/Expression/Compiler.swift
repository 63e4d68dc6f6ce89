/// Turns a syntax tree into evaluable nodes.
///
/// Folding: a node whose inputs are all constant and which reads neither keys nor the clock is
/// evaluated once here and replaced by its result. A fold that fails is left in place, so the
/// error (with its position) is raised when the expression is evaluated, not when it is defined.
/// Short-circuit operators with a constant left side keep only the branch that can run.
/// Tests compile without folding too, to check folding changes no result, error or dependency.
struct Compiler {
    let folds: Bool

    // One small function per kind of node keeps each recursive frame small (see Parser).
    func compile(_ syntax: Syntax) -> any Evaluable {
        switch syntax.node {
        case .array(let items): return array(items)
        case .object(let members): return object(members)
        case .member(let base, let name): return member(base, name)
        case .index(let base, let position): return index(base, position)
        case .unary(let op, let operand): return unary(op, operand, pos: syntax.pos)
        case .binary(let op, let lhs, let rhs): return binary(op, lhs, rhs, pos: syntax.pos)
        case .conditional(let c, let t, let e): return conditional(c, t, e)
        case .call(let builtin, let args): return call(builtin, args.map(compile), pos: syntax.pos)
        default: return leaf(syntax.node)
        }
    }

    private func leaf(_ node: Node) -> any Evaluable {
        switch node {
        case .bool(let b): return Constant(.bool(b))
        case .int(let i): return Constant(.int(i))
        case .double(let d): return Constant(.double(d))
        case .string(let s): return Constant(.string(s))
        case .key(let name): return KeyRead(name)
        case .value: return BoundValue()
        default: return Constant(.null)
        }
    }

    private func array(_ items: [Syntax]) -> any Evaluable {
        fold(ArrayLiteral(items.map(compile)))
    }

    private func object(_ members: [Node.Member]) -> any Evaluable {
        fold(ObjectLiteral(members.map { (name: $0.name, value: compile($0.value)) }))
    }

    private func member(_ base: Syntax, _ name: String) -> any Evaluable {
        fold(MemberAccess(compile(base), name))
    }

    private func index(_ base: Syntax, _ index: Syntax) -> any Evaluable {
        fold(IndexAccess(compile(base), compile(index)))
    }

    private func unary(_ op: UnaryOperator, _ operand: Syntax, pos: Int) -> any Evaluable {
        switch op {
        case .not: return fold(Not(compile(operand)))
        case .negate: return fold(Negate(compile(operand), pos: pos))
        }
    }

    private func conditional(_ c: Syntax, _ t: Syntax, _ e: Syntax) -> any Evaluable {
        let condition = compile(c)
        if let known = constant(condition) { return compile(known.isTruthy ? t : e) }
        return Conditional(condition, compile(t), compile(e))
    }

    private func binary(_ op: BinaryOperator, _ lhs: Syntax, _ rhs: Syntax, pos: Int) -> any Evaluable {
        let left = compile(lhs)
        let right = compile(rhs)
        switch op {
        case .and:
            guard let known = constant(left) else { return And(left, right) }
            return known.isTruthy ? right : left
        case .or:
            guard let known = constant(left) else { return Or(left, right) }
            return known.isTruthy ? left : right
        case .coalesce:
            guard let known = constant(left) else { return Coalesce(left, right) }
            if case .null = known { return right }
            return left
        default:
            return fold(Binary(op, left, right, pos: pos))
        }
    }

    private func call(_ builtin: Builtin, _ args: [any Evaluable], pos: Int) -> any Evaluable {
        let node: any Evaluable
        switch builtin.implementation {
        case .nullary(let body): node = Call0(body, name: builtin.name, pos: pos)
        case .unary(let body): node = Call1(body, args[0], name: builtin.name, pos: pos)
        case .binary(let body): node = Call2(body, args[0], args[1], name: builtin.name, pos: pos)
        case .variadic(let body): node = CallN(body, args, name: builtin.name, pos: pos)
        }
        guard case .pure = builtin.effect, args.allSatisfy({ constant($0) != nil }) else { return node }
        return fold(node)
    }

    private func constant(_ node: any Evaluable) -> JSONValue? {
        guard folds else { return nil }
        return (node as? Constant)?.value
    }

    /// Only called on nodes that read nothing but their children, so once the children are
    /// constants the empty context below is never consulted.
    private func fold(_ node: any Evaluable) -> any Evaluable {
        guard children(of: node).allSatisfy({ constant($0) != nil }) else { return node }
        do throws(ObsError) {
            return Constant(try node.evaluate(Environment(context: NoKeys(), value: nil)))
        } catch {
            return node
        }
    }

    private func children(of node: any Evaluable) -> [any Evaluable] {
        switch node {
        case let n as ArrayLiteral: return n.items
        case let n as ObjectLiteral: return n.members.map(\.value)
        case let n as MemberAccess: return [n.base]
        case let n as IndexAccess: return [n.base, n.index]
        case let n as Not: return [n.operand]
        case let n as Negate: return [n.operand]
        case let n as Binary: return [n.lhs, n.rhs]
        case let n as Call1: return [n.arg]
        case let n as Call2: return [n.first, n.second]
        case let n as CallN: return n.args
        default: return []
        }
    }
}

/// The context constant folding evaluates in: nothing exists.
private struct NoKeys: ExpressionContext {
    func value(ofKey name: String) throws(ObsError) -> JSONValue? { nil }
    func peek(key name: String) throws(ObsError) -> JSONValue? { nil }
    func exists(key name: String) -> Bool { false }
    func match(pattern: String) throws(ObsError) -> [(key: String, value: JSONValue)] { [] }
    var now: Double { 0 }
}
