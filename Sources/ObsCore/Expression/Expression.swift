/// An expression of the language of docs/expressions.md, compiled once when defined and evaluated
/// many times.
public struct Expression: Sendable, CustomStringConvertible {
    /// The text the expression was compiled from.
    public let source: String
    /// Whether it reads the clock (`now()`, `ago()`), so the store re-evaluates it at least every second.
    public let usesTime: Bool
    /// The keys named by `$name` and `${name}` anywhere in it, read or not by a given evaluation (for static checks such as cycles).
    public let referencedKeys: Set<String>
    let tree: Syntax
    let root: any Evaluable

    /// Parses and compiles `source`; `allowValue` admits the bare identifier `value` (binding maps). Throws parse_error with details `pos`.
    public static func compile(_ source: String, allowValue: Bool = false) throws(ObsError) -> Expression {
        let syntax = try Parser.parse(source, allowValue: allowValue)
        return Expression(source: source, syntax: syntax)
    }

    init(source: String, syntax: Syntax, folding: Bool = true) {
        self.source = source
        tree = syntax
        usesTime = Expression.readsClock(syntax)
        referencedKeys = Expression.keys(in: syntax)
        root = Compiler(folds: folding).compile(syntax)
    }

    /// Evaluates against `context`, with `value` as the bound value of a binding map. Throws eval_error (or cycle, from the context).
    public func evaluate(in context: some ExpressionContext, value: JSONValue? = nil) throws(ObsError) -> JSONValue {
        try root.evaluate(EvalEnvironment(context: context, value: value))
    }

    /// The canonical form: minimal parentheses, double-quoted strings; it parses back to the same tree.
    public var description: String { Printer.print(tree) }

    private static func readsClock(_ syntax: Syntax) -> Bool {
        if case .call(let builtin, _) = syntax.node, case .readsClock = builtin.effect { return true }
        return syntax.node.children.contains(where: readsClock)
    }

    private static func keys(in syntax: Syntax) -> Set<String> {
        if case .key(let name) = syntax.node { return [name] }
        return syntax.node.children.reduce(into: []) { $0.formUnion(keys(in: $1)) }
    }
}
