/// Where transactions are decided when several hosts share one state (cluster mode).
///
/// Each host's store runs a write against the state it has applied, takes it back, and proposes
/// what it would change; the log decides the order of all proposals, and every host applies every
/// decided transaction (`Store.apply`), in the log's order, with the log's revision. So every host
/// evaluates its computeds and feeds its watches from the same sequence of transactions.
public protocol SharedLog: AnyObject {
    /// Asks the log to commit `proposal`. `decided` is called once, on the store's thread: with
    /// `.committed(rev)` once this host's store has applied that revision, with `.superseded(rev)`
    /// when a key the proposal depends on changed first (once the store has applied `rev`, so
    /// that running the write again sees the change), with `.retry` when the log could not take
    /// it for a reason that has passed (a lease its ephemeral keys need was renewed), or with
    /// `.failed` (the log cannot be reached: `unavailable`).
    func propose(_ proposal: Proposal, _ decided: @escaping (Decision) -> Void)

    /// Sends a channel message to the watches of every host; `done` gets the number of watches on
    /// this host it was queued for.
    func publish(channel: String, payload: JSONValue, _ done: @escaping (Result<Int, ObsError>) -> Void)

    /// What `stats` shows of the log, under `cluster`.
    var stats: [(String, JSONValue)] { get }
}

extension SharedLog {
    public var stats: [(String, JSONValue)] { [] }
}

/// What a store proposes to a shared log.
public struct Proposal: Sendable {
    /// The persisted state the transaction changes (its `rev` is the log's to give), ephemeral
    /// keys included, with `reason` for deletes that no client asked for.
    public var changes: StoredTransaction
    /// Keys whose state decided the outcome: the log commits only if none of them changed since
    /// this host applied it (compare-and-set, increments, expiry, ephemeral removal).
    public var depends: [String] = []

    public init(changes: StoredTransaction, depends: [String] = []) {
        self.changes = changes
        self.depends = depends
    }

    /// Nothing to write and nothing to check: no need to ask the log.
    public var isEmpty: Bool { changes.isEmpty && depends.isEmpty }

    /// One value key written blindly: nothing else changes, nothing is depended on, no binding
    /// fired where it was proposed. A log may commit it without comparing the bindings its host
    /// had applied (etcd: a put, far cheaper for etcd 3.4 than a transaction with compares); every
    /// host then applies it with `Store.apply(_:bindingsUnseen:)` true if bindings changed between
    /// what its proposer had applied and its revision.
    public var isPlainWrite: Bool {
        depends.isEmpty && changes.putKeys.count == 1 && changes.deletedKeys.isEmpty && changes.putDefinitions.isEmpty
            && changes.deletedDefinitions.isEmpty && changes.putBindings.isEmpty && changes.deletedBindings.isEmpty
            && changes.reason == nil
    }
}

/// A shared log's answer to a proposal.
public enum Decision: Sendable {
    case committed(rev: UInt64)
    /// A key the proposal depends on changed first: the write lost a race, and runs again.
    case superseded(rev: UInt64)
    /// The log took nothing, for a reason that has passed (`because`, as a client may read it
    /// when the write's time runs out before it can run again): the write runs again, having
    /// lost no race.
    case retry(rev: UInt64, because: String)
    case failed(ObsError)
}
