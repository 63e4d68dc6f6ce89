/// One lexical token of an expression, with the scalar offset where it starts.
struct ExpressionToken {
    enum Kind: Equatable {
        /// A number's text as written, without sign: the parser folds a leading `-` into it so
        /// that `-9223372036854775808` is an integer.
        case number(text: String, isInteger: Bool)
        case string(String)
        case key(String)
        case identifier(String)
        case symbol(Symbol)
        case end
    }

    enum Symbol: String, Equatable {
        case leftParen = "(", rightParen = ")", leftBracket = "[", rightBracket = "]"
        case leftBrace = "{", rightBrace = "}", comma = ",", colon = ":", dot = "."
        case question = "?", coalesce = "??", or = "||", and = "&&"
        case equal = "==", notEqual = "!=", less = "<", lessEqual = "<=", greater = ">"
        case greaterEqual = ">=", plus = "+", minus = "-", star = "*", slash = "/"
        case percent = "%", bang = "!"
    }

    let kind: Kind
    let pos: Int
}
