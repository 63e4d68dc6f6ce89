import ObsClient
import ObsCore

/// A `parse_error` shown under the expression it is about, a caret at its `pos`:
/// ```
/// obsctl: parse_error: expected an expression at 4
///   $a +
///       ^
/// ```
enum ExpressionCaret {
    /// The caret lines for `failure`, if it is a parse error of one of the command line's expressions.
    static func lines(_ failure: ObsError, _ parsed: ParsedArguments) -> String? {
        switch parsed.commandName {
        case "define": return lines(failure, among: [(parsed.positionals[1], false)])
        case "eval", "wait": return lines(failure, among: [(parsed.positionals[0], false)])
        case "bind": return lines(failure, among: ["--map", "--unmap"].compactMap { parsed.value($0) }.map { ($0, true) })
        default: return nil
        }
    }

    /// The caret lines for `failure` under the one of `candidates` (expression, and whether it is a
    /// binding's map) it is about.
    static func lines(_ failure: ObsError, among candidates: [(text: String, allowValue: Bool)]) -> String? {
        guard failure.code == .parseError, let pos = failure.details["pos"]?.intValue else { return nil }
        // With both --map and --unmap, the one that fails to parse here at the same place.
        let chosen = candidates.count == 1 ? candidates.first : candidates.first { candidate in
            do throws(ObsError) {
                _ = try Expression.compile(candidate.text, allowValue: candidate.allowValue)
                return false
            } catch {
                return error.code == .parseError && error.details["pos"]?.intValue == pos
            }
        }
        return chosen.map { lines($0.text, pos: Int(pos)) }
    }

    /// The line of `expression` that holds scalar offset `pos`, and a caret under that offset.
    static func lines(_ expression: String, pos: Int) -> String {
        let scalars = Array(expression.unicodeScalars)
        let offset = min(max(pos, 0), scalars.count)
        var start = offset
        while start > 0, scalars[start - 1] != "\n" { start -= 1 }
        var end = offset
        while end < scalars.count, scalars[end] != "\n" { end += 1 }
        var line = String.UnicodeScalarView()
        line.append(contentsOf: scalars[start..<end])
        var before = String.UnicodeScalarView()
        before.append(contentsOf: scalars[start..<offset])
        // A tab stays a tab so that the caret lines up under it.
        let padding = before.map { $0 == "\t" ? "\t" : String(repeating: " ", count: columns($0)) }.joined()
        return "  " + String(line) + "\n  " + padding + "^"
    }

    /// The columns a terminal gives a scalar: none for a combining mark, two for wide East Asian
    /// characters and emoji, one for the rest.
    static func columns(_ scalar: Unicode.Scalar) -> Int {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if scalar.properties.isEmojiPresentation { return 2 }
        switch scalar.value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }
}
