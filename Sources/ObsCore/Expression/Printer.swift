/// Prints a syntax tree in canonical form: double-quoted strings, one space around binary
/// operators, and parentheses only where precedence or associativity needs them.
enum Printer {
    static func print(_ syntax: Syntax) -> String {
        var out = ""
        write(syntax, into: &out)
        return out
    }

    // One small function per kind of node keeps each recursive frame small (see Parser).
    private static func write(_ syntax: Syntax, into out: inout String) {
        switch syntax.node {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        // Swift's description is the shortest text that reads back as the same double, and
        // always has a `.` or an exponent, so it stays a double when parsed again.
        case .double(let d): out += d.description
        case .string(let s): out += quote(s)
        case .key(let name): out += isBareKey(name) ? "$" + name : "${" + name + "}"
        case .value: out += "value"
        case .array(let items): writeList("[", items, "]", into: &out)
        case .object(let members): writeObject(members, into: &out)
        case .member(let base, let name): writeMember(base, name, into: &out)
        case .index(let base, let index): writeIndex(base, index, into: &out)
        case .unary(let op, let operand): writeUnary(op, operand, into: &out)
        case .binary(let op, let lhs, let rhs): writeBinary(op, lhs, rhs, into: &out)
        case .conditional(let c, let t, let e): writeConditional(c, t, e, into: &out)
        case .call(let builtin, let args): writeList(builtin.name + "(", args, ")", into: &out)
        }
    }

    private static func writeList(_ open: String, _ items: [Syntax], _ close: String, into out: inout String) {
        out += open
        for (i, item) in items.enumerated() {
            if i > 0 { out += ", " }
            write(item, into: &out)
        }
        out += close
    }

    private static func writeObject(_ members: [SyntaxNode.Member], into out: inout String) {
        out += "{"
        for (i, member) in members.enumerated() {
            if i > 0 { out += ", " }
            out += isIdentifier(member.name) ? member.name : quote(member.name)
            out += ": "
            write(member.value, into: &out)
        }
        out += "}"
    }

    private static func writeMember(_ base: Syntax, _ name: String, into out: inout String) {
        // `$a.b` would read key "a.b", so a key followed by a member is always braced.
        if case .key(let key) = base.node { out += "${" + key + "}" } else { writeOperand(base, atLeast: postfixLevel, into: &out) }
        if isIdentifier(name) {
            out += "." + name
        } else {
            out += "[" + quote(name) + "]"
        }
    }

    private static func writeIndex(_ base: Syntax, _ index: Syntax, into out: inout String) {
        writeOperand(base, atLeast: postfixLevel, into: &out)
        out += "["
        write(index, into: &out)
        out += "]"
    }

    private static func writeUnary(_ op: UnaryOperator, _ operand: Syntax, into out: inout String) {
        out += op.rawValue
        guard op == .negate, level(operand) >= unaryLevel else {
            writeOperand(operand, atLeast: unaryLevel, into: &out)
            return
        }
        switch leadingCharacter(operand) {
        // `-1` would read back as a negative literal, not a negation of 1.
        case .digit:
            out += "("
            write(operand, into: &out)
            out += ")"
        // `- -x`: the space keeps the tree as it is without adding a level of parentheses.
        case .minus:
            out += " "
            write(operand, into: &out)
        case .other:
            write(operand, into: &out)
        }
    }

    private static func writeBinary(_ op: BinaryOperator, _ lhs: Syntax, _ rhs: Syntax, into out: inout String) {
        writeOperand(lhs, atLeast: op.precedence, into: &out)
        out += " " + op.rawValue + " "
        writeOperand(rhs, atLeast: op.precedence + 1, into: &out)
    }

    private static func writeConditional(_ c: Syntax, _ t: Syntax, _ e: Syntax, into out: inout String) {
        writeOperand(c, atLeast: 1, into: &out)
        out += " ? "
        write(t, into: &out)
        out += " : "
        write(e, into: &out)
    }

    private static func writeOperand(_ syntax: Syntax, atLeast needed: Int, into out: inout String) {
        guard level(syntax) < needed else { return write(syntax, into: &out) }
        out += "("
        write(syntax, into: &out)
        out += ")"
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

    private enum Leading { case digit, minus, other }

    /// The first character a unary or tighter node prints as, found without printing it.
    private static func leadingCharacter(_ syntax: Syntax) -> Leading {
        var current = syntax
        while true {
            switch current.node {
            case .int(let i): return i < 0 ? .minus : .digit
            case .double(let d): return d.sign == .minus ? .minus : .digit
            case .unary(.negate, _): return .minus
            case .member(let base, _) where level(base) >= postfixLevel,
                 .index(let base, _) where level(base) >= postfixLevel:
                current = base
            default: return .other
            }
        }
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
