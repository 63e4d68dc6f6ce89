/// The store's limits and settings (config/obsd.conf.example explains each), each a named constant with its default.
public struct StoreConfiguration: Sendable {
    /// Largest encoded value a key may hold: `too_large` beyond it.
    public var maxValueBytes = 1 << 20
    /// Longest expression text (define, map, unmap, eval): `too_large` beyond it.
    public var maxExpressionBytes = 64 << 10
    /// Watches one connection may hold: `limit` beyond it.
    public var maxWatchesPerConnection = 1024
    /// Revisions whose changes are kept for `since`.
    public var historyRevisions = 10_000
    /// Bytes of changes (keys and values) kept for `since`: the oldest revisions go first.
    public var historyBytes = 64 << 20
    /// Unsent bytes on a connection past which its watches stop queuing events (overflow).
    public var maxOutputBytes = 8 << 20
    /// Deepest JSON nesting a request may have: `bad_json` beyond it.
    public var maxJSONDepth = 128
    /// Longest request line: `too_large`, then the connection closes.
    public var maxLineBytes = 1 << 20
    /// Most bytes of `restore` parts (`more: true`) held for every connection together before
    /// their last parts: `too_large` beyond it, and that connection's parts are dropped.
    public var maxRestoreBytes = 256 << 20
    /// Seconds between re-evaluations of computeds that read the clock.
    public var timeRefreshInterval = 1.0
    /// Cluster mode: how long a write that keeps losing races with other hosts for the same keys
    /// is run again before it fails `unavailable` (the daemon sets its etcd_timeout).
    public var proposalRetrySeconds = 5.0
    /// What `hello` reports as `version`.
    public var serverVersion = "0.1.0"
    /// What `stats` reports as `durability` ("normal", "strict" or "memory"): the daemon sets it.
    public var durability = "memory"

    public init() {}
}
