// How the settings are combined, for every setting: command-line flag, then environment
// (OBSD_SOCKET, STATE_DIRECTORY), then the configuration file, then the default (docs/operations.md).
import Glibc

/// The process environment the defaults depend on, injectable for tests.
public struct DaemonEnvironment: Sendable {
    public var variables: [String: String]
    public var uid: UInt32

    public init(variables: [String: String], uid: UInt32) {
        self.variables = variables
        self.uid = uid
    }

    /// This process's environment and effective uid.
    public static var current: DaemonEnvironment {
        var variables: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return DaemonEnvironment(variables: variables, uid: geteuid())
    }

    /// A variable's value, treating an empty one as unset.
    public subscript(name: String) -> String? {
        guard let value = variables[name], !value.isEmpty else { return nil }
        return value
    }

    private var home: String { self["HOME"] ?? "/" }

    /// `/run/obsd/obsd.sock` for root; `$XDG_RUNTIME_DIR/obsd/obsd.sock` or `/tmp/obsd-$UID/obsd.sock`.
    public var defaultSocket: String {
        if uid == 0 { return "/run/obsd/obsd.sock" }
        if let runtime = self["XDG_RUNTIME_DIR"] { return runtime + "/obsd/obsd.sock" }
        return "/tmp/obsd-\(uid)/obsd.sock"
    }

    /// `/var/lib/obsd` for root; `$XDG_STATE_HOME/obsd` or `~/.local/state/obsd`.
    public var defaultStateDirectory: String {
        if uid == 0 { return "/var/lib/obsd" }
        return (self["XDG_STATE_HOME"] ?? home + "/.local/state") + "/obsd"
    }

    /// `/etc/obsd/obsd.conf` for root; `$XDG_CONFIG_HOME/obsd/obsd.conf` or `~/.config/obsd/obsd.conf`.
    public var defaultConfigFile: String {
        if uid == 0 { return "/etc/obsd/obsd.conf" }
        return (self["XDG_CONFIG_HOME"] ?? home + "/.config") + "/obsd/obsd.conf"
    }
}

public enum Configuration {
    /// The settings for `options` in `environment`. `readFile` returns a file's text, nil when it
    /// does not exist, and throws for any other failure.
    public static func resolve(
        _ options: CommandLineOptions, environment: DaemonEnvironment,
        readFile: (String) throws(ConfigError) -> String?
    ) throws(ConfigError) -> Settings {
        var settings = Settings(socket: environment.defaultSocket, stateDirectory: environment.defaultStateDirectory)
        let path = configPath(options, environment: environment)
        if let text = try readFile(path) {
            try ConfigFile.apply(text, path: path, to: &settings)
        } else if options.config != nil {
            throw ConfigError("configuration file \(path) does not exist")
        }
        if let socket = environment["OBSD_SOCKET"] { settings.socket = socket }
        // systemd joins several StateDirectory= entries with ':'; obsd uses the first.
        if let state = environment["STATE_DIRECTORY"] {
            settings.stateDirectory = String(state.split(separator: ":").first ?? Substring(state))
        }
        if let socket = options.socket { settings.socket = socket }
        if let state = options.stateDirectory { settings.stateDirectory = state }
        if options.memory { settings.durability = .memory }
        if let durability = options.durability { settings.durability = durability }
        if let level = options.logLevel { settings.logLevel = level }
        if let mode = options.cluster { settings.cluster = mode }
        if let endpoints = options.etcdEndpoints { settings.etcd.endpoints = endpoints }
        if let prefix = options.etcdPrefix { settings.etcd.prefix = prefix }
        if let file = options.etcdCACert { settings.etcd.caFile = file }
        if let file = options.etcdCert { settings.etcd.certFile = file }
        if let file = options.etcdKey { settings.etcd.keyFile = file }
        if let user = options.etcdUser { settings.etcd.user = user }
        if let api = options.etcdAPI { settings.etcd.api = api }
        if let password = environment["OBSD_ETCD_PASSWORD"] ?? options.etcdPassword { settings.etcd.password = password }
        if settings.cluster == .etcd {
            guard !settings.etcd.endpoints.isEmpty else { throw ConfigError("cluster = etcd needs etcd_endpoints (or --etcd-endpoints)") }
            guard (settings.etcd.certFile == nil) == (settings.etcd.keyFile == nil) else {
                throw ConfigError("etcd_cert and etcd_key go together")
            }
            // The password is meant to come from the environment: a missing one is most often
            // an environment obsd was not given (a unit without its EnvironmentFile=), so say where.
            if let user = settings.etcd.user, settings.etcd.password == nil {
                throw ConfigError("etcd_user \(user) needs a password: OBSD_ETCD_PASSWORD in obsd's environment, "
                                  + "etcd_password or --etcd-password")
            }
            if settings.etcd.user == nil, settings.etcd.password != nil {
                throw ConfigError("an etcd password (etcd_password, --etcd-password or OBSD_ETCD_PASSWORD) needs etcd_user")
            }
        }
        return settings
    }

    /// The file `resolve` reads: `--config`, else the default for the user.
    public static func configPath(_ options: CommandLineOptions, environment: DaemonEnvironment) -> String {
        options.config ?? environment.defaultConfigFile
    }

    /// The largest configuration file read.
    static let maxConfigBytes = 1 << 20

    /// Reads the configuration file whole, under the rules for files obsd reads (SafeFile.swift):
    /// nil when it does not exist. One that sets etcd_password must not be readable by every user.
    public static func readFile(_ path: String) throws(ConfigError) -> String? {
        let contents: SafeFile.Contents
        do throws(UnsafePathError) {
            guard let read = try SafeFile.read(path, role: "configuration file", maxBytes: maxConfigBytes) else { return nil }
            contents = read
        } catch {
            throw ConfigError(error.description)
        }
        guard let text = String(validating: contents.bytes, as: UTF8.self) else {
            throw ConfigError("\(path) is not UTF-8 text")
        }
        var probe = Settings(socket: "", stateDirectory: "")
        if (try? ConfigFile.apply(text, path: path, to: &probe)) != nil, probe.etcd.password != nil {
            do throws(UnsafePathError) {
                try SafeFile.requireSecret(contents.mode, path: contents.path, role: "configuration file",
                                           holding: "it sets etcd_password (or give the password in OBSD_ETCD_PASSWORD)")
            } catch {
                throw ConfigError(error.description)
            }
        }
        return text
    }
}
