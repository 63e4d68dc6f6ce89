import ObsClient

/// One obsctl command: its grammar (which help and completion read too) and what it does.
struct Command: Sendable {
    let spec: CommandSpec
    /// Runs the command; returns the exit status, or throws UsageError or ClientError.
    let run: @Sendable (Context, ParsedArguments) throws -> Int32

    var name: String { spec.name }
}

/// Options every command accepts, before or after its name.
let globalOptions = [
    OptionSpec(["--socket"], value: "PATH", "The daemon's socket (default: $OBSD_SOCKET, then /run/obsd/obsd.sock for root, $XDG_RUNTIME_DIR/obsd/obsd.sock or /tmp/obsd-$UID/obsd.sock)."),
    OptionSpec(["--timeout"], value: "DURATION", "Give up after DURATION (250ms, 5s, 2m, 1h, or seconds) and exit 3."),
    OptionSpec(["-h", "--help"], "Print help and exit."),
]

/// `--json` for commands whose output it turns into the daemon's raw answer or JSON values.
let jsonOutput = OptionSpec(["--json"], "Print the daemon's answer as JSON.")
