extension Builtin {
    static let types: [Builtin] = [
        unary("string") { v, _ throws(ObsError) in .string(ValueConversions.string(v)) },
        unary("number") { v, call throws(ObsError) in try ValueConversions.number(v, call) },
        unary("int") { v, call throws(ObsError) in
            switch try ValueConversions.number(v, call) {
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
enum ValueConversions {
    /// `string(x)`: strings unchanged, everything else as compact JSON.
    static func string(_ v: JSONValue) -> String {
        if case .string(let s) = v { return s }
        return v.encoded
    }

    /// `number(x)`: numbers unchanged, booleans 0 or 1, strings holding one JSON number (with
    /// whitespace around it allowed); anything else is an error.
    static func number(_ v: JSONValue, _ call: BuiltinCall) throws(ObsError) -> JSONValue {
        switch v {
        case .int, .double: return v
        case .bool(let b): return .int(b ? 1 : 0)
        case .string(let s):
            switch try? JSONValue.parse(s) {
            case let n? where n.typeName == "number": return n
            default: throw call.error("cannot convert \(Printer.quote(s)) to a number")
            }
        default:
            throw call.error("cannot convert \(v.typeName) to a number")
        }
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
