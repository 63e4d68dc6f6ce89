import ObsCore

/// Cluster mode's storage, as the store sees it: the state read from etcd at start-up, and nothing
/// kept afterwards (etcd holds every decided transaction; the store never commits one here).
final class LoadedState: StateStorage {
    private let state: StoredState

    init(_ state: StoredState) {
        self.state = state
    }

    func load() throws(ObsError) -> StoredState { state }
    func commit(_ transaction: StoredTransaction) throws(ObsError) {}
    func sync() throws(ObsError) {}
    var keepsCommits: Bool { false }
}
