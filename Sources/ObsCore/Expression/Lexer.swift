/// Splits an expression into tokens. Offsets count Unicode scalars from 0, the unit `pos` uses in
/// parse and eval errors.
struct Lexer {
    private let scalars: [Unicode.Scalar]
    private var index = 0

    init(_ source: String) {
        scalars = Array(source.unicodeScalars)
    }

    mutating func next() throws(ObsError) -> ExpressionToken {
        skipWhitespace()
        let start = index
        guard let c = peek() else { return ExpressionToken(kind: .end, pos: start) }
        if isDigit(c) { return try number() }
        if isIdentifierStart(c) { return identifier() }
        switch c {
        case "\"", "'": return ExpressionToken(kind: .string(try string(quote: c)), pos: start)
        case "$": return try key()
        default: return try symbol()
        }
    }

    private func peek(_ offset: Int = 0) -> Unicode.Scalar? {
        index + offset < scalars.count ? scalars[index + offset] : nil
    }

    private mutating func skipWhitespace() {
        while let c = peek(), c == " " || c == "\t" || c == "\n" || c == "\r" { index += 1 }
    }

    private mutating func number() throws(ObsError) -> ExpressionToken {
        let start = index
        if peek() == "0", let d = peek(1), isDigit(d) {
            throw parseError("leading zeros are not allowed in a number", at: start)
        }
        while let c = peek(), isDigit(c) { index += 1 }
        var isInteger = true
        // A dot starts a fraction only before a digit: `1.x` is member x of 1.
        if peek() == ".", let d = peek(1), isDigit(d) {
            isInteger = false
            index += 1
            while let c = peek(), isDigit(c) { index += 1 }
        }
        if peek() == "e" || peek() == "E" {
            isInteger = false
            index += 1
            if peek() == "+" || peek() == "-" { index += 1 }
            guard let d = peek(), isDigit(d) else { throw parseError("expected exponent digits", at: index) }
            while let c = peek(), isDigit(c) { index += 1 }
        }
        return ExpressionToken(kind: .number(text: text(start, index), isInteger: isInteger), pos: start)
    }

    private mutating func identifier() -> ExpressionToken {
        let start = index
        while let c = peek(), isIdentifierPart(c) { index += 1 }
        return ExpressionToken(kind: .identifier(text(start, index)), pos: start)
    }

    private mutating func key() throws(ObsError) -> ExpressionToken {
        let start = index
        index += 1
        if peek() == "{" {
            index += 1
            let nameStart = index
            while let c = peek(), c != "}" { index += 1 }
            guard peek() == "}" else { throw parseError("expected '}'", at: index) }
            let name = text(nameStart, index)
            index += 1
            guard KeyName.isValid(name) else {
                throw parseError("invalid key name \(Printer.quote(name))", at: nameStart)
            }
            return ExpressionToken(kind: .key(name), pos: start)
        }
        let nameStart = index
        // Segments of letters, digits and `_` joined by dots; a dot not followed by a segment
        // character ends the name, so `$a.` is `$a` then `.`.
        while let c = peek() {
            if isIdentifierPart(c) {
                index += 1
            } else if c == ".", index > nameStart, let d = peek(1), isIdentifierPart(d) {
                index += 1
            } else {
                break
            }
        }
        guard index > nameStart else { throw parseError("expected key name after '$'", at: index) }
        let name = text(nameStart, index)
        guard KeyName.isValid(name) else {
            throw parseError("invalid key name \(Printer.quote(name))", at: nameStart)
        }
        return ExpressionToken(kind: .key(name), pos: start)
    }

    private mutating func string(quote: Unicode.Scalar) throws(ObsError) -> String {
        let start = index
        index += 1
        var result = String.UnicodeScalarView()
        while true {
            guard let c = peek() else { throw parseError("unterminated string", at: start) }
            index += 1
            if c == quote { return String(result) }
            if c.value < 0x20 {
                throw parseError("control character in string; write it as an escape", at: index - 1)
            }
            if c != "\\" {
                result.append(c)
                continue
            }
            guard let e = peek() else { throw parseError("unterminated string", at: start) }
            index += 1
            switch e {
            case "\"", "\\", "/", "'": result.append(e)
            case "b": result.append("\u{08}")
            case "f": result.append("\u{0C}")
            case "n": result.append("\n")
            case "r": result.append("\r")
            case "t": result.append("\t")
            case "u": result.append(try unicodeEscape(at: index - 2))
            default: throw parseError("invalid escape '\\\(e)'", at: index - 2)
            }
        }
    }

    /// Reads the hex digits after `\u`, joining a UTF-16 surrogate pair written as two escapes.
    private mutating func unicodeEscape(at escapeStart: Int) throws(ObsError) -> Unicode.Scalar {
        let high = try hex4(escapeStart)
        if (0xD800..<0xDC00).contains(high) {
            guard peek() == "\\", peek(1) == "u" else {
                throw parseError("unpaired surrogate in \\u escape", at: escapeStart)
            }
            index += 2
            let low = try hex4(escapeStart)
            guard (0xDC00..<0xE000).contains(low) else {
                throw parseError("unpaired surrogate in \\u escape", at: escapeStart)
            }
            return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))!
        }
        guard let scalar = Unicode.Scalar(high) else {
            throw parseError("unpaired surrogate in \\u escape", at: escapeStart)
        }
        return scalar
    }

    private mutating func hex4(_ escapeStart: Int) throws(ObsError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let c = peek(), let digit = hexValue(c) else {
                throw parseError("expected 4 hex digits after \\u", at: escapeStart)
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private mutating func symbol() throws(ObsError) -> ExpressionToken {
        let start = index
        let c = peek()!
        let two: ExpressionToken.Symbol?
        switch (c, peek(1)) {
        case ("?", "?"): two = .coalesce
        case ("|", "|"): two = .or
        case ("&", "&"): two = .and
        case ("=", "="): two = .equal
        case ("!", "="): two = .notEqual
        case ("<", "="): two = .lessEqual
        case (">", "="): two = .greaterEqual
        default: two = nil
        }
        if let two {
            index += 2
            return ExpressionToken(kind: .symbol(two), pos: start)
        }
        switch c {
        case "|": throw parseError("expected '||'", at: start)
        case "&": throw parseError("expected '&&'", at: start)
        case "=": throw parseError("expected '=='", at: start)
        default: break
        }
        guard let one = ExpressionToken.Symbol(rawValue: String(c)) else {
            throw parseError("unexpected character \(Printer.quote(String(c)))", at: start)
        }
        index += 1
        return ExpressionToken(kind: .symbol(one), pos: start)
    }

    private func text(_ from: Int, _ to: Int) -> String {
        var view = String.UnicodeScalarView()
        view.append(contentsOf: scalars[from..<to])
        return String(view)
    }
}

private func isDigit(_ c: Unicode.Scalar) -> Bool { c >= "0" && c <= "9" }

private func isIdentifierStart(_ c: Unicode.Scalar) -> Bool {
    (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c == "_"
}

func isIdentifierPart(_ c: Unicode.Scalar) -> Bool { isIdentifierStart(c) || isDigit(c) }

private func hexValue(_ c: Unicode.Scalar) -> UInt32? {
    switch c {
    case "0"..."9": return c.value - 0x30
    case "a"..."f": return c.value - 0x61 + 10
    case "A"..."F": return c.value - 0x41 + 10
    default: return nil
    }
}
