import ObsCore

/// The write commands obsctl and definitions files share (set, define, bind, unbind, del): their
/// grammar and the protocol requests they become. One copy, so a file line means what the same
/// words mean on obsctl's command line.
public enum WriteCommands {
    public static let set = CommandSpec(
        "set", summary: "Set a value.",
        overview: """
            VALUE that parses as JSON is that JSON (42, true, null, "x", [1], {"a":1}); anything else is \
            a string. VALUE - reads stdin and sets each line in turn, as it arrives.
            """,
        arguments: [ArgumentSpec("KEY", "The key to set."), ArgumentSpec("VALUE", "The value, or - to read lines from stdin.")],
        options: [
            OptionSpec(["--string"], "Take VALUE as a string, even if it parses as JSON."),
            OptionSpec(["--json"], "Require VALUE to be valid JSON."),
            OptionSpec(["--if-rev"], value: "N", "Set only if the key's revision is N (0: only if missing)."),
            OptionSpec(["--ttl"], value: "DURATION", "Delete the key after DURATION."),
            OptionSpec(["--ephemeral"], "Keep the key only while this obsctl runs (until stdin closes or a signal)."),
            OptionSpec(["--hold"], "With --ephemeral: hold the key until a signal, not reading stdin."),
            OptionSpec(["--always"], "Notify watchers even if the value is unchanged."),
        ])
    public static let define = CommandSpec(
        "define", summary: "Define a computed key.",
        arguments: [ArgumentSpec("KEY", "The computed key."), ArgumentSpec("EXPR", "Its expression.")],
        options: [OptionSpec(["--replace"], "Replace a value key of that name.")])
    public static let bind = CommandSpec(
        "bind", summary: "Bind FROM into TO.",
        arguments: [ArgumentSpec("FROM", "The source key."), ArgumentSpec("TO", "The value key it writes.")],
        options: [
            OptionSpec(["--map"], value: "EXPR", "Transform the value on the way (the bound value is `value`)."),
            OptionSpec(["--two-way"], "Keep both keys in step."),
            OptionSpec(["--unmap"], value: "EXPR", "With --two-way: the transform from TO back to FROM."),
        ])
    public static let unbind = CommandSpec(
        "unbind", summary: "Remove TO's binding.", arguments: [ArgumentSpec("TO", "The bound key.")])
    public static let del = CommandSpec(
        "del", summary: "Delete keys.", arguments: [ArgumentSpec("KEY", repeating: true, "The keys to delete.")])

    public static let all = [set, define, bind, unbind, del]

    /// The VALUE mode `set` (and `publish`) options ask for.
    public static func valueMode(_ parsed: ParsedArguments) throws(UsageError) -> ValueMode {
        if parsed.has("--string"), parsed.has("--json") { throw UsageError("--string and --json exclude each other") }
        return parsed.has("--string") ? .string : parsed.has("--json") ? .json : .auto
    }

    /// The value of a VALUE argument under `mode`; invalid JSON under --json is a usage error.
    public static func value(_ text: String, mode: ValueMode) throws(UsageError) -> JSONValue {
        guard let value = ValueArgument.parse(text, mode: mode) else {
            throw UsageError("--json: '\(text)' is not valid JSON")
        }
        return value
    }

    /// The warning for a VALUE that was taken as a string although it looks like JSON (`{a:1}`),
    /// or nil: a typo in JSON should not pass unnoticed, but docs/cli.md makes such a VALUE a string.
    public static func stringWarning(_ text: String, mode: ValueMode) -> String? {
        guard mode == .auto, ValueArgument.looksLikeJSON(text) else { return nil }
        do {
            _ = try JSONValue.parse(text)
            return nil
        } catch {
            return "warning: '\(text)' is not valid JSON (\(error)), so it was taken as a string; "
                + "--string takes it as a string without this warning, --json refuses it"
        }
    }

    /// The request fields of `set KEY VALUE` with `parsed`'s options (VALUE given as `value`).
    public static func setFields(_ parsed: ParsedArguments, value: JSONValue) throws(UsageError) -> [String: JSONValue] {
        var fields: [String: JSONValue] = ["key": .string(parsed.positionals[0]), "value": value]
        if let rev = try parsed.count("--if-rev") { fields["if_rev"] = .int(Int64(rev)) }
        if let ttl = try parsed.duration("--ttl") { fields["ttl_ms"] = .int(Int64((ttl * 1000).rounded())) }
        if parsed.has("--ephemeral") { fields["ephemeral"] = .bool(true) }
        if parsed.has("--hold"), !parsed.has("--ephemeral") { throw UsageError("--hold needs --ephemeral: only an ephemeral key is held") }
        if parsed.has("--always") { fields["always"] = .bool(true) }
        return fields
    }

    /// The requests (op and fields) a write command line stands for. `set KEY -` is obsctl's alone
    /// and is refused here.
    public static func requests(_ name: String, _ parsed: ParsedArguments) throws(UsageError) -> [(op: String, fields: [String: JSONValue])] {
        let p = parsed.positionals
        switch name {
        case "set":
            guard p[1] != "-" else { throw UsageError("set KEY - reads stdin, which only obsctl itself can do") }
            return [("set", try setFields(parsed, value: value(p[1], mode: valueMode(parsed))))]
        case "define":
            var fields: [String: JSONValue] = ["key": .string(p[0]), "expr": .string(p[1])]
            if parsed.has("--replace") { fields["replace"] = .bool(true) }
            return [("define", fields)]
        case "bind":
            if parsed.value("--unmap") != nil, !parsed.has("--two-way") { throw UsageError("--unmap needs --two-way") }
            var fields: [String: JSONValue] = ["from": .string(p[0]), "to": .string(p[1])]
            if let map = parsed.value("--map") { fields["map"] = .string(map) }
            if parsed.has("--two-way") { fields["two_way"] = .bool(true) }
            if let unmap = parsed.value("--unmap") { fields["unmap"] = .string(unmap) }
            return [("bind", fields)]
        case "unbind":
            return [("unbind", ["to": .string(p[0])])]
        case "del":
            return p.map { ("delete", ["key": .string($0)]) }
        default:
            throw UsageError("'\(name)' is not allowed here (only set, define, bind, unbind, del)")
        }
    }
}
