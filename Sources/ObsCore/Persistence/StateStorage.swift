/// A value key as persisted: everything needed to restore it exactly.
public struct StoredKey: Sendable, Equatable {
    public var key: String
    public var value: JSONValue
    public var rev: UInt64
    public var createdRev: UInt64
    public var version: UInt64
    /// Wall-clock expiry (seconds since the epoch) for keys set with `ttl_ms`.
    public var expiresAt: Double?
    /// The owner of an ephemeral key: only a shared log keeps those (cluster mode), where this is
    /// the session that set it on this host, or `StoredKey.remoteOwner` for another host's.
    public var owner: UInt64?

    /// The owner of an ephemeral key set through another host.
    public static let remoteOwner = UInt64.max

    public init(key: String, value: JSONValue, rev: UInt64, createdRev: UInt64, version: UInt64, expiresAt: Double? = nil) {
        self.key = key
        self.value = value
        self.rev = rev
        self.createdRev = createdRev
        self.version = version
        self.expiresAt = expiresAt
    }
}

/// A computed key's definition as persisted; its value is recomputed at start-up.
public struct StoredDefinition: Sendable, Equatable {
    public var key: String
    public var expr: String
    public var createdRev: UInt64

    public init(key: String, expr: String, createdRev: UInt64) {
        self.key = key
        self.expr = expr
        self.createdRev = createdRev
    }
}

/// A binding as persisted, identified by its target.
public struct StoredBinding: Sendable, Equatable {
    public var from: String
    public var to: String
    public var map: String?
    public var twoWay: Bool
    public var unmap: String?

    public init(from: String, to: String, map: String? = nil, twoWay: Bool = false, unmap: String? = nil) {
        self.from = from
        self.to = to
        self.map = map
        self.twoWay = twoWay
        self.unmap = unmap
    }
}

/// Everything a storage holds: what start-up restores.
public struct StoredState: Sendable, Equatable {
    public var rev: UInt64
    public var keys: [StoredKey]
    public var definitions: [StoredDefinition]
    public var bindings: [StoredBinding]
    /// The run of the store that left this state when it stopped cleanly (`StateStorage.beginRun`):
    /// the state its clients saw last, whole (every revision it gave out written, no ephemeral key
    /// left). nil when unknown: a new storage, one that keeps no runs, or one whose last run did not
    /// stop cleanly (then this may name an earlier run, whose revision the state has moved past).
    public var run: UInt64?
    /// `bindings` are in the order they were written (a shared log's records by revision), rather
    /// than by name as a storage that keeps rows by name loads them (`Store.load`).
    public var bindingsInWriteOrder = false

    public init(rev: UInt64 = 0, keys: [StoredKey] = [], definitions: [StoredDefinition] = [], bindings: [StoredBinding] = []) {
        self.rev = rev
        self.keys = keys
        self.definitions = definitions
        self.bindings = bindings
    }
}

/// The persistent effect of one committed transaction. Applied atomically: after any crash it is
/// either entirely there or entirely absent.
public struct StoredTransaction: Sendable, Equatable {
    public var rev: UInt64
    public var putKeys: [StoredKey] = []
    public var deletedKeys: [String] = []
    public var putDefinitions: [StoredDefinition] = []
    public var deletedDefinitions: [String] = []
    /// Bindings are keyed by their target (`to`).
    public var putBindings: [StoredBinding] = []
    public var deletedBindings: [String] = []
    /// Why the keys were deleted, when not by a client: "ttl" or "ephemeral" (cluster mode).
    public var reason: String?

    public init(rev: UInt64) { self.rev = rev }

    /// Whether the transaction changes nothing that is persisted (ephemeral keys only, say).
    public var isEmpty: Bool {
        putKeys.isEmpty && deletedKeys.isEmpty && putDefinitions.isEmpty && deletedDefinitions.isEmpty
            && putBindings.isEmpty && deletedBindings.isEmpty
    }
}

/// How far a storage's durable state trails what was committed to it (`stats`).
public struct WriteLag: Sendable, Equatable {
    /// Revisions committed but not yet written.
    public var revisions: UInt64
    /// How long the oldest of them has waited, in seconds.
    public var seconds: Double
    /// The bytes waiting to be written: what the storage holds in memory for them.
    public var bytes: Int
    /// Whether the last write failed (a full disk): what waits is tried again later.
    public var failing: Bool

    public init(revisions: UInt64 = 0, seconds: Double = 0, bytes: Int = 0, failing: Bool = false) {
        self.revisions = revisions
        self.seconds = seconds
        self.bytes = bytes
        self.failing = failing
    }
}

/// Where the store keeps its state between runs. The store calls it on one thread.
///
/// `commit` makes a transaction survive a crash of the process (written to the database, not
/// necessarily fsynced); `sync` makes everything committed so far survive a crash of the OS. The
/// daemon's durability modes are built from the two: `normal` commits before answering, `strict`
/// also syncs before answering (one sync for many commits: group commit), `memory` uses
/// `MemoryStorage`.
public protocol StateStorage: AnyObject {
    /// The state as last committed (an empty state for a new storage).
    func load() throws(ObsError) -> StoredState
    /// Writes one transaction atomically. The store calls it for every transaction it commits,
    /// also one that changes nothing kept here (`isEmpty`: ephemeral keys only, a computed the
    /// clock re-evaluated), whose revision must still be kept: `load` answers the last revision
    /// committed, so that revisions never go back across a restart.
    func commit(_ transaction: StoredTransaction) throws(ObsError)
    /// Makes every committed transaction durable.
    func sync() throws(ObsError)
    /// Whether commits are kept at all: a storage that drops them (obsd `--memory`) spares the
    /// store building them.
    var keepsCommits: Bool { get }
    /// Checks, between commits, that the files behind the storage are still the ones it opened
    /// (SQLiteStorage: the database and its WAL); the daemon's writer calls it when idle.
    func checkFiles()
    /// How far the durable state trails the commits at monotonic time `now` (`stats`).
    func writeLag(now: Double) -> WriteLag
    /// Commits the transaction that puts one key, given as its name and its value's canonical
    /// encoding (the store's hot path: a storage that keeps bytes need decode nothing).
    func commitKey(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, rev: UInt64, createdRev: UInt64,
                   version: UInt64) throws(ObsError)
    /// Writes a group of committed transactions, given as CommitLog records (the last at `rev`),
    /// atomically as a whole.
    func commitLog(_ records: UnsafeRawBufferPointer, rev: UInt64) throws(ObsError)
    /// Folds what `commitLog` wrote into the storage's tables (SQLiteStorage: its log into its rows;
    /// obsd's log files: the newest handed to the checkpoint thread, which folds it meanwhile).
    func checkpoint() throws(ObsError)
    /// The bytes `commitLog` wrote that no checkpoint has folded yet.
    var logBytes: Int { get }
    /// Called once after `load`, before any commit, with the identity of the store's run that
    /// starts now. A storage that keeps runs stores it when it is closed cleanly, with everything
    /// the run committed written (and only then), so that a later `load` answers it as
    /// `StoredState.run`: that is how a watch resumed `since` a revision of one run is told whether
    /// the next run's state continues it (WatchHub: `RunLineage`). Written at the start instead,
    /// the identity would name states the run never showed whole: a copy of the database taken
    /// while it runs lacks its ephemeral keys, and a crash can leave it behind a revision it sent.
    /// A storage that keeps nothing ignores it.
    func beginRun(_ run: UInt64)
}

extension StateStorage {
    public var keepsCommits: Bool { true }
    public func checkFiles() {}
    public var logBytes: Int { 0 }
    public func checkpoint() throws(ObsError) {}
    public func beginRun(_ run: UInt64) {}

    public func commitKey(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, rev: UInt64, createdRev: UInt64,
                          version: UInt64) throws(ObsError) {
        var transaction = StoredTransaction(rev: rev)
        transaction.putKeys = [StoredKey(key: String(decoding: name, as: UTF8.self), value: (try? JSONValue.parse(value)) ?? .null,
                                         rev: rev, createdRev: createdRev, version: version)]
        try commit(transaction)
    }

    /// A storage without a log commits the records' changes as one transaction.
    public func commitLog(_ records: UnsafeRawBufferPointer, rev: UInt64) throws(ObsError) {
        var replay = CommitLog.Replay()
        do throws(CommitLog.Damage) {
            try CommitLog.replay(records, onto: &replay)
        } catch {
            throw ObsError(.internal, "commit records do not read (at byte \(error.offset))")
        }
        try commit(replay.transaction)
    }
    /// A storage that writes as it commits never trails.
    public func writeLag(now: Double) -> WriteLag { WriteLag() }
}

/// A storage that keeps its state in memory only: for `--memory` and for tests. Commits cost the
/// size of the transaction, not of the state.
public final class MemoryStorage: StateStorage {
    private var rev: UInt64
    private var keys: [String: StoredKey] = [:]
    private var definitions: [String: StoredDefinition] = [:]
    private var bindings: [String: StoredBinding] = [:]

    public init(_ state: StoredState = StoredState()) {
        rev = state.rev
        for key in state.keys { keys[key.key] = key }
        for definition in state.definitions { definitions[definition.key] = definition }
        for binding in state.bindings { bindings[binding.to] = binding }
    }

    /// The state, each list sorted by key name.
    public func load() throws(ObsError) -> StoredState {
        StoredState(
            rev: rev,
            keys: keys.values.sorted { $0.key < $1.key },
            definitions: definitions.values.sorted { $0.key < $1.key },
            bindings: bindings.values.sorted { $0.to < $1.to })
    }

    public func commit(_ transaction: StoredTransaction) throws(ObsError) {
        rev = transaction.rev
        for name in transaction.deletedKeys { keys[name] = nil }
        for key in transaction.putKeys { keys[key.key] = key }
        for name in transaction.deletedDefinitions { definitions[name] = nil }
        for definition in transaction.putDefinitions { definitions[definition.key] = definition }
        for target in transaction.deletedBindings { bindings[target] = nil }
        for binding in transaction.putBindings { bindings[binding.to] = binding }
    }

    public func sync() throws(ObsError) {}
}
