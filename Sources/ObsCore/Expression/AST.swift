/// A node of the syntax tree with the scalar offset it came from and its height (for the
/// nesting limit).
///
/// Two trees are equal when their nodes are: positions describe the source text, not the
/// meaning, so a tree printed with `description` and parsed back equals the original.
struct Syntax: Sendable, Equatable {
    let node: SyntaxNode
    let pos: Int
    let height: Int

    init(_ node: SyntaxNode, pos: Int) {
        self.node = node
        self.pos = pos
        height = 1 + node.children.reduce(0) { max($0, $1.height) }
    }

    static func == (lhs: Syntax, rhs: Syntax) -> Bool { lhs.node == rhs.node }
}

indirect enum SyntaxNode: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case key(String)
    /// The bound value of a binding map.
    case value
    case array([Syntax])
    case object([Member])
    case member(Syntax, String)
    case index(Syntax, Syntax)
    case unary(UnaryOperator, Syntax)
    case binary(BinaryOperator, Syntax, Syntax)
    case conditional(Syntax, Syntax, Syntax)
    case call(Builtin, [Syntax])

    struct Member: Sendable, Equatable {
        let name: String
        let value: Syntax
    }

    var children: [Syntax] {
        switch self {
        case .null, .bool, .int, .double, .string, .key, .value: return []
        case .array(let items): return items
        case .object(let members): return members.map(\.value)
        case .member(let base, _): return [base]
        case .index(let base, let index): return [base, index]
        case .unary(_, let operand): return [operand]
        case .binary(_, let lhs, let rhs): return [lhs, rhs]
        case .conditional(let c, let t, let e): return [c, t, e]
        case .call(_, let args): return args
        }
    }
}

enum UnaryOperator: String, Sendable {
    case not = "!"
    case negate = "-"
}

/// Binary operators with their precedence (higher binds tighter); all are left-associative.
enum BinaryOperator: String, Sendable, CaseIterable {
    case coalesce = "??"
    case or = "||"
    case and = "&&"
    case equal = "==", notEqual = "!="
    case less = "<", lessEqual = "<=", greater = ">", greaterEqual = ">="
    case add = "+", subtract = "-"
    case multiply = "*", divide = "/", remainder = "%"

    var precedence: Int {
        switch self {
        case .coalesce: return 1
        case .or: return 2
        case .and: return 3
        case .equal, .notEqual: return 4
        case .less, .lessEqual, .greater, .greaterEqual: return 5
        case .add, .subtract: return 6
        case .multiply, .divide, .remainder: return 7
        }
    }

    init?(_ symbol: ExpressionToken.Symbol) {
        self.init(rawValue: symbol.rawValue)
    }
}
