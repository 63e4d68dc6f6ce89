// The configuration file: `name = value` lines, `#` comments (a whole line, or after whitespace at
// the end of a line), blank lines. Unknown names, bad values and repeated names are errors that
// carry the line number; `allow` may repeat and its rules add up.

/// A configuration that cannot be used; `description` is the message for the operator.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}

/// One setting the file accepts: its name, what a value looks like, and how it is applied.
struct SettingSpec: Sendable {
    var name: String
    var expects: String
    /// Applies `value` (a relative path is taken from `directory`); false when the value is bad.
    var apply: @Sendable (_ settings: inout Settings, _ value: String, _ directory: String) -> Bool
}

enum ConfigFile {
    /// Every setting, in the order of obsd.conf.example.
    static let specs: [SettingSpec] = [
        SettingSpec(name: "socket", expects: "a path") { settings, value, directory in
            settings.socket = absolute(value, directory)
            return true
        },
        SettingSpec(name: "socket_mode", expects: "octal permission bits such as 0660") { settings, value, _ in
            guard let mode = ConfigValues.mode(value) else { return false }
            settings.socketMode = mode
            return true
        },
        SettingSpec(name: "socket_group", expects: "a group name or number") { settings, value, _ in
            settings.socketGroup = value
            return true
        },
        SettingSpec(name: "state_dir", expects: "a path") { settings, value, directory in
            settings.stateDirectory = absolute(value, directory)
            return true
        },
        SettingSpec(name: "durability", expects: "normal, strict or memory") { settings, value, _ in
            guard let durability = Durability(rawValue: value) else { return false }
            settings.durability = durability
            return true
        },
        SettingSpec(name: "log_level", expects: "debug, info, warn or error") { settings, value, _ in
            guard let level = LogLevel(rawValue: value) else { return false }
            settings.logLevel = level
            return true
        },
        SettingSpec(name: "allow", expects: "user:NAME:read|write or group:NAME:read|write, comma-separated") { settings, value, _ in
            guard let rules = ConfigValues.allow(value) else { return false }
            settings.allow += rules
            return true
        },
        SettingSpec(name: "definitions", expects: "a path") { settings, value, directory in
            settings.definitions = absolute(value, directory)
            return true
        },
        byteLimit("max_line_bytes", \.maxLineBytes),
        countLimit("max_json_depth", \.maxJSONDepth),
        byteLimit("max_value_bytes", \.maxValueBytes),
        byteLimit("max_expression_bytes", \.maxExpressionBytes),
        countLimit("max_connections", \.maxConnections),
        countLimit("max_watches", \.maxWatches),
        byteLimit("output_buffer_bytes", \.outputBufferBytes),
        SettingSpec(name: "client_timeout", expects: "a duration such as 250ms, 5s, 2m, 1h or 60") { settings, value, _ in
            guard let seconds = ConfigValues.duration(value), seconds > 0 else { return false }
            settings.limits.clientTimeout = seconds
            return true
        },
        countLimit("history", \.history),
        byteLimit("history_bytes", \.historyBytes),
        byteLimit("max_restore_bytes", \.maxRestoreBytes),
        SettingSpec(name: "cluster", expects: "none or etcd") { settings, value, _ in
            guard let mode = ClusterMode(rawValue: value) else { return false }
            settings.cluster = mode
            return true
        },
        SettingSpec(name: "etcd_endpoints", expects: "http:// or https:// URLs, comma-separated") { settings, value, _ in
            guard let endpoints = ConfigValues.endpoints(value) else { return false }
            settings.etcd.endpoints = endpoints
            return true
        },
        SettingSpec(name: "etcd_prefix", expects: "a key prefix such as /obsd/") { settings, value, _ in
            // Empty, obsd would take the whole of etcd's keyspace as its own (as --etcd-prefix refuses).
            guard !value.isEmpty else { return false }
            settings.etcd.prefix = value
            return true
        },
        SettingSpec(name: "etcd_cacert", expects: "a path") { settings, value, directory in
            settings.etcd.caFile = absolute(value, directory)
            return true
        },
        SettingSpec(name: "etcd_cert", expects: "a path") { settings, value, directory in
            settings.etcd.certFile = absolute(value, directory)
            return true
        },
        SettingSpec(name: "etcd_key", expects: "a path") { settings, value, directory in
            settings.etcd.keyFile = absolute(value, directory)
            return true
        },
        SettingSpec(name: "etcd_user", expects: "a user name") { settings, value, _ in
            settings.etcd.user = value
            return true
        },
        SettingSpec(name: "etcd_password", expects: "a password") { settings, value, _ in
            settings.etcd.password = value
            return true
        },
        // Bounded: a timeout is counted in nanoseconds and in milliseconds of 32 bits (24.8 days).
        SettingSpec(name: "etcd_timeout", expects: "a duration from 1ms to 1h, such as 250ms, 5s, 2m or 60") { settings, value, _ in
            guard let seconds = ConfigValues.duration(value), seconds >= 0.001, seconds <= 3600 else { return false }
            settings.etcd.timeout = seconds
            return true
        },
        SettingSpec(name: "etcd_api", expects: "grpc or json") { settings, value, _ in
            guard let api = EtcdAPIChoice(rawValue: value) else { return false }
            settings.etcd.api = api
            return true
        },
        SettingSpec(name: "ephemeral_ttl", expects: "a duration from 2s to 24h") { settings, value, _ in
            guard let seconds = ConfigValues.duration(value), seconds >= 2, seconds <= 86_400 else { return false }
            settings.etcd.ephemeralTTL = Int64(seconds.rounded(.up))
            return true
        },
    ]

    /// Applies the file's settings over `settings`. `path` names the file in messages and is where
    /// relative paths in it start.
    static func apply(_ text: String, path: String, to settings: inout Settings) throws(ConfigError) {
        let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        var seen: [String: Int] = [:]
        var lineNumber = 0
        // Split by scalars: Swift takes "\r\n" as one Character, which is not "\n", so a file with
        // CRLF line ends would be one line.
        for scalars in text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false) {
            let rawLine = Substring(scalars)
            lineNumber += 1
            let line = withoutComment(rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine).trimmingSpaces()
            if line.isEmpty { continue }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigError("\(path):\(lineNumber): expected 'name = value', got '\(line)'")
            }
            let name = String(line[..<equals].trimmingSpaces())
            let value = String(line[line.index(after: equals)...].trimmingSpaces())
            guard let spec = specs.first(where: { $0.name == name }) else {
                throw ConfigError("\(path):\(lineNumber): unknown setting '\(name)'")
            }
            if let first = seen[name], name != "allow" {
                throw ConfigError("\(path):\(lineNumber): '\(name)' is already set on line \(first)")
            }
            seen[name] = lineNumber
            guard !value.isEmpty, spec.apply(&settings, value, directory) else {
                throw ConfigError("\(path):\(lineNumber): bad value '\(value)' for \(name): expected \(spec.expects)")
            }
        }
    }

    /// The line up to a `#` that starts it or follows whitespace (a `#` inside a word is kept).
    private static func withoutComment(_ line: Substring) -> Substring {
        var previous: Character = " "
        for index in line.indices {
            if line[index] == "#", previous == " " || previous == "\t" { return line[..<index] }
            previous = line[index]
        }
        return line
    }

    private static func absolute(_ path: String, _ directory: String) -> String {
        path.hasPrefix("/") ? path : directory + "/" + path
    }

    private static func countLimit(_ name: String, _ field: any WritableKeyPath<Limits, Int> & Sendable) -> SettingSpec {
        SettingSpec(name: name, expects: "a whole number of at least 1") { settings, value, _ in
            guard let count = ConfigValues.count(Substring(value)) else { return false }
            settings.limits[keyPath: field] = count
            return true
        }
    }

    private static func byteLimit(_ name: String, _ field: any WritableKeyPath<Limits, Int> & Sendable) -> SettingSpec {
        SettingSpec(name: name, expects: "a byte count such as 1048576, 64K or 1M") { settings, value, _ in
            guard let count = ConfigValues.byteCount(value) else { return false }
            settings.limits[keyPath: field] = count
            return true
        }
    }
}
