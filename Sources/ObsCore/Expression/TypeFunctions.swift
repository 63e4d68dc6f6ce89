extension Builtin {
    static let types: [Builtin] = [
        unary("string") { v, _ throws(ObsError) in .string(Conversions.string(v)) },
        unary("number") { v, call throws(ObsError) in try Conversions.number(v, call) },
        unary("int") { v, call throws(ObsError) in
            switch try Conversions.number(v, call) {
            case .double(let d): return try call.integral(d.rounded(.towardZero))
            case let n: return n
            }
        },
        unary("bool") { v, _ throws(ObsError) in .bool(v.isTruthy) },
        unary("type") { v, _ throws(ObsError) in .string(v.typeName) },
        unary("json") { v, _ throws(ObsError) in .string(v.encoded) },
        unary("parse") { v, call throws(ObsError) in
            let text = try call.string(v)
            do throws(JSONParseError) {
                return try JSONValue.parse(text)
            } catch {
                throw call.error("invalid JSON (\(error.message) at byte \(error.offset))")
            }
        },
    ]
}

/// Conversions shared by functions and operators.
enum Conversions {
    /// `string(x)`: strings unchanged, everything else as compact JSON.
    static func string(_ v: JSONValue) -> String {
        if case .string(let s) = v { return s }
        return v.encoded
    }

    /// `number(x)`: numbers unchanged, booleans 0 or 1, strings read as a JSON number (surrounding
    /// whitespace allowed); anything else is an error.
    static func number(_ v: JSONValue, _ call: Call) throws(ObsError) -> JSONValue {
        switch v {
        case .int, .double: return v
        case .bool(let b): return .int(b ? 1 : 0)
        case .string(let s):
            let trimmed = s.trimmingWhitespace()
            if let i = Int64(trimmed) { return .int(i) }
            if isNumberSyntax(trimmed), let d = Double(trimmed), d.isFinite { return .double(d) }
            throw call.error("cannot convert \(Printer.quote(s)) to a number")
        default:
            throw call.error("cannot convert \(v.typeName) to a number")
        }
    }

    /// JSON's number grammar, with an optional leading sign; Double(_:) alone would accept
    /// "nan", "inf" and hex.
    private static func isNumberSyntax(_ s: String) -> Bool {
        var scalars = Substring(s).unicodeScalars[...]
        if let f = scalars.first, f == "-" || f == "+" { scalars = scalars.dropFirst() }
        var sawDigit = false, sawDot = false, sawExponent = false, previous: Unicode.Scalar = " "
        for c in scalars {
            switch c {
            case "0"..."9": sawDigit = true
            case "." where !sawDot && !sawExponent && sawDigit: sawDot = true
            case "e", "E": guard sawDigit, !sawExponent else { return false }; sawExponent = true; sawDigit = false
            case "+", "-": guard previous == "e" || previous == "E" else { return false }
            default: return false
            }
            previous = c
        }
        return sawDigit
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[first...last])
    }
}
