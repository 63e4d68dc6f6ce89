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
}
