import ObsCore

/// How a command-line VALUE becomes JSON (docs/cli.md): JSON if it parses, else a string.
public enum ValueMode: Sendable {
    /// JSON when the text parses as JSON, otherwise the text as a string.
    case auto
    /// Always the text as a string (`--string`).
    case string
    /// The text must be valid JSON (`--json`).
    case json
}

public enum ValueArgument {
    /// The JSON value `text` stands for, or nil when `mode` is `.json` and it does not parse.
    public static func parse(_ text: String, mode: ValueMode = .auto) -> JSONValue? {
        switch mode {
        case .string: return .string(text)
        case .json: return try? JSONValue.parse(text)
        case .auto: return (try? JSONValue.parse(text)) ?? .string(text)
        }
    }

    /// A value as `get` and `watch --values` print it: strings raw, everything else compact JSON.
    public static func render(_ value: JSONValue) -> String {
        if case .string(let text) = value { return text }
        return value.encoded
    }

    /// A value on a line of its own (get, eval, watch --values and --format): as `render`, except
    /// that a string holding a line break prints as JSON (quoted, the break escaped), so that one
    /// value is always one line.
    public static func renderLine(_ value: JSONValue) -> String {
        if case .string(let text) = value, text.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) { return value.encoded }
        return render(value)
    }

    /// Whether `text`, which did not parse as JSON, looks as if it was meant to (`{a:1}`, `[1,`):
    /// `set` then warns that it stored a string.
    public static func looksLikeJSON(_ text: String) -> Bool {
        guard let first = text.first(where: { !$0.isWhitespace }) else { return false }
        return first == "{" || first == "[" || first == "\""
    }
}
