import Foundation

/// The template language of `format(fmt, args...)`: `{}` takes the next argument, `{2}` a given
/// one, `{:.2f}` / `{1:.2f}` a number with fixed decimals, `{{` and `}}` literal braces.
enum FormatTemplate {
    static func render(_ template: String, _ args: [JSONValue], _ call: BuiltinCall) throws(ObsError) -> String {
        let scalars = Array(template.unicodeScalars)
        var out = String.UnicodeScalarView()
        var next = 0
        var i = 0
        while i < scalars.count {
            let c = scalars[i]
            if c == "}" {
                guard i + 1 < scalars.count, scalars[i + 1] == "}" else {
                    throw call.error("unmatched '}' in format string at offset \(i); write '}}' for a brace")
                }
                out.append("}")
                i += 2
                continue
            }
            guard c == "{" else {
                out.append(c)
                i += 1
                continue
            }
            if i + 1 < scalars.count, scalars[i + 1] == "{" {
                out.append("{")
                i += 2
                continue
            }
            guard let close = scalars[(i + 1)...].firstIndex(of: "}") else {
                throw call.error("unclosed '{' in format string at offset \(i)")
            }
            let field = String(String.UnicodeScalarView(scalars[(i + 1)..<close]))
            let (index, precision) = try parseField(field, at: i, call)
            let position = index ?? next
            if index == nil { next += 1 }
            guard position < args.count else {
                throw call.error("placeholder {\(field)} refers to argument \(position), but only \(args.count) were given")
            }
            out.append(contentsOf: try substitute(args[position], precision: precision, call).unicodeScalars)
            i = close + 1
        }
        return String(out)
    }

    /// Splits `[index][:.Nf]`.
    private static func parseField(_ field: String, at offset: Int, _ call: BuiltinCall) throws(ObsError) -> (Int?, Int?) {
        let parts = field.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        var index: Int?
        if !parts[0].isEmpty {
            guard let i = Int(parts[0]), i >= 0 else {
                throw call.error("bad placeholder {\(field)} in format string at offset \(offset)")
            }
            index = i
        }
        guard parts.count == 2 else { return (index, nil) }
        let spec = parts[1]
        guard spec.hasPrefix("."), spec.hasSuffix("f"), spec.count >= 3,
              let precision = Int(spec.dropFirst().dropLast()), precision >= 0 else {
            throw call.error("bad placeholder {\(field)} in format string at offset \(offset); precision is written {:.2f}")
        }
        guard precision <= ExpressionLimits.maxPrecision else {
            throw call.error("precision \(precision) is over \(ExpressionLimits.maxPrecision)")
        }
        return (index, precision)
    }

    private static func substitute(_ value: JSONValue, precision: Int?, _ call: BuiltinCall) throws(ObsError) -> String {
        guard let precision else { return ValueConversions.string(value) }
        switch value {
        // Integers print exactly rather than through a double.
        case .int(let i): return precision == 0 ? String(i) : String(i) + "." + String(repeating: "0", count: precision)
        case .double(let d): return String(format: "%.*f", Int32(precision), d)
        default: throw call.error("{:.\(precision)f} needs a number, got \(value.typeName)")
        }
    }
}
