/// A command line that obsctl (or a definitions file) cannot accept; the message says why.
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// An option of a command: `--name VALUE` when `value` names a placeholder, else a flag.
public struct OptionSpec: Sendable {
    public let names: [String]
    public let value: String?
    public let help: String

    public init(_ names: [String], value: String? = nil, _ help: String) {
        self.names = names
        self.value = value
        self.help = help
    }

    /// The name parsed results are keyed by: the long one.
    public var key: String { names.last! }
}

/// A positional argument. `repeating` takes every remaining word; `optional` may be absent.
public struct ArgumentSpec: Sendable {
    public let name: String
    public let help: String
    public let optional: Bool
    public let repeating: Bool

    public init(_ name: String, optional: Bool = false, repeating: Bool = false, _ help: String) {
        self.name = name
        self.help = help
        self.optional = optional
        self.repeating = repeating
    }
}

/// A command's grammar: the one description that parsing, help and completion all read.
public struct CommandSpec: Sendable {
    public let name: String
    public let summary: String
    public let overview: String?
    public let arguments: [ArgumentSpec]
    public let options: [OptionSpec]
    /// Whether `-- COMMAND ARGS...` may follow (watch).
    public let takesCommand: Bool

    public init(_ name: String, summary: String, overview: String? = nil, arguments: [ArgumentSpec] = [],
                options: [OptionSpec] = [], takesCommand: Bool = false) {
        self.name = name
        self.summary = summary
        self.overview = overview
        self.arguments = arguments
        self.options = options
        self.takesCommand = takesCommand
    }

    public func option(named name: String) -> OptionSpec? {
        options.first { $0.names.contains(name) }
    }

    /// Splits `words` into positionals and options by this grammar, and checks the arity.
    public func parse(_ words: [String]) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        parsed.commandName = name
        var index = 0
        while index < words.count {
            let word = words[index]
            index += 1
            if word == "--" {
                if takesCommand {
                    parsed.command = Array(words[index...])
                } else {
                    parsed.positionals += words[index...]
                }
                break
            }
            // "-" is stdin, and "-5" is a number, not an option.
            guard word.hasPrefix("-"), word != "-", Double(word) == nil else {
                parsed.positionals.append(word)
                continue
            }
            var name = word
            var inline: String?
            if word.hasPrefix("--"), let equals = word.firstIndex(of: "=") {
                name = String(word[..<equals])
                inline = String(word[word.index(after: equals)...])
            }
            guard let option = option(named: name) else {
                throw UsageError("unknown option '\(name)' for '\(self.name)'"
                                 + Suggestion.hint(for: name, among: options.flatMap(\.names)))
            }
            if option.value != nil {
                if let inline {
                    parsed.values[option.key, default: []].append(inline)
                } else {
                    guard index < words.count else { throw UsageError("option '\(name)' needs a value") }
                    parsed.values[option.key, default: []].append(words[index])
                    index += 1
                }
            } else {
                guard inline == nil else { throw UsageError("option '\(name)' takes no value") }
                parsed.flags.insert(option.key)
            }
        }
        let required = arguments.filter { !$0.optional }.count
        if parsed.positionals.count < required {
            throw UsageError("'\(self.name)' needs \(arguments[parsed.positionals.count].name)")
        }
        if !(arguments.last?.repeating ?? false), parsed.positionals.count > arguments.count {
            throw UsageError("unexpected argument '\(parsed.positionals[arguments.count])' for '\(self.name)'")
        }
        return parsed
    }
}

/// The words of one command line, sorted by the command's grammar.
public struct ParsedArguments: Sendable {
    /// The command these words were parsed for.
    public var commandName = ""
    public var positionals: [String] = []
    /// Option values by the option's long name; repeated options keep every value.
    public var values: [String: [String]] = [:]
    public var flags: Set<String> = []
    /// The words after `--`, for commands that run one.
    public var command: [String]?

    public init() {}

    public func has(_ flag: String) -> Bool { flags.contains(flag) }

    /// The last value given for `option`.
    public func value(_ option: String) -> String? { values[option]?.last }

    /// A duration option in seconds; a bad one is a usage error.
    public func duration(_ option: String) throws(UsageError) -> Double? {
        guard let text = value(option) else { return nil }
        guard let seconds = DurationText.seconds(text) else {
            throw UsageError("invalid duration '\(text)' for \(option) (expected e.g. 250ms, 5s, 2m, 1h or 10)")
        }
        return seconds
    }

    /// A whole-number option; a bad one (or one over the protocol's 64-bit signed integers) is a
    /// usage error.
    public func count(_ option: String) throws(UsageError) -> UInt64? {
        guard let text = value(option) else { return nil }
        guard let number = UInt64(text), number <= UInt64(Int64.max) else { throw UsageError("invalid number '\(text)' for \(option)") }
        return number
    }
}
