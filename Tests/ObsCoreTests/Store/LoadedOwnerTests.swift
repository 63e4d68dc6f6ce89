@testable import ObsCore
import XCTest

/// Cluster mode: a host that starts reads etcd's state, other hosts' ephemeral keys included
/// (`StoredKey.remoteOwner`). It holds them as the hosts that applied their puts do.
final class LoadedOwnerTests: XCTestCase {
    func test_anotherHostsEphemeralKey_loaded_keepsItsOwner_andDumpLeavesItOut() throws {
        var ephemeral = StoredKey(key: "e", value: 7, rev: 2, createdRev: 2, version: 1)
        ephemeral.owner = StoredKey.remoteOwner
        let state = StoredState(rev: 3, keys: [StoredKey(key: "k", value: 1, rev: 3, createdRev: 3, version: 1), ephemeral])
        let store = try Store(storage: MemoryStorage(state), clock: ManualClock())
        XCTAssertEqual(store.view("e")?.owner, StoredKey.remoteOwner)
        XCTAssertEqual(store.view("e")?.content.value, 7)
        let keys = store.dump().first { $0.0 == "keys" }?.1
        XCTAssertEqual(keys?.arrayValue?.compactMap { $0.objectValue?["key"]?.stringValue }, ["k"], "\(String(describing: keys))")
    }
}
