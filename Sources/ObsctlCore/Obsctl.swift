import Glibc
import ObsClient

/// obsctl's version, as `--version` prints it.
public let obsctlVersion = "0.1.0"

/// obsctl's entry point: parses the command line, runs the command, and turns failures into
/// the exit codes of docs/cli.md: 1 the daemon said no, 2 no daemon, 3 timed out, 64 usage.
public enum Obsctl {
    public static func main(_ arguments: [String], environment: [String: String], output: Output = Output()) -> Int32 {
        // A closed stdout shows up as EPIPE on write (Output exits quietly), not as a signal.
        signal(SIGPIPE, SIG_IGN)
        holdClosedStandardDescriptors()
        var words = arguments[...]
        var socket: String?
        var timeout: Double?
        var parsed: ParsedArguments?
        do {
            // Global options before the command name, as `--socket PATH` or `--socket=PATH`.
            var version = false
            while let word = words.first, word.hasPrefix("-") {
                words.removeFirst()
                let (name, inline) = word.hasPrefix("--") && word.contains("=")
                    ? (String(word.prefix { $0 != "=" }), String(word.drop { $0 != "=" }.dropFirst())) : (word, nil)
                switch name {
                case "-h", "--help":
                    output.raw(Help.main)
                    return 0
                case "--version":
                    version = true
                case "--socket", "--timeout":
                    guard let value = inline ?? words.popFirst() else { throw UsageError("option '\(name)' needs a value") }
                    if name == "--socket" { socket = value } else { timeout = try duration(value, for: name) }
                default:
                    throw UsageError("unknown option '\(name)'"
                                     + Suggestion.hint(for: name, among: Completion.topLevelOptions))
                }
            }
            if version {
                printVersions(socket: defaultSocketPath(explicit: socket, environment: environment), timeout: timeout, output)
                return 0
            }
            guard let name = words.popFirst() else { throw UsageError("missing command") }
            guard let command = command(named: name) else {
                throw UsageError("unknown command '\(name)'" + Suggestion.hint(for: name, among: commandTable.map(\.name)))
            }
            let spec = CommandSpec(command.spec.name, summary: command.spec.summary, arguments: command.spec.arguments,
                                   options: command.spec.options + globalOptions.filter { command.spec.option(named: $0.key) == nil },
                                   takesCommand: command.spec.takesCommand)
            // Help wins over missing arguments: `obsctl set --help` is not a usage error.
            let beforeCommand = words.prefix { $0 != "--" }
            if beforeCommand.contains("--help") || beforeCommand.contains("-h") {
                output.raw(Help.text(for: command.spec))
                return 0
            }
            let arguments = try spec.parse(Array(words))
            parsed = arguments
            if let value = arguments.value("--socket") { socket = value }
            if socket?.isEmpty == true { throw UsageError("--socket needs a path, not an empty one") }
            if let value = try arguments.duration("--timeout") { timeout = value }
            // 0 would give up before anything could happen (even `wait` of a true expression).
            if let timeout, timeout <= 0 { throw UsageError("--timeout must be longer than 0") }
            let context = Context(socketPath: defaultSocketPath(explicit: socket, environment: environment),
                                  timeout: timeout, output: output, environment: environment)
            return try command.run(context, arguments)
        } catch let error as UsageError {
            output.error("\(error.message)\nSee 'obsctl --help'.")
            return 64
        } catch let error as ClientError {
            let status = report(error, output)
            if case .server(let failure) = error, let parsed, let caret = ExpressionCaret.lines(failure, parsed) {
                output.note(caret)
            }
            return status
        } catch {
            output.error("\(error)")
            return 1
        }
    }

    /// The arguments after the program's name, as the kernel passed them; nil, after saying so on
    /// stderr, when one is not UTF-8 (`obsctl set k $'\\xff'`): Swift's CommandLine.arguments
    /// replaces such bytes with U+FFFD, which would store a value other than the one given.
    public static func arguments(_ count: Int32, _ values: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
                                 output: Output = Output()) -> [String]? {
        var arguments: [String] = []
        for index in 1..<Int(max(count, 1)) {
            guard let raw = values[index] else { break }
            let bytes = UnsafeRawBufferPointer(start: raw, count: strlen(raw))
            guard let text = String(validating: bytes, as: UTF8.self) else {
                output.error("argument \(index) is not valid UTF-8\nSee 'obsctl --help'.")
                return nil
            }
            arguments.append(text)
        }
        return arguments
    }

    /// A standard descriptor the caller closed (`obsctl get k >&-`, a service with no stdin) would
    /// be taken by the next file obsctl opens, the daemon's socket: lines meant for stdout or
    /// stderr would go to the daemon as requests, and `set k -` would read the daemon's answers
    /// as its input. Each closed one is held by /dev/null opened the other way round, so it still
    /// behaves as closed: a write to stdout fails (`Bad file descriptor`, exit 1), stdin reads
    /// nothing.
    static func holdClosedStandardDescriptors() {
        for fd: Int32 in [0, 1, 2] where fcntl(fd, F_GETFD) < 0 && errno == EBADF {
            let held = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY)
            if held >= 0, held != fd {
                dup2(held, fd)
                close(held)
            }
        }
    }

    /// Says what went wrong on stderr and returns the exit code for it.
    static func report(_ error: ClientError, _ output: Output) -> Int32 {
        output.error(error.description)
        switch error {
        case .server: return 1
        case .cannotConnect, .connectionLost: return 2
        case .timedOut: return 3
        }
    }

    /// `--version`: obsctl's, and the version of the daemon it would talk to, if it answers.
    static func printVersions(socket: String, timeout: Double?, _ output: Output) {
        output.line("obsctl \(obsctlVersion)")
        do throws(ClientError) {
            let deadline = monotonicNow() + (timeout ?? 2)
            let hello = try ObsConnection(path: socket, deadline: deadline).request("hello", deadline: deadline)
            output.line("obsd \(hello["version"].map(ValueArgument.render) ?? "unknown") (\(socket))")
        } catch {
            output.line("obsd: \(error)")
        }
    }

    static func duration(_ text: String, for option: String) throws(UsageError) -> Double {
        guard let seconds = DurationText.seconds(text) else {
            throw UsageError("invalid duration '\(text)' for \(option) (expected e.g. 250ms, 5s, 2m, 1h or 10)")
        }
        return seconds
    }
}
