import Foundation
import ObsClient
import ObsCore

let watchSpec = CommandSpec(
    "watch", summary: "Stream events of keys and channels.",
    overview: """
        Prints one JSON object per event, as the daemon sent it minus the watch field: the current \
        value of every matching key (initial), then synced, then every change, delete, error and \
        publish. PATTERN segments: * matches one segment, ** any number.
        """,
    arguments: [ArgumentSpec("PATTERN", repeating: true, "Keys, patterns or channels to watch.")],
    options: [
        OptionSpec(["--no-initial"], "Skip the current values; only what changes from now."),
        OptionSpec(["--since"], value: "REV", "Replay every change after revision REV first."),
        OptionSpec(["--run"], value: "RUN", "With --since: the run of obsd REV was seen in ({run}); another state gives a snapshot, not a replay."),
        OptionSpec(["--latest"], "Per key, only the latest change when events come faster than they are taken."),
        OptionSpec(["--throttle"], value: "DURATION", "At most one event per key per DURATION."),
        OptionSpec(["--debounce"], value: "DURATION", "An event only after a key has been quiet for DURATION."),
        OptionSpec(["-n"], value: "COUNT", "Exit after COUNT change, delete, error or publish events."),
        OptionSpec(["--timeout"], value: "DURATION", "Exit 3 if nothing arrives for DURATION (with -n: in all)."),
        OptionSpec(["--initial-only"], "Print the current values and exit."),
        OptionSpec(["--reconnect"], "Reconnect when the connection drops and resume where it stopped."),
        OptionSpec(["--json"], "Print events as JSON (the default)."),
        OptionSpec(["--values"], "Print only the new value per change (strings raw); deletes print an empty line."),
        OptionSpec(["--format"], value: "FMT", "Print FMT per event: {key} {new} {old} {rev} {event} {channel} {payload} {time} {run}; {NAME:json} for the field as JSON; {{ for a brace."),
    ],
    takesCommand: true)

/// `obsctl watch`: prints events, or runs `-- COMMAND` once per event.
enum WatchCommand {
    enum Style {
        case json
        case values
        case format(String)
    }

    static func run(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        guard !parsed.positionals.isEmpty else { throw UsageError("'watch' needs PATTERN") }
        let styles = [parsed.has("--json"), parsed.has("--values"), parsed.value("--format") != nil].filter { $0 }
        guard styles.count <= 1 else { throw UsageError("--json, --values and --format exclude each other") }
        if let command = parsed.command, command.isEmpty { throw UsageError("'--' must be followed by a COMMAND") }
        var options = WatchOptions(keys: parsed.positionals)
        options.initial = !parsed.has("--no-initial")
        options.since = try parsed.count("--since")
        options.run = parsed.value("--run")
        if options.run != nil, options.since == nil { throw UsageError("--run goes with --since") }
        options.latest = parsed.has("--latest")
        options.throttle = try interval("--throttle", parsed)
        options.debounce = try interval("--debounce", parsed)
        options.reconnect = parsed.has("--reconnect")
        let limit = try parsed.count("-n")
        let style: Style = parsed.has("--values") ? .values : parsed.value("--format").map { .format($0) } ?? .json
        // Printed as they are, as any text is: said once, as they are most likely typos.
        for unknown in parsed.value("--format").map(EventFormat.unknownPlaceholders) ?? [] {
            context.output.error("warning: --format: \(unknown) is no placeholder, so it is printed as it is "
                                 + "(placeholders: \(EventFormat.placeholderNames.map { "{\($0)}" }.joined(separator: " ")); {{ for a brace)")
        }

        // With -n the timeout bounds the whole wait; otherwise the quiet time between events.
        let overall = limit != nil ? context.deadline : nil
        func nextDeadline() -> Double? { overall ?? context.deadline }

        // A COMMAND that cannot run stops the watch now, not with a warning per event.
        if let command = parsed.command, let reason = ChildProcess.cannotRun(command[0], environment: context.environment) {
            throw UsageError("cannot run '\(command[0])': \(reason)")
        }
        let output = context.output
        // Before connecting: a --reconnect watch may wait long for a daemon that is not there yet.
        output.exitWhenReaderLeaves()
        let stream = try WatchStream(path: context.socketPath, options: options, deadline: context.deadline) { reason in
            output.error("waiting for obsd (--reconnect): \(reason)")
        }
        let source: () throws(ClientError) -> WatchEvent?
        var runner: CommandRunner?
        if let command = parsed.command {
            let queue = EventQueue(coalescing: options.latest)
            queue.start(stream)
            runner = CommandRunner(arguments: command, output: context.output)
            source = { () throws(ClientError) in try queue.next(deadline: nextDeadline()) }
        } else {
            source = { () throws(ClientError) in try stream.next(deadline: nextDeadline()) }
        }

        if limit == 0 { return 0 }
        // Only with -n: it holds the last state of every key the watch printed.
        var count = limit.map { _ in WatchCount(since: options.since) }
        var counted: UInt64 = 0
        while true {
            guard let event = try source() else { throw ClientError.timedOut }
            if parsed.has("--initial-only"), event.kind == "synced" { return 0 }
            if let runner {
                if !EventFormat.controlKinds.contains(event.kind) { try runner.run(event) }
            } else {
                emit(event, style, context.output)
            }
            if let limit, let units = count?.count(event), units > 0 {
                counted += UInt64(units)
                if counted >= limit { return 0 }
            }
        }
    }

    /// `--throttle`, `--debounce`: the daemon counts them in whole milliseconds, at least one, so a
    /// shorter one is refused here, in the option's own words.
    static func interval(_ option: String, _ parsed: ParsedArguments) throws(UsageError) -> Double? {
        guard let seconds = try parsed.duration(option) else { return nil }
        guard (seconds * 1000).rounded() >= 1 else {
            throw UsageError("\(option) must be at least 1ms, not '\(parsed.value(option) ?? "")'")
        }
        return seconds
    }

    static func emit(_ event: WatchEvent, _ style: Style, _ output: Output) {
        switch style {
        case .json:
            output.line(event.line)
        case .values:
            if let line = EventFormat.valuesLine(event) { output.line(line) }
        case .format(let format):
            if !EventFormat.controlKinds.contains(event.kind) || EventFormat.formattedKinds.contains(event.kind) {
                output.line(EventFormat.render(format, event))
            }
        }
    }
}

/// Runs `-- COMMAND` per event, one run at a time; a failure is reported and the watch goes on.
final class CommandRunner {
    let arguments: [String]
    let output: Output

    init(arguments: [String], output: Output) {
        self.arguments = arguments
        self.output = output
    }

    /// Runs the command for `event`; one that cannot be started at all (removed since the watch
    /// began) stops the watch.
    func run(_ event: WatchEvent) throws(UsageError) {
        switch ChildProcess.run(arguments, input: event.line + "\n", environment: EventFormat.environment(event)) {
        case .exited(0): break
        case .exited(let status): output.error("\(arguments[0]) exited with status \(status)")
        case .signalled(let signal): output.error("\(arguments[0]) was killed by signal \(signal)")
        case .cannotStart(let reason): throw UsageError("cannot run '\(arguments[0])': \(reason)")
        }
    }
}
