import ObsClient

/// Every command, in the order help lists them. Dispatch, help and completion read this table.
let commandTable: [Command] = [
    Command(spec: CommandSpec("get", summary: "Print each value, one per line.",
                              overview: "Strings print raw, other values as compact JSON. A computed in the error state prints its error on stderr and exits 1.",
                              arguments: [ArgumentSpec("KEY", repeating: true, "The keys to read.")],
                              options: [OptionSpec(["--json"], "Print every value as JSON (strings quoted).")]),
            run: ReadCommands.get),
    Command(spec: WriteCommands.set, run: WriteCommandsRunner.set),
    Command(spec: WriteCommands.del, run: WriteCommandsRunner.simple),
    Command(spec: CommandSpec("incr", summary: "Add to a number; print the new value.",
                              overview: "A missing key counts as 0.",
                              arguments: [ArgumentSpec("KEY", "The key."), ArgumentSpec("BY", optional: true, "The amount (default 1).")],
                              options: [OptionSpec(["--json"], "Print the value as JSON.")]),
            run: WriteCommandsRunner.incr),
    Command(spec: WriteCommands.define, run: WriteCommandsRunner.simple),
    Command(spec: WriteCommands.bind, run: WriteCommandsRunner.simple),
    Command(spec: WriteCommands.unbind, run: WriteCommandsRunner.simple),
    Command(spec: CommandSpec("publish", summary: "Publish an event on a channel.",
                              overview: "PAYLOAD is parsed like a set VALUE; - reads stdin and publishes each line as it arrives.",
                              arguments: [ArgumentSpec("CHANNEL", "The channel."),
                                          ArgumentSpec("PAYLOAD", optional: true, "The payload (default null), or - to read lines from stdin.")],
                              options: [OptionSpec(["--string"], "Take PAYLOAD as a string, even if it parses as JSON."),
                                        OptionSpec(["--json"], "Require PAYLOAD to be valid JSON.")]),
            run: WriteCommandsRunner.publish),
    Command(spec: watchSpec, run: WatchCommand.run),
    Command(spec: CommandSpec("wait", summary: "Exit 0 as soon as EXPR is truthy.",
                              overview: "Exits at once if EXPR already is truthy; with --timeout, exits 3 when it runs out first.",
                              arguments: [ArgumentSpec("EXPR", "The expression (see docs/expressions.md).")],
                              options: [OptionSpec(["--timeout"], value: "DURATION", "Give up after DURATION and exit 3.")]),
            run: WaitCommand.run),
    Command(spec: CommandSpec("eval", summary: "Evaluate an expression once and print the result.",
                              arguments: [ArgumentSpec("EXPR", "The expression.")],
                              options: [OptionSpec(["--json"], "Print the value as JSON.")]),
            run: ReadCommands.eval),
    Command(spec: CommandSpec("list", summary: "List keys with their kind.",
                              arguments: [ArgumentSpec("PATTERN", optional: true, "Only keys matching PATTERN (default **).")],
                              options: [jsonOutput]),
            run: ReadCommands.list),
    Command(spec: webSpec, run: WebCommand.run),
    Command(spec: CommandSpec("describe", summary: "Show a key's kind, expression, dependencies, dependents, binding, revisions and TTL.",
                              arguments: [ArgumentSpec("KEY", "The key.")], options: [jsonOutput]),
            run: ReadCommands.describe),
    Command(spec: CommandSpec("graph", summary: "Print the dependency graph.",
                              overview: "Edges point the way values flow: from a dependency to the computed that reads it, from a binding's source to its target.",
                              arguments: [ArgumentSpec("PATTERN", optional: true, "Only keys matching PATTERN (default **).")],
                              options: [OptionSpec(["--dot"], "Print Graphviz DOT."), jsonOutput]),
            run: ReadCommands.graph),
    Command(spec: CommandSpec("stats", summary: "Print the daemon's counters.",
                              overview: "--format prometheus prints Prometheus's text exposition format, for node_exporter's textfile collector.",
                              options: [jsonOutput, OptionSpec(["--format"], value: "FORMAT", "text (the default), json, or prometheus.")]),
            run: ReadCommands.stats),
    Command(spec: CommandSpec("dump", summary: "Write the whole state as JSON to stdout."),
            run: ReadCommands.dump),
    Command(spec: CommandSpec("restore", summary: "Read a state written by dump from stdin.",
                              overview: """
                                  One transaction, so watchers see the whole state change at one revision. With --split, \
                                  a state larger than one transaction takes (in cluster mode, etcd's --max-txn-ops and \
                                  --max-request-bytes) is restored in as many as it needs: value keys first, then computed \
                                  keys and bindings; it adds to the state and cannot --replace it. At most the \
                                  daemon's max_restore_bytes and max_line_bytes of JSON are read (too_large, exit 1, \
                                  beyond them).
                                  """,
                              options: [OptionSpec(["--replace"], "Remove the keys the dump does not hold."),
                                        OptionSpec(["--split"], "Restore in several transactions when one is too large.")]),
            run: WriteCommandsRunner.restore),
    Command(spec: CommandSpec("apply", summary: "Apply a definitions file in one transaction.",
                              overview: """
                                  One command per line (set, define, bind, unbind, del) in obsctl's syntax without the \
                                  'obsctl' word, with shell-like quoting; blank lines and # comments are ignored. A line \
                                  that fails aborts the file with its line number and applies nothing. A file over \
                                  64 MiB is refused (too_large, exit 1).
                                  """,
                              arguments: [ArgumentSpec("FILE", "The definitions file (- for stdin).")]),
            run: WriteCommandsRunner.apply),
    Command(spec: CommandSpec("ping", summary: "Measure a round trip to the daemon; print the time taken."),
            run: ReadCommands.ping),
    Command(spec: CommandSpec("completion", summary: "Print a shell completion script.",
                              overview: "bash: source <(obsctl completion bash); zsh: obsctl completion zsh > \"${fpath[1]}/_obsctl\"; fish: obsctl completion fish > ~/.config/fish/completions/obsctl.fish",
                              arguments: [ArgumentSpec("SHELL", "bash, zsh or fish.")]),
            run: Completion.run),
    Command(spec: CommandSpec("help", summary: "Print help for obsctl or one command.",
                              arguments: [ArgumentSpec("COMMAND", optional: true, "The command.")]),
            run: Help.run),
]

func command(named name: String) -> Command? {
    commandTable.first { $0.name == name }
}
