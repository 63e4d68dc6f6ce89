// Members dying under the client, each test with a cluster of its own: one member down is nothing
// but a failover; two down (no quorum) is `unavailable` within the timeout, the loop thread never
// waiting for it; and watches cut by either are reported, to be resumed from their last revision.
@testable import EtcdClient
import TestSupport
import XCTest

class EtcdFailoverTests: APITestCase {
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

    /// The leader is killed. A write sent to a follower before it notices is forwarded to the
    /// dead leader and lost by etcd: it fails `unavailable` at its deadline (it cannot be known
    /// not to be applied). Writes sent once the followers know there is no leader are refused
    /// "no leader" at once, which the client retries until a new leader is elected.
    func test_leaderKilled_onlyWritesBeforeTheElectionFail() throws {
        let cluster = try startEtcdCluster()
        try cluster.moveLeader(to: 0)
        let driver = try ClientDriver(cluster) { $0.requestTimeout = .seconds(3) }
        let prefix = uniquePrefix()
        cluster.kill(0)
        var outcomes: [Bool] = []
        for index in 0..<20 {
            switch driver.perform(.put(PutRequest(key: bytes(prefix + "k"), value: bytes("\(index)"))), timeout: 30) {
            case .success?: outcomes.append(true)
            case .failure(.unavailable)?: outcomes.append(false)
            case let other: return XCTFail("unexpected \(String(describing: other))")
            }
        }
        XCTAssertEqual(outcomes, outcomes.sorted { !$0 && $1 }, "a write failed after one succeeded: \(outcomes)")
        XCTAssertGreaterThanOrEqual(outcomes.filter { $0 }.count, 15)
        XCTAssertNotNil(try cluster.leader())
    }

    /// A write sent over a connection the client reused from its pool (libcurl reports no connect
    /// time for it) to a member that then answers nothing may have reached that member: it fails
    /// saying so, and is not sent to another member, which could apply it a second time.
    func test_aWriteSentOverAPooledConnection_isNotSentAgain() throws {
        let cluster = try startEtcdCluster()
        try cluster.moveLeader(to: 1)
        let driver = try ClientDriver(cluster) { $0.requestTimeout = .seconds(2) }
        let prefix = uniquePrefix()
        _ = try driver.put(prefix + "k", "before")
        XCTAssertEqual(driver.client.currentEndpoint, cluster.endpoints[0], "member 0 answered: its connection is pooled")

        cluster.pause(0)
        defer { cluster.resume(0) }
        let outcome = driver.perform(.put(PutRequest(key: bytes(prefix + "k"), value: bytes("during"))), timeout: 30)
        guard case .failure(.unavailable(let message, mayHaveBeenApplied: true))? = outcome else {
            return XCTFail("expected unavailable, may have been applied; got \(String(describing: outcome))")
        }
        XCTAssertTrue(message.contains("may have been applied"), message)
        for other in cluster.endpoints.dropFirst() {
            XCTAssertFalse(message.contains(other), "sent again to \(other): \(message)")
        }
    }

    /// The member behind an idle pooled connection goes away, closing it. The client keeps a pooled
    /// connection's socket in its epoll set (MultiSocket.swift): the close makes that socket
    /// readable, and the client must take it out rather than wake its caller on every turn, idle as
    /// it is. The next request still goes through: libcurl finds the connection dead and makes a new
    /// one. A second client submits at once, before its loop has heard of the close: libcurl closes
    /// the dead socket itself, and with every lower descriptor number taken, each socket it makes
    /// next (to the dead member, refused; to the next member) gets that number again, which the
    /// client's epoll set must not mistake for the one it had.
    func test_aPooledConnectionClosedByTheMember_doesNotKeepTheLoopAwake_andTheNextRequestWorks() throws {
        let cluster = try startEtcdCluster()
        try cluster.moveLeader(to: 1)
        let idle = try ClientDriver(cluster)
        let eager = try ClientDriver(cluster)
        let prefix = uniquePrefix()
        for driver in [idle, eager] {
            _ = try driver.put(prefix + "k", "before")
            XCTAssertEqual(driver.client.currentEndpoint, cluster.endpoints[0], "member 0 answered: its connection is pooled")
        }

        cluster.kill(0)
        let fillers = takeFreeDescriptorNumbers()
        defer { for filler in fillers { close(filler) } }
        _ = try eager.put(prefix + "k", "eager")

        // A second of idling as the daemon's loop does: wait for the descriptor, take what is
        // there. Readable at most for a deadline that passed (the timer set for the last
        // request), not on every turn.
        var wakeups = 0
        let cpuBefore = processCPUSeconds()
        let end = Date().addingTimeInterval(1)
        while Date() < end {
            var descriptor = pollfd(fd: idle.client.completionFD, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, 100) > 0 { wakeups += 1 }
            _ = idle.client.takeCompletions()
        }
        XCTAssertLessThan(wakeups, 5, "the client's descriptor stayed readable while idle")
        XCTAssertLessThan(processCPUSeconds() - cpuBefore, 0.5, "CPU spent idling")

        _ = try idle.put(prefix + "k", "after")
        XCTAssertEqual(try idle.range(RangeRequest(key: bytes(prefix + "k"))).kvs.map { text($0.value) }, ["after"])
        XCTAssertTrue(cluster.endpoints.dropFirst().contains(idle.client.currentEndpoint))
    }

    /// A member restarted while the client kept an idle connection to it: the next request finds
    /// that connection dead and goes to the same member over a new one, applied once. Over gRPC on
    /// plain TCP, libcurl first sends such a request in HTTP/1.1 (the member's 404 does nothing)
    /// and the client sends it again with HTTP/2's prior knowledge.
    func test_aMemberRestarted_theNextRequestGoesToItOverANewConnection_once() throws {
        let cluster = try startEtcdCluster()
        try cluster.moveLeader(to: 1)
        let driver = try ClientDriver(cluster)
        let prefix = uniquePrefix()
        _ = try driver.put(prefix + "k", "before")
        XCTAssertEqual(driver.client.currentEndpoint, cluster.endpoints[0])

        cluster.stop(0)
        try cluster.restart(0)
        _ = try driver.put(prefix + "k", "after")
        XCTAssertEqual(driver.client.currentEndpoint, cluster.endpoints[0], "the restarted member answered")
        XCTAssertEqual(try driver.range(RangeRequest(key: bytes(prefix + "k"))).kvs.first?.version, 2, "the put applied once")
        if Self.api == .grpc {
            XCTAssertEqual(driver.client.driver.http1Answers, 1, "sent in HTTP/1.1 first, then with prior knowledge")
        }
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
        // A write that reached a member and got no answer may still be applied (a leader that lost
        // its quorum keeps what it appended, and commits it when the quorum returns): its failure
        // says so. A write refused or never delivered says nothing of the kind, and is never applied.
        var mayBeApplied: Set<String> = []
        for (index, id) in ids.enumerated() {
            guard case .failure(.unavailable(let message, let mayHaveBeenApplied))? = driver.result(id, timeout: timeout + 10) else {
                return XCTFail("expected unavailable, got \(String(describing: driver.responses[id]))")
            }
            XCTAssertTrue(message.contains("127.0.0.1"), "the message names the endpoints: \(message)")
            XCTAssertEqual(message.contains("may have been applied"), mayHaveBeenApplied, message)
            if mayHaveBeenApplied { mayBeApplied.insert("lost \(index)") }
        }
        // Within the timeout (plus scheduling slack on a loaded machine).
        XCTAssertLessThan(Date().timeIntervalSince(submitted), timeout + 5)

        // The surviving member ends the watch once it has no leader ("require leader").
        guard case .failed(.unavailable)? = driver.watchUpdates(watch, until: { $0.end != nil }).end else {
            return XCTFail("the watch was not reported cut: \(driver.updates[watch] ?? [])")
        }

        // A write with time to spare waits out the outage: refused "no leader" by the member
        // left, and by nobody at the others, it is tried again round after round until the
        // quorum is back.
        let patient = driver.client.submit(.put(PutRequest(key: bytes(prefix + "k"), value: bytes("after"))),
                                           timeout: .seconds(60))
        try cluster.restart([1, 2])
        guard case .success(let response)? = driver.result(patient, timeout: 70) else {
            return XCTFail("the write did not wait for the quorum: \(String(describing: driver.responses[patient]))")
        }
        let after = response.header.revision
        let resumed = driver.client.watch(.prefix(bytes(prefix), startRevision: last + 1))
        let applied = driver.watchUpdates(resumed) { $0.events.last?.revision == after }.events
        // None of the writes refused for certain was applied behind the client's back, and the
        // patient write came last.
        let values = applied.map { text($0.kv.value) }
        XCTAssertEqual(values.last, "after")
        XCTAssertEqual(applied.last?.revision, after)
        for value in values.dropLast() {
            XCTAssertTrue(mayBeApplied.contains(value), "\(value) was refused for certain, yet applied")
        }
    }
}

/// The CPU time the test process has used, user and system.
private func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1_000_000 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// Takes every free descriptor number below the highest in use, so that a socket made next gets
/// the number of the one closed before it.
private func takeFreeDescriptorNumbers() -> [Int32] {
    let highest = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap { Int32($0) }.max() ?? 0
    var taken: [Int32] = []
    while true {
        let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0, descriptor < highest else {
            if descriptor >= 0 { close(descriptor) }
            return taken
        }
        taken.append(descriptor)
    }
}

/// Every test above again, over etcd's JSON gateway (`etcd_api = json`). Each is named here:
/// XCTest on Linux finds a test class by the test methods it declares, not those it inherits.
final class EtcdFailoverTestsOverTheGateway: EtcdFailoverTests {
    override class var api: EtcdAPI { .json }

    override func test_oneMemberKilled_requestsAndWatchesGoOnThroughAnotherEndpoint() throws { try super.test_oneMemberKilled_requestsAndWatchesGoOnThroughAnotherEndpoint() }
    override func test_leaderKilled_onlyWritesBeforeTheElectionFail() throws { try super.test_leaderKilled_onlyWritesBeforeTheElectionFail() }
    override func test_aWriteSentOverAPooledConnection_isNotSentAgain() throws { try super.test_aWriteSentOverAPooledConnection_isNotSentAgain() }
    override func test_aPooledConnectionClosedByTheMember_doesNotKeepTheLoopAwake_andTheNextRequestWorks() throws { try super.test_aPooledConnectionClosedByTheMember_doesNotKeepTheLoopAwake_andTheNextRequestWorks() }
    override func test_aMemberRestarted_theNextRequestGoesToItOverANewConnection_once() throws { try super.test_aMemberRestarted_theNextRequestGoesToItOverANewConnection_once() }
    override func test_quorumLost_requestsFailUnavailableWithinTheTimeout_withoutBlockingTheCaller() throws { try super.test_quorumLost_requestsFailUnavailableWithinTheTimeout_withoutBlockingTheCaller() }
}
