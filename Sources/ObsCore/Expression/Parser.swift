/// Recursive descent over the tokens, with precedence climbing for the binary operators.
///
/// Every recursion goes through `descend`, which enforces `ExpressionLimits.maxDepth`, so
/// 100,000 `(` is a parse_error rather than a stack overflow.
struct Parser {
    private var lexer: Lexer
    private var token: Token
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

    private func isSymbol(_ symbol: Token.Symbol) -> Bool { token.kind == .symbol(symbol) }

    private mutating func expect(_ symbol: Token.Symbol) throws(ObsError) {
        guard isSymbol(symbol) else { throw parseError("expected '\(symbol.rawValue)'", at: token.pos) }
        try advance()
    }

    private mutating func descend<T>(_ body: (inout Parser) throws(ObsError) -> T) throws(ObsError) -> T {
        depth += 1
        defer { depth -= 1 }
        guard depth <= ExpressionLimits.maxDepth else { throw tooDeep(at: token.pos) }
        return try body(&self)
    }

    private func tooDeep(at pos: Int) -> ObsError {
        parseError("expression nested deeper than \(ExpressionLimits.maxDepth) levels", at: pos)
    }

    /// Builds a node, rejecting it when the tree gets taller than the nesting limit.
    private func make(_ node: Node, at pos: Int) throws(ObsError) -> Syntax {
        let syntax = Syntax(node, pos: pos)
        guard syntax.height <= ExpressionLimits.maxDepth else { throw tooDeep(at: pos) }
        return syntax
    }

    /// conditional = binary(1) [ "?" conditional ":" conditional ]
    private mutating func expression() throws(ObsError) -> Syntax {
        try descend { (p: inout Parser) throws(ObsError) -> Syntax in
            let condition = try p.binary(minPrecedence: 1)
            guard p.isSymbol(.question) else { return condition }
            let pos = p.token.pos
            try p.advance()
            let then = try p.expression()
            try p.expect(.colon)
            let otherwise = try p.expression()
            return try p.make(.conditional(condition, then, otherwise), at: pos)
        }
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
        let pos = token.pos
        if isSymbol(.bang) {
            try advance()
            let operand = try descend { (p: inout Parser) throws(ObsError) in try p.unary() }
            return try make(.unary(.not, operand), at: pos)
        }
        if isSymbol(.minus) {
            try advance()
            if case .number(let text, let isInteger) = token.kind {
                let literal = try number("-" + text, isInteger: isInteger, at: pos)
                try advance()
                return try postfix(literal)
            }
            let operand = try descend { (p: inout Parser) throws(ObsError) in try p.unary() }
            return try make(.unary(.negate, operand), at: pos)
        }
        return try postfix(try primary())
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
        let pos = token.pos
        switch token.kind {
        case .number(let text, let isInteger):
            let literal = try number(text, isInteger: isInteger, at: pos)
            try advance()
            return literal
        case .string(let s):
            try advance()
            return Syntax(.string(s), pos: pos)
        case .key(let name):
            try advance()
            return Syntax(.key(name), pos: pos)
        case .identifier(let name):
            try advance()
            return try identifier(name, at: pos)
        case .symbol(.leftParen):
            try advance()
            let inner = try expression()
            try expect(.rightParen)
            return inner
        case .symbol(.leftBracket):
            try advance()
            let items = try list(until: .rightBracket) { (p: inout Parser) throws(ObsError) in try p.expression() }
            return try make(.array(items), at: pos)
        case .symbol(.leftBrace):
            try advance()
            let members = try list(until: .rightBrace) { (p: inout Parser) throws(ObsError) in try p.member() }
            var seen = Set<String>()
            for member in members where !seen.insert(member.name).inserted {
                throw parseError("duplicate member \(Printer.quote(member.name))", at: pos)
            }
            return try make(.object(members), at: pos)
        case .symbol, .end:
            throw parseError("expected an expression", at: pos)
        }
    }

    /// Comma-separated items up to `close`; no trailing comma, as in JSON.
    private mutating func list<T>(
        until close: Token.Symbol, _ item: (inout Parser) throws(ObsError) -> T
    ) throws(ObsError) -> [T] {
        var items: [T] = []
        if isSymbol(close) {
            try advance()
            return items
        }
        while true {
            items.append(try item(&self))
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

    private mutating func member() throws(ObsError) -> Node.Member {
        let name: String
        switch token.kind {
        case .identifier(let s), .string(let s): name = s
        default: throw parseError("expected a member name", at: token.pos)
        }
        try advance()
        try expect(.colon)
        return Node.Member(name: name, value: try expression())
    }

    private mutating func identifier(_ name: String, at pos: Int) throws(ObsError) -> Syntax {
        if isSymbol(.leftParen) {
            guard let builtin = Builtin.named(name) else {
                throw parseError("unknown function '\(name)'", at: pos)
            }
            try advance()
            let args = try list(until: .rightParen) { (p: inout Parser) throws(ObsError) in try p.expression() }
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
