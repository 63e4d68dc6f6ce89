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

    private func leaf(_ node: SyntaxNode) -> any Evaluable {
        switch node {
        case .bool(let b): return EvalConstant(.bool(b))
        case .int(let i): return EvalConstant(.int(i))
        case .double(let d): return EvalConstant(.double(d))
        case .string(let s): return EvalConstant(.string(s))
        case .key(let name): return EvalKeyRead(name)
        case .value: return EvalBoundValue()
        default: return EvalConstant(.null)
        }
    }

    private func array(_ items: [Syntax]) -> any Evaluable {
        fold(EvalArray(items.map(compile)))
    }

    private func object(_ members: [SyntaxNode.Member]) -> any Evaluable {
        fold(EvalObject(members.map { (name: $0.name, value: compile($0.value)) }))
    }

    private func member(_ base: Syntax, _ name: String) -> any Evaluable {
        fold(EvalMember(compile(base), name))
    }

    private func index(_ base: Syntax, _ index: Syntax) -> any Evaluable {
        fold(EvalIndex(compile(base), compile(index)))
    }

    private func unary(_ op: UnaryOperator, _ operand: Syntax, pos: Int) -> any Evaluable {
        switch op {
        case .not: return fold(EvalNot(compile(operand)))
        case .negate: return fold(EvalNegate(compile(operand), pos: pos))
        }
    }

    private func conditional(_ c: Syntax, _ t: Syntax, _ e: Syntax) -> any Evaluable {
        let condition = compile(c)
        if let known = constant(condition) { return compile(known.isTruthy ? t : e) }
        return EvalConditional(condition, compile(t), compile(e))
    }

    private func binary(_ op: BinaryOperator, _ lhs: Syntax, _ rhs: Syntax, pos: Int) -> any Evaluable {
        let left = compile(lhs)
        let right = compile(rhs)
        switch op {
        case .and:
            guard let known = constant(left) else { return EvalAnd(left, right) }
            return known.isTruthy ? right : left
        case .or:
            guard let known = constant(left) else { return EvalOr(left, right) }
            return known.isTruthy ? left : right
        case .coalesce:
            guard let known = constant(left) else { return EvalCoalesce(left, right) }
            if case .null = known { return right }
            return left
        default:
            return fold(EvalBinary(op, left, right, pos: pos))
        }
    }

    private func call(_ builtin: Builtin, _ args: [any Evaluable], pos: Int) -> any Evaluable {
        let node: any Evaluable
        switch builtin.implementation {
        case .nullary(let body): node = EvalCall0(body, name: builtin.name, pos: pos)
        case .unary(let body): node = EvalCall1(body, args[0], name: builtin.name, pos: pos)
        case .binary(let body): node = EvalCall2(body, args[0], args[1], name: builtin.name, pos: pos)
        case .variadic(let body): node = EvalCallN(body, args, name: builtin.name, pos: pos)
        }
        guard case .pure = builtin.effect, args.allSatisfy({ constant($0) != nil }) else { return node }
        return fold(node)
    }

    private func constant(_ node: any Evaluable) -> JSONValue? {
        guard folds else { return nil }
        return (node as? EvalConstant)?.value
    }

    /// Only called on nodes that read nothing but their children, so once the children are
    /// constants the empty context below is never consulted.
    private func fold(_ node: any Evaluable) -> any Evaluable {
        guard children(of: node).allSatisfy({ constant($0) != nil }) else { return node }
        do throws(ObsError) {
            return EvalConstant(try node.evaluate(EvalEnvironment(context: NoKeys(), value: nil)))
        } catch {
            return node
        }
    }

    private func children(of node: any Evaluable) -> [any Evaluable] {
        switch node {
        case let n as EvalArray: return n.items
        case let n as EvalObject: return n.members.map(\.value)
        case let n as EvalMember: return [n.base]
        case let n as EvalIndex: return [n.base, n.index]
        case let n as EvalNot: return [n.operand]
        case let n as EvalNegate: return [n.operand]
        case let n as EvalBinary: return [n.lhs, n.rhs]
        case let n as EvalCall1: return [n.arg]
        case let n as EvalCall2: return [n.first, n.second]
        case let n as EvalCallN: return n.args
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
