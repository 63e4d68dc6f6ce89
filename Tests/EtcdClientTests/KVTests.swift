import EtcdClient
import TestSupport
import XCTest

final class KVTests: XCTestCase {
    func test_smoke() throws {
        let cluster = try startEtcdCluster()
        let driver = try ClientDriver(cluster)
        let put = try driver.put("/a", "1")
        XCTAssertGreaterThan(put.header.revision, 1)
        let range = try driver.range(.prefix(bytes("/")))
        XCTAssertEqual(range.kvs.map { text($0.value) }, ["1"])
        let watch = driver.client.watch(.prefix(bytes("/"), startRevision: 1, prevKV: true))
        _ = try driver.put("/a", "2")
        let updates = driver.watchUpdates(watch) { $0.events.count == 2 }
        print(updates)
    }
}
