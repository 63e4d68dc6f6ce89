import Foundation
import ObsClient
import ObsCore

/// How `watch` renders events: --values, --format, and the OBS_* variables of `-- COMMAND`.
public enum EventFormat {
    /// Control events tell how the stream is going, not what changed: --values, --format and
    /// `-- COMMAND` skip them (the default JSON output keeps them), but for `formattedKinds`.
    /// `reset` (`--reconnect` found the daemon holding another state) changes nothing itself: the
    /// snapshot and the deletes after it do, and those run COMMAND.
    static let controlKinds: Set<String> = ["synced", "progress", "overflow", "compacted", "reset"]
    /// The control events --format prints all the same (`{event}` is `reset`): a status bar can
    /// show that what it showed was replaced.
    static let formattedKinds: Set<String> = ["reset"]

    /// `--values`: the value a key now holds (snapshot items too), an empty line for a delete, a
    /// publish's payload; nil (no line) for the rest. Always one line (ValueArgument.renderLine).
    public static func valuesLine(_ event: WatchEvent) -> String? {
        switch event.kind {
        case "initial", "change": return event.value.map(ValueArgument.renderLine)
        case "delete": return ""
        case "publish": return ValueArgument.renderLine(event["payload"] ?? .null)
        default: return nil
        }
    }

    /// `--format FMT`: `{key}` `{new}` `{old}` `{rev}` `{event}` `{channel}` `{payload}` `{time}`
    /// `{run}` (the daemon's run the event came from: with `{rev}`, what `--since` and `--run` take),
    /// `{{` and `}}` for braces; values render as in --values, a field the event lacks as nothing.
    /// `{NAME:json}` is the field as JSON (strings quoted and escaped, a missing field `null`), for
    /// output that must stay valid JSON. `{new}` of a snapshot item is its value, so a status bar
    /// shows it from the start.
    public static func render(_ format: String, _ event: WatchEvent, now: Date = Date()) -> String {
        var result = ""
        var index = format.startIndex
        while index < format.endIndex {
            let c = format[index]
            let next = format.index(after: index)
            if (c == "{" || c == "}"), next < format.endIndex, format[next] == c {
                result.append(c)
                index = format.index(after: next)
                continue
            }
            if c == "{", let close = format[next...].firstIndex(of: "}"),
               let value = placeholder(String(format[next..<close]), event, now: now) {
                result += value
                index = format.index(after: close)
                continue
            }
            result.append(c)
            index = next
        }
        return result
    }

    /// The placeholders `--format` knows.
    static let placeholderNames = ["key", "new", "old", "rev", "event", "channel", "payload", "time", "run"]

    /// What in `format` reads as a placeholder (`{name}` or `{name:json}`, a name of lowercase
    /// letters and underscores) but is none: printed as it is, so most likely a typo (`{vaule}`).
    /// Other braces (`{"a":1}`, a lone `{`) are text, as `render` takes them.
    public static func unknownPlaceholders(_ format: String) -> [String] {
        var unknown: [String] = []
        var rest = Substring(format)
        while let open = rest.firstIndex(of: "{") {
            let after = rest.index(after: open)
            if after < rest.endIndex, rest[after] == "{" {
                rest = rest[rest.index(after: after)...]
                continue
            }
            guard let close = rest[after...].firstIndex(of: "}") else { break }
            let inside = rest[after..<close]
            let name = inside.hasSuffix(":json") ? inside.dropLast(5) : inside
            if !name.isEmpty, name.allSatisfy({ ("a"..."z").contains($0) || $0 == "_" }), !placeholderNames.contains(String(name)) {
                unknown.append("{\(inside)}")
            }
            rest = rest[rest.index(after: close)...]
        }
        return unknown
    }

    private static func placeholder(_ placeholder: String, _ event: WatchEvent, now: Date) -> String? {
        let json = placeholder.hasSuffix(":json")
        let name = json ? String(placeholder.dropLast(5)) : placeholder
        let value: JSONValue?
        switch name {
        case "key", "old", "rev", "channel", "payload": value = event[name]
        case "new": value = event.value
        case "event": value = .string(event.kind)
        case "time": value = .string(iso8601(now))
        case "run": value = event.run.map { .string($0) }
        default: return nil
        }
        if json { return (value ?? .null).encoded }
        return value.map(ValueArgument.renderLine) ?? ""
    }

    static func iso8601(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    /// The environment of a `-- COMMAND` run: OBS_EVENT (the event's JSON), OBS_KEY, OBS_VALUE,
    /// OBS_OLD, OBS_REV, OBS_CHANNEL, OBS_RUN (as `{run}`), each empty when the event lacks it. A variable longer than
    /// the kernel passes to a program (`longestVariable`), or holding a NUL (which ends a
    /// variable), is left empty and named in OBS_TOO_LARGE (the event is whole on the command's
    /// stdin): with it, the command could not be started at all, or would see the value cut.
    public static func environment(_ event: WatchEvent) -> [String: String] {
        var variables = [
            "OBS_EVENT": event.line,
            "OBS_KEY": event["key"].map(ValueArgument.render) ?? "",
            "OBS_VALUE": (event.kind == "publish" ? event["payload"] : event.value).map(ValueArgument.render) ?? "",
            "OBS_OLD": event["old"].map(ValueArgument.render) ?? "",
            "OBS_REV": event["rev"].map(ValueArgument.render) ?? "",
            "OBS_CHANNEL": event["channel"].map(ValueArgument.render) ?? "",
            "OBS_RUN": event.run ?? "",
        ]
        // A NUL cannot be passed either: the program would see the value cut at it.
        let tooLarge = variables.filter { $0.key.utf8.count + 1 + $0.value.utf8.count > longestVariable || $0.value.utf8.contains(0) }
            .keys.sorted()
        for name in tooLarge { variables[name] = "" }
        variables["OBS_TOO_LARGE"] = tooLarge.joined(separator: " ")
        return variables
    }

    /// The longest `NAME=value` Linux passes to a program: 32 pages with the terminating zero
    /// (MAX_ARG_STRLEN); posix_spawn refuses a longer one with E2BIG.
    static let longestVariable = 32 * Int(sysconf(Int32(_SC_PAGESIZE))) - 1
}
