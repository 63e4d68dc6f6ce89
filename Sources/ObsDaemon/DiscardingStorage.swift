import ObsCore

/// The storage behind `--memory`: commits are dropped. `MemoryStorage` would keep a second copy of
/// every key for a `load` that a daemon never calls again after start-up (with a million keys,
/// about a fifth of the daemon's resident size, and a dictionary update per write).
final class DiscardingStorage: StateStorage {
    func load() throws(ObsError) -> StoredState { StoredState() }
    func commit(_ transaction: StoredTransaction) throws(ObsError) {}
    func sync() throws(ObsError) {}
}
