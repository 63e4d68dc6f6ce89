import ObsClient

/// What obsd's command line asks for; nil fields were not given.
public struct CommandLineOptions: Sendable, Equatable {
    public var socket: String?
    public var stateDirectory: String?
    public var memory = false
    public var config: String?
    public var durability: Durability?
    public var logLevel: LogLevel?
    public var cluster: ClusterMode?
    public var etcdEndpoints: [String]?
    public var etcdPrefix: String?
    public var etcdCACert: String?
    public var etcdCert: String?
    public var etcdKey: String?
    public var etcdUser: String?
    public var etcdPassword: String?
    public var etcdAPI: EtcdAPIChoice?
    public var check = false
    public var version = false
    public var help = false

    public init() {}

    /// Parses the arguments after the program name. Values follow their flag as the next argument
    /// or after `=` (`--socket=/run/x.sock`).
    public static func parse(_ arguments: [String]) throws(UsageError) -> CommandLineOptions {
        var options = CommandLineOptions()
        var remaining = arguments[...]
        while let argument = remaining.popFirst() {
            var flag = argument
            var inlineValue: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                flag = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            func value() throws(UsageError) -> String {
                if let inlineValue { return inlineValue }
                guard let next = remaining.popFirst() else { throw UsageError("\(flag) needs a value") }
                return next
            }
            func noValue() throws(UsageError) {
                if inlineValue != nil { throw UsageError("\(flag) takes no value") }
            }
            switch flag {
            case "--socket": options.socket = try nonEmpty(value(), flag)
            case "--state-dir": options.stateDirectory = try nonEmpty(value(), flag)
            case "--config": options.config = try nonEmpty(value(), flag)
            case "--memory": try noValue(); options.memory = true
            case "--durability":
                let text = try value()
                guard let durability = Durability(rawValue: text), durability != .memory else {
                    throw UsageError("--durability must be normal or strict (use --memory for memory), not '\(text)'")
                }
                options.durability = durability
            case "--log-level":
                let text = try value()
                guard let level = LogLevel(rawValue: text) else {
                    throw UsageError("--log-level must be debug, info, warn or error, not '\(text)'")
                }
                options.logLevel = level
            case "--cluster":
                let text = try value()
                guard let mode = ClusterMode(rawValue: text) else { throw UsageError("--cluster must be none or etcd, not '\(text)'") }
                options.cluster = mode
            case "--etcd-endpoints":
                let text = try value()
                guard let endpoints = ConfigValues.endpoints(text) else {
                    throw UsageError("--etcd-endpoints must be http:// or https:// URLs, comma-separated, not '\(text)'")
                }
                options.etcdEndpoints = endpoints
            case "--etcd-prefix": options.etcdPrefix = try nonEmpty(value(), flag)
            case "--etcd-cacert": options.etcdCACert = try nonEmpty(value(), flag)
            case "--etcd-cert": options.etcdCert = try nonEmpty(value(), flag)
            case "--etcd-key": options.etcdKey = try nonEmpty(value(), flag)
            case "--etcd-user": options.etcdUser = try nonEmpty(value(), flag)
            case "--etcd-password": options.etcdPassword = try nonEmpty(value(), flag)
            case "--etcd-api":
                let text = try value()
                guard let api = EtcdAPIChoice(rawValue: text) else { throw UsageError("--etcd-api must be grpc or json, not '\(text)'") }
                options.etcdAPI = api
            case "--check": try noValue(); options.check = true
            case "--version": try noValue(); options.version = true
            case "--help", "-h": try noValue(); options.help = true
            default:
                throw UsageError(argument.hasPrefix("-") ? "unknown option '\(argument)'" : "unexpected argument '\(argument)'")
            }
        }
        if options.memory, options.stateDirectory != nil {
            throw UsageError("--state-dir and --memory cannot be used together")
        }
        if options.memory, options.durability != nil {
            throw UsageError("--durability and --memory cannot be used together")
        }
        return options
    }

    private static func nonEmpty(_ text: String, _ flag: String) throws(UsageError) -> String {
        guard !text.isEmpty else { throw UsageError("\(flag) needs a non-empty value") }
        return text
    }
}
