import ObsClient

/// Help in swift-argument-parser's sections, generated from the command table.
enum Help {
    static let width = 100
    static let column = 26

    /// What obsctl is, for `--help` and the man page (which reflows it).
    static let overview = """
        Reads and writes keys, streams changes, and manages computed keys and bindings over the
        daemon's Unix socket. Made for shells and pipelines: every line is flushed at once, and the
        exit status says what happened (0 success, 1 the daemon answered an error, 2 cannot connect,
        3 timed out, 64 usage error).
        """

    static let main: String = {
        var text = """
            OVERVIEW: obsctl, the command-line client of obsd

            \(overview)

            USAGE: obsctl [--socket PATH] [--timeout DURATION] COMMAND [ARGS]

            OPTIONS:

            """
        for option in globalOptions { text += optionLine(option) }
        text += entry("--version", "Print the version and exit.")
        text += "\nSUBCOMMANDS:\n"
        for command in commandTable { text += entry(command.name, command.spec.summary) }
        text += "\n  See 'obsctl help COMMAND' for a command's arguments and options.\n"
        return text
    }()

    static func text(for spec: CommandSpec) -> String {
        var text = "OVERVIEW: \(spec.summary)\n\n"
        if let overview = spec.overview { text += wrap(overview, indent: 0, first: 0) + "\n\n" }
        text += wrap(usage(spec), indent: "USAGE: obsctl \(spec.name) ".count, first: 0) + "\n"
        if !spec.arguments.isEmpty {
            text += "\nARGUMENTS:\n"
            for argument in spec.arguments { text += entry(argument.name, argument.help) }
        }
        text += "\nOPTIONS:\n"
        for option in spec.options { text += optionLine(option) }
        if spec.option(named: "--timeout") == nil, spec.name != "help", spec.name != "completion" {
            text += optionLine(globalOptions[1])
        }
        text += entry("-h, --help", "Print this help and exit.")
        return text
    }

    static func usage(_ spec: CommandSpec) -> String {
        var parts = ["USAGE: obsctl", spec.name]
        for argument in spec.arguments {
            var word = argument.name + (argument.repeating ? "..." : "")
            if argument.optional { word = "[\(word)]" }
            parts.append(word)
        }
        for option in spec.options {
            parts.append("[\(option.names.last!)\(option.value.map { " " + $0 } ?? "")]")
        }
        if spec.takesCommand { parts.append("[-- COMMAND [ARGS...]]") }
        return parts.joined(separator: " ")
    }

    static func optionLine(_ option: OptionSpec) -> String {
        entry(option.names.joined(separator: ", ") + (option.value.map { " " + $0 } ?? ""), option.help)
    }

    /// `  NAME<pad>HELP`, the help wrapped under its column.
    static func entry(_ name: String, _ help: String) -> String {
        let head = "  " + name
        if head.count + 2 > column {
            return head + "\n" + String(repeating: " ", count: column) + wrap(help, indent: column, first: column) + "\n"
        }
        return head + String(repeating: " ", count: column - head.count) + wrap(help, indent: column, first: column) + "\n"
    }

    /// Wraps `text` at `width`; continuation lines start with `indent` spaces; the first line
    /// already has `first` columns before it.
    static func wrap(_ text: String, indent: Int, first: Int) -> String {
        TextWrap.wrap(text, width: width, indent: indent, first: first)
    }

    static func run(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        guard let name = parsed.positionals.first else {
            context.output.raw(main)
            return 0
        }
        guard let command = command(named: name) else { throw UsageError("unknown command '\(name)'") }
        context.output.raw(text(for: command.spec))
        return 0
    }
}
