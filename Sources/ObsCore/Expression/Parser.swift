/// Recursive descent over the tokens, with precedence climbing for the binary operators.
///
/// Every recursion goes through `descend`, which enforces `ExpressionLimits.maxDepth`, so
/// 100,000 `(` is a parse_error rather than a stack overflow.
struct Parser {
    private var lexer: Lexer
    private var token: ExpressionToken
    private let allowValue: Bool
    private var depth = 0

    static func parse(_ source: String, allowValue: Bool) throws(ObsError) -> Syntax {
        var parser = try Parser(source, allowValue: allowValue)
        let tree = try parser.expression()
        guard parser.token.kind == .end else {
            throw parseError("expected an operator or the end of the expression", at: parser.token.pos)
        }
        return tree
    }

    private init(_ source: String, allowValue: Bool) throws(ObsError) {
        lexer = Lexer(source)
        token = try lexer.next()
        self.allowValue = allowValue
    }

    private mutating func advance() throws(ObsError) {
        token = try lexer.next()
    }

    private func isSymbol(_ symbol: ExpressionToken.Symbol) -> Bool { token.kind == .symbol(symbol) }

    private mutating func expect(_ symbol: ExpressionToken.Symbol) throws(ObsError) {
        guard isSymbol(symbol) else { throw parseError("expected '\(symbol.rawValue)'", at: token.pos) }
        try advance()
    }

    /// Counts one level of nesting for the caller's recursion; pair with `ascend()`.
    private mutating func descend() throws(ObsError) {
        depth += 1
        guard depth <= ExpressionLimits.maxDepth else { throw tooDeep(at: token.pos) }
    }

    private mutating func ascend() { depth -= 1 }

    private func tooDeep(at pos: Int) -> ObsError {
        parseError("expression nested deeper than \(ExpressionLimits.maxDepth) levels", at: pos)
    }

    /// Builds a node, rejecting it when the tree gets taller than the nesting limit.
    private func make(_ node: SyntaxNode, at pos: Int) throws(ObsError) -> Syntax {
        let syntax = Syntax(node, pos: pos)
        guard syntax.height <= ExpressionLimits.maxDepth else { throw tooDeep(at: pos) }
        return syntax
    }

    // The functions on the recursive path (expression, unary, primary and the bracketed forms)
    // keep their frames small by handing each case to its own function: debug builds give every
    // temporary of a function its own stack slot, and the nesting limit must fit in a thread's
    // stack even there.

    /// expression = binary(1) [ "?" expression ":" expression ]
    private mutating func expression() throws(ObsError) -> Syntax {
        try descend()
        defer { ascend() }
        let condition = try binary(minPrecedence: 1)
        guard isSymbol(.question) else { return condition }
        return try conditional(condition)
    }

    private mutating func conditional(_ condition: Syntax) throws(ObsError) -> Syntax {
        let pos = token.pos
        try advance()
        let then = try expression()
        try expect(.colon)
        let otherwise = try expression()
        return try make(.conditional(condition, then, otherwise), at: pos)
    }

    private mutating func binary(minPrecedence: Int) throws(ObsError) -> Syntax {
        var lhs = try unary()
        while case .symbol(let symbol) = token.kind, let op = BinaryOperator(symbol),
              op.precedence >= minPrecedence {
            let pos = token.pos
            try advance()
            let rhs = try binary(minPrecedence: op.precedence + 1)
            lhs = try make(.binary(op, lhs, rhs), at: pos)
        }
        return lhs
    }

    private mutating func unary() throws(ObsError) -> Syntax {
        if isSymbol(.bang) { return try prefixed(.not) }
        if isSymbol(.minus) { return try prefixed(.negate) }
        return try postfix(try primary())
    }

    private mutating func prefixed(_ op: UnaryOperator) throws(ObsError) -> Syntax {
        let pos = token.pos
        try advance()
        if op == .negate, case .number(let text, let isInteger) = token.kind {
            let literal = try number("-" + text, isInteger: isInteger, at: pos)
            try advance()
            return try postfix(literal)
        }
        try descend()
        defer { ascend() }
        return try make(.unary(op, try unary()), at: pos)
    }

    private mutating func postfix(_ base: Syntax) throws(ObsError) -> Syntax {
        var result = base
        while true {
            let pos = token.pos
            if isSymbol(.dot) {
                try advance()
                guard case .identifier(let name) = token.kind else {
                    throw parseError("expected a member name after '.'", at: token.pos)
                }
                try advance()
                result = try make(.member(result, name), at: pos)
            } else if isSymbol(.leftBracket) {
                try advance()
                let index = try expression()
                try expect(.rightBracket)
                result = try make(.index(result, index), at: pos)
            } else {
                return result
            }
        }
    }

    private mutating func primary() throws(ObsError) -> Syntax {
        switch token.kind {
        case .symbol(.leftParen): return try parenthesized()
        case .symbol(.leftBracket): return try arrayLiteral()
        case .symbol(.leftBrace): return try objectLiteral()
        case .identifier(let name): return try identifier(name)
        default: return try atom()
        }
    }

    private mutating func atom() throws(ObsError) -> Syntax {
        let pos = token.pos
        let syntax: Syntax
        switch token.kind {
        case .number(let text, let isInteger): syntax = try number(text, isInteger: isInteger, at: pos)
        case .string(let s): syntax = Syntax(.string(s), pos: pos)
        case .key(let name): syntax = Syntax(.key(name), pos: pos)
        default: throw parseError("expected an expression", at: pos)
        }
        try advance()
        return syntax
    }

    private mutating func parenthesized() throws(ObsError) -> Syntax {
        try advance()
        let inner = try expression()
        try expect(.rightParen)
        return inner
    }

    private mutating func arrayLiteral() throws(ObsError) -> Syntax {
        let pos = token.pos
        try advance()
        return try make(.array(try arguments(until: .rightBracket)), at: pos)
    }

    private mutating func objectLiteral() throws(ObsError) -> Syntax {
        let pos = token.pos
        try advance()
        var members: [SyntaxNode.Member] = []
        var names = Set<String>()
        if isSymbol(.rightBrace) {
            try advance()
            return try make(.object(members), at: pos)
        }
        while true {
            let memberPos = token.pos
            let member = try member()
            guard names.insert(member.name).inserted else {
                throw parseError("duplicate member \(Printer.quote(member.name))", at: memberPos)
            }
            members.append(member)
            if isSymbol(.rightBrace) {
                try advance()
                return try make(.object(members), at: pos)
            }
            guard isSymbol(.comma) else { throw parseError("expected ',' or '}'", at: token.pos) }
            try advance()
        }
    }

    /// Comma-separated expressions up to `close`; no trailing comma, as in JSON.
    private mutating func arguments(until close: ExpressionToken.Symbol) throws(ObsError) -> [Syntax] {
        var items: [Syntax] = []
        if isSymbol(close) {
            try advance()
            return items
        }
        while true {
            items.append(try expression())
            if isSymbol(close) {
                try advance()
                return items
            }
            guard isSymbol(.comma) else {
                throw parseError("expected ',' or '\(close.rawValue)'", at: token.pos)
            }
            try advance()
        }
    }

    private mutating func member() throws(ObsError) -> SyntaxNode.Member {
        let name: String
        switch token.kind {
        case .identifier(let s), .string(let s): name = s
        default: throw parseError("expected a member name", at: token.pos)
        }
        try advance()
        try expect(.colon)
        return SyntaxNode.Member(name: name, value: try expression())
    }

    private mutating func identifier(_ name: String) throws(ObsError) -> Syntax {
        let pos = token.pos
        try advance()
        if isSymbol(.leftParen) {
            guard let builtin = Builtin.named(name) else {
                throw parseError("unknown function '\(name)'", at: pos)
            }
            try advance()
            let args = try arguments(until: .rightParen)
            guard builtin.arity.contains(args.count) else {
                throw parseError("\(name)() takes \(builtin.arityDescription), got \(args.count)", at: pos)
            }
            return try make(.call(builtin, args), at: pos)
        }
        switch name {
        case "true": return Syntax(.bool(true), pos: pos)
        case "false": return Syntax(.bool(false), pos: pos)
        case "null": return Syntax(.null, pos: pos)
        case "value" where allowValue: return Syntax(.value, pos: pos)
        case "value": throw parseError("'value' is only allowed in binding maps", at: pos)
        default:
            if Builtin.named(name) != nil { throw parseError("expected '(' after function '\(name)'", at: token.pos) }
            throw parseError("unknown identifier '\(name)' (keys are read with $name)", at: pos)
        }
    }

    private func number(_ text: String, isInteger: Bool, at pos: Int) throws(ObsError) -> Syntax {
        if isInteger, let int = Int64(text) { return Syntax(.int(int), pos: pos) }
        // Integers beyond int64 become doubles, as when JSON is decoded.
        guard let double = Double(text), double.isFinite else {
            throw parseError("number out of range", at: pos)
        }
        return Syntax(.double(double), pos: pos)
    }
}
