/// Prints a syntax tree in canonical form: double-quoted strings, one space around binary
/// operators, and parentheses only where precedence or associativity needs them.
enum Printer {
    static func print(_ syntax: Syntax) -> String {
        switch syntax.node {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        // Swift's description is the shortest text that reads back as the same double, and
        // always has a `.` or an exponent, so it stays a double when parsed again.
        case .double(let d): return d.description
        case .string(let s): return quote(s)
        case .key(let name): return isBareKey(name) ? "$" + name : "${" + name + "}"
        case .value: return "value"
        case .array(let items): return "[" + items.map(print).joined(separator: ", ") + "]"
        case .object(let members):
            let body = members.map { (isIdentifier($0.name) ? $0.name : quote($0.name)) + ": " + print($0.value) }
            return "{" + body.joined(separator: ", ") + "}"
        case .member(let base, let name):
            let prefix: String
            // `$a.b` would read key "a.b", so a key followed by a member is always braced.
            if case .key(let key) = base.node { prefix = "${" + key + "}" } else { prefix = operand(base, atLeast: postfixLevel) }
            return isIdentifier(name) ? prefix + "." + name : prefix + "[" + quote(name) + "]"
        case .index(let base, let index):
            return operand(base, atLeast: postfixLevel) + "[" + print(index) + "]"
        case .unary(let op, let operand):
            var text = self.operand(operand, atLeast: unaryLevel)
            // `-1` would read as a negative literal and `--x` is clearer as `-(-x)`.
            if op == .negate, let first = text.unicodeScalars.first, first == "-" || (first >= "0" && first <= "9") {
                text = "(" + text + ")"
            }
            return op.rawValue + text
        case .binary(let op, let lhs, let rhs):
            return operand(lhs, atLeast: op.precedence) + " " + op.rawValue + " " + operand(rhs, atLeast: op.precedence + 1)
        case .conditional(let c, let t, let e):
            return operand(c, atLeast: 1) + " ? " + print(t) + " : " + print(e)
        case .call(let builtin, let args):
            return builtin.name + "(" + args.map(print).joined(separator: ", ") + ")"
        }
    }

    private static let unaryLevel = 8
    private static let postfixLevel = 9

    /// How tightly a node binds: 0 conditional, 1-7 binary operators, 8 unary, 9 postfix, 10 atoms.
    private static func level(_ syntax: Syntax) -> Int {
        switch syntax.node {
        case .conditional: return 0
        case .binary(let op, _, _): return op.precedence
        case .unary: return unaryLevel
        case .member, .index: return postfixLevel
        default: return 10
        }
    }

    private static func operand(_ syntax: Syntax, atLeast needed: Int) -> String {
        level(syntax) < needed ? "(" + print(syntax) + ")" : print(syntax)
    }

    /// A string literal with JSON escapes, so it reads back as the same string.
    static func quote(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            default:
                if c.value < 0x20 {
                    let hex = String(c.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(c)
                }
            }
        }
        return out + "\""
    }

    static func isIdentifier(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, !(first >= "0" && first <= "9") else { return false }
        return s.unicodeScalars.allSatisfy(isIdentifierPart)
    }

    /// Whether `$name` reads back as `name`: dot-separated runs of letters, digits and `_`.
    private static func isBareKey(_ name: String) -> Bool {
        name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { segment in
            !segment.isEmpty && segment.unicodeScalars.allSatisfy(isIdentifierPart)
        }
    }
}
