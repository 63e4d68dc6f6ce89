import ObsCore

/// Wraps the daemon's storage to give `strict` mode its group commit: commits only mark the
/// storage dirty, and the daemon syncs once per loop turn, after handling every request of the
/// turn and before writing any response or event. So many acknowledged writes share one fsync, and
/// none is acknowledged before it. In `normal` mode `syncIfNeeded` does nothing: each commit is
/// already written when the store answers.
final class GroupCommitStorage: StateStorage {
    private let inner: any StateStorage
    private let strict: Bool
    private var unsynced = false

    init(_ inner: any StateStorage, strict: Bool) {
        self.inner = inner
        self.strict = strict
    }

    func load() throws(ObsError) -> StoredState { try inner.load() }

    func commit(_ transaction: StoredTransaction) throws(ObsError) {
        try inner.commit(transaction)
        if strict { unsynced = true }
    }

    func sync() throws(ObsError) {
        try inner.sync()
        unsynced = false
    }

    /// fsyncs what was committed since the last sync, if anything.
    func syncIfNeeded() throws(ObsError) {
        guard unsynced else { return }
        try sync()
    }
}
