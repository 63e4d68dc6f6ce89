// Members dying under the client, each test with a cluster of its own: one member down is nothing
// but a failover; two down (no quorum) is `unavailable` within the timeout, the loop thread never
// waiting for it; and watches cut by either are reported, to be resumed from their last revision.
import EtcdClient
import TestSupport
import XCTest

final class EtcdFailoverTests: XCTestCase {
    /// The member the client talks to is killed (a follower: a leader's death has a window of its
    /// own, see the next test), and the client goes on with the others.
    func test_oneMemberKilled_requestsAndWatchesGoOnThroughAnotherEndpoint() throws {
        let cluster = try startEtcdCluster()
        try cluster.moveLeader(to: 1)
        let driver = try ClientDriver(cluster)
        let prefix = uniquePrefix()
        let watch = driver.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(driver.created(watch))
        XCTAssertEqual(driver.client.currentEndpoint, cluster.endpoints[0])
        let seen = try driver.put(prefix + "k", "before").header.revision
        driver.watchUpdates(watch) { $0.events.count == 1 }

        cluster.kill(0)
        // The watch was served by the member killed: it is cut, and says so.
        guard case .failed(.unavailable)? = driver.watchUpdates(watch, until: { $0.end != nil }).end else {
            return XCTFail("the watch was not reported cut: \(driver.updates[watch] ?? [])")
        }
        var revisions: [Int64] = []
        for index in 0..<20 { revisions.append(try driver.put(prefix + "k", "after \(index)").header.revision) }
        XCTAssertNotEqual(driver.client.currentEndpoint, cluster.endpoints[0])
        XCTAssertTrue(cluster.endpoints.contains(driver.client.currentEndpoint))

        // Watching again from the revision after the last one seen misses nothing.
        let resumed = driver.client.watch(.prefix(bytes(prefix), startRevision: seen + 1))
        let events = driver.watchUpdates(resumed) { $0.events.count >= revisions.count }.events
        XCTAssertEqual(events.map(\.revision), revisions)

        try cluster.restart(0)
        XCTAssertEqual(try driver.range(RangeRequest(key: bytes(prefix + "k"))).kvs.map { text($0.value) }, ["after 19"])
    }

    /// The leader is killed. Writes sent to a follower before it notices are forwarded to the dead
    /// leader and lost by etcd: they fail `unavailable` at their deadline (they cannot be known
    /// not to be applied). Writes sent once the followers know there is no leader are refused
    /// "no leader" at once, which the client retries until a new leader is elected: they succeed.
    func test_leaderKilled_writesAfterTheFollowersNotice_waitForTheNewLeader() throws {
        let cluster = try startEtcdCluster()
        try cluster.moveLeader(to: 0)
        let driver = try ClientDriver(cluster) { $0.requestTimeout = .seconds(20) }
        let prefix = uniquePrefix()
        let watch = driver.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(driver.created(watch))
        cluster.kill(0)
        var written: [Int64] = []
        for index in 0..<20 {
            let id = driver.client.submit(.put(PutRequest(key: bytes(prefix + "k"), value: bytes("\(index)"))))
            switch driver.result(id, timeout: 40) {
            case .success(let response)?: written.append(response.header.revision)
            case .failure(.unavailable)?: XCTAssertTrue(written.isEmpty, "only writes before the election may fail")
            case let other: XCTFail("unexpected \(String(describing: other))")
            }
        }
        XCTAssertGreaterThanOrEqual(written.count, 19, "at most the first write falls in the window")
        XCTAssertNotNil(try cluster.leader())
    }

    func test_quorumLost_requestsFailUnavailableWithinTheTimeout_withoutBlockingTheCaller() throws {
        let cluster = try startEtcdCluster()
        let timeout = 2.0
        let driver = try ClientDriver(cluster) { $0.requestTimeout = .seconds(timeout) }
        let prefix = uniquePrefix()
        let watch = driver.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(driver.created(watch))
        let last = try driver.put(prefix + "k", "before").header.revision

        cluster.kill(1)
        cluster.kill(2)
        // Twenty writes submitted in a row: a client that waited for etcd would take the timeout
        // for each; this one only queues them.
        let submitted = Date()
        let ids = (0..<20).map { driver.client.submit(.put(PutRequest(key: bytes(prefix + "k"), value: bytes("lost \($0)")))) }
        XCTAssertLessThan(Date().timeIntervalSince(submitted), timeout / 2, "submit waited for etcd")
        for id in ids {
            guard case .failure(.unavailable(let message))? = driver.result(id, timeout: timeout + 10) else {
                return XCTFail("expected unavailable, got \(String(describing: driver.responses[id]))")
            }
            XCTAssertTrue(message.contains("127.0.0.1"), "the message names the endpoints: \(message)")
        }
        // Within the timeout (plus scheduling slack on a loaded machine).
        XCTAssertLessThan(Date().timeIntervalSince(submitted), timeout + 5)

        // The surviving member ends the watch once it has no leader ("require leader").
        guard case .failed(.unavailable)? = driver.watchUpdates(watch, until: { $0.end != nil }).end else {
            return XCTFail("the watch was not reported cut: \(driver.updates[watch] ?? [])")
        }

        try cluster.restart([1, 2])
        let after = try driver.put(prefix + "k", "after").header.revision
        let resumed = driver.client.watch(.prefix(bytes(prefix), startRevision: last + 1))
        let events = driver.watchUpdates(resumed) { $0.events.count >= 1 }.events
        // None of the refused writes was applied behind the client's back.
        XCTAssertEqual(events.map(\.revision), [after])
        XCTAssertEqual(events.map { text($0.kv.value) }, ["after"])
    }
}
