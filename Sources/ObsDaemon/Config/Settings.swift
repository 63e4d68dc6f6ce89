import ObsCore

/// Where acknowledged writes go (docs/operations.md, Durability).
public enum Durability: String, Sendable, CaseIterable {
    case normal, strict, memory
}

/// The least severe log level written.
public enum LogLevel: String, Sendable, CaseIterable, Comparable {
    case debug, info, warn, error

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// One entry of the `allow` setting: `user:NAME:ACCESS` or `group:NAME:ACCESS`.
public struct AllowRule: Sendable, Equatable {
    public enum Subject: Sendable, Equatable {
        case user(String)
        case group(String)
    }

    public var subject: Subject
    public var access: Access

    public init(_ subject: Subject, _ access: Access) {
        self.subject = subject
        self.access = access
    }
}

/// Every limit a client could push against, with its default (config/obsd.conf.example explains each).
public struct Limits: Sendable, Equatable {
    /// A request line longer than this answers `too_large` and closes the connection.
    public var maxLineBytes = 1 << 20
    /// JSON nesting deeper than this is `bad_json`.
    public var maxJSONDepth = 128
    /// A value whose encoding is longer than this is `too_large`.
    public var maxValueBytes = 1 << 20
    /// An expression longer than this is `too_large`.
    public var maxExpressionBytes = 64 << 10
    /// Connections beyond this get one `limit` error line and are closed.
    public var maxConnections = 1024
    /// Watches per connection beyond this answer `limit`.
    public var maxWatches = 1024
    /// Past this many unsent bytes a connection's watches stop queuing events (overflow).
    public var outputBufferBytes = 8 << 20
    /// A connection over its output limit that reads nothing for this long is disconnected.
    public var clientTimeout: Double = 60
    /// Revisions of history kept for `since`.
    public var history = 10_000
    /// Bytes of history kept for `since` (keys and values); the oldest revisions go first.
    public var historyBytes = 64 << 20
    /// Bytes of `restore` parts held for every connection together (`too_large` beyond).
    public var maxRestoreBytes = 256 << 20

    public init() {}
}

/// Where the state lives: on this host alone, or shared by every host through etcd.
public enum ClusterMode: String, Sendable, CaseIterable {
    case none
    case etcd
}

/// Cluster mode's settings (docs/operations.md, "Cluster mode").
public struct ClusterSettings: Sendable, Equatable {
    /// etcd's client URLs, tried in turn.
    public var endpoints: [String] = []
    /// Where obsd's records live in etcd's key space.
    public var prefix = "/obsd/"
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    public var user: String?
    public var password: String?
    /// How long a write may wait for etcd before it fails with `unavailable`.
    public var timeout: Double = 5
    /// The TTL of this host's lease, in seconds: how long its ephemeral keys outlive it.
    public var ephemeralTTL: Int64 = 10
    /// How the host talks to etcd: its gRPC API (HTTP/2), or its JSON gateway (HTTP/1.1).
    public var api = EtcdAPIChoice.grpc

    public init() {}
}

/// `etcd_api`: etcd's gRPC API, or its JSON gateway for a path to etcd that carries only HTTP/1.1.
public enum EtcdAPIChoice: String, Sendable, CaseIterable {
    case grpc, json
}

/// The daemon's complete configuration, after flags, environment, file and defaults are combined.
public struct Settings: Sendable, Equatable {
    public var socket: String
    /// The socket's permission bits, set before the first accept.
    public var socketMode: UInt32 = 0o600
    /// A group name or number given the socket (and the directory, read and search).
    public var socketGroup: String?
    public var stateDirectory: String
    public var durability: Durability = .normal
    public var logLevel: LogLevel = .info
    public var allow: [AllowRule] = []
    /// A definitions file (docs/cli.md) applied at start and on reload.
    public var definitions: String?
    public var limits = Limits()
    public var cluster = ClusterMode.none
    public var etcd = ClusterSettings()

    public init(socket: String, stateDirectory: String) {
        self.socket = socket
        self.stateDirectory = stateDirectory
    }

    /// The SQLite database inside the state directory.
    public var databasePath: String { stateDirectory + "/obsd.db" }
}
