// The client's limits, each crossed: an answer or a watch message over the byte bound is an
// error (never unbounded growth), and a configuration that cannot work is refused up front.
import EtcdClient
import TestSupport
import XCTest

class EtcdBoundsTests: APITestCase {
    func test_answerOverTheBound_isResponseTooLarge_andTheClientGoesOn() throws {
        let cluster = try SharedCluster.get()
        let prefix = uniquePrefix()
        let writer = try ClientDriver(cluster)
        for index in 0..<8 { _ = try writer.put(prefix + "k\(index)", String(repeating: "x", count: 1024)) }

        let bounded = try ClientDriver(cluster) { $0.maxResponseBytes = 4096 }
        guard case .failure(.responseTooLarge(let limit))? = bounded.perform(.range(.prefix(bytes(prefix)))) else {
            return XCTFail("expected responseTooLarge, got \(String(describing: bounded.responses.values.first))")
        }
        XCTAssertEqual(limit, 4096)
        // Under the bound, the same client answers.
        XCTAssertEqual(try bounded.range(.prefix(bytes(prefix), countOnly: true)).count, 8)
    }

    func test_watchMessageOverTheBound_endsTheWatch() throws {
        let cluster = try SharedCluster.get()
        let prefix = uniquePrefix()
        let bounded = try ClientDriver(cluster) { $0.maxResponseBytes = 2048 }
        let watch = bounded.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(bounded.created(watch))
        _ = try bounded.put(prefix + "small", "x")
        _ = try bounded.put(prefix + "large", String(repeating: "x", count: 4096))
        let updates = bounded.watchUpdates(watch) { $0.end != nil }
        XCTAssertEqual(updates.events.map { text($0.kv.key) }, [prefix + "small"])
        guard case .failed(.responseTooLarge(2048))? = updates.end else { return XCTFail("\(updates)") }
    }

    /// More requests at once than `maxConcurrentRequests`: the rest wait, so the client never has
    /// more under way (each has a connection of its own), and every one is answered.
    func test_requestsBeyondTheBound_waitTheirTurn_andAreAllAnswered() throws {
        let cluster = try SharedCluster.get()
        let prefix = uniquePrefix()
        let bounded = try ClientDriver(cluster) { $0.maxConcurrentRequests = 3 }
        let ids = (0..<40).map { bounded.client.submit(.put(PutRequest(key: bytes(prefix + "k\($0)"), value: bytes("v")))) }
        XCTAssertEqual(bounded.client.requestsUnderWay.sent, 3)
        XCTAssertEqual(bounded.client.requestsUnderWay.waiting, 37)
        var mostSent = 0
        bounded.wait("40 answers") {
            mostSent = max(mostSent, bounded.client.requestsUnderWay.sent)
            return ids.allSatisfy { bounded.responses[$0] != nil }
        }
        XCTAssertLessThanOrEqual(mostSent, 3)
        for id in ids {
            guard case .success(.put)? = bounded.responses[id] else { return XCTFail("\(id): \(String(describing: bounded.responses[id]))") }
        }
        XCTAssertEqual(bounded.client.requestsUnderWay.sent, 0)
        XCTAssertEqual(bounded.client.requestsUnderWay.waiting, 0)
        XCTAssertEqual(try bounded.range(.prefix(bytes(prefix), countOnly: true)).count, 40)
    }

    /// A request waiting for a turn fails `unavailable` at its own deadline, saying it was not
    /// sent, when the requests under way do not finish (an endpoint that takes connections and
    /// never answers: a socket that listens and never accepts).
    func test_requestWaitingPastItsDeadline_failsUnavailable_notSent() throws {
        let (listener, endpoint) = try silentEndpoint()
        defer { close(listener) }
        var configuration = EtcdConfiguration(endpoints: [endpoint])
        configuration.api = Self.api
        configuration.maxConcurrentRequests = 1
        configuration.requestTimeout = .milliseconds(500)
        let driver = try ClientDriver(configuration)
        let ids = (0..<3).map { _ in driver.client.submit(.status) }
        XCTAssertEqual(driver.client.requestsUnderWay.sent, 1)
        XCTAssertEqual(driver.client.requestsUnderWay.waiting, 2)
        driver.wait("3 answers") { ids.allSatisfy { driver.responses[$0] != nil } }
        for (index, id) in ids.enumerated() {
            guard case .failure(.unavailable(let reason, _))? = driver.responses[id] else {
                return XCTFail("\(id): \(String(describing: driver.responses[id]))")
            }
            XCTAssertEqual(reason.contains("not sent"), index > 0, reason)
        }
        XCTAssertEqual(driver.client.requestsUnderWay.sent, 0)
        XCTAssertEqual(driver.client.requestsUnderWay.waiting, 0)
    }

    /// A waiting request's deadline is kept while the request ahead of it is still under way: it
    /// fails at its own deadline, not when a turn comes.
    func test_requestWaitingBehindASlowOne_failsAtItsOwnDeadline() throws {
        let (listener, endpoint) = try silentEndpoint()
        defer { close(listener) }
        var configuration = EtcdConfiguration(endpoints: [endpoint])
        configuration.api = Self.api
        configuration.maxConcurrentRequests = 1
        let driver = try ClientDriver(configuration)
        let slow = driver.client.submit(.status, timeout: .seconds(60))
        let waiting = (0..<2).map { _ in driver.client.submit(.status, timeout: .milliseconds(300)) }
        XCTAssertEqual(driver.client.requestsUnderWay.waiting, 2)
        // Waits on the completion descriptor alone, as the daemon's loop does (ClientDriver.wait
        // would also look every 0.2 s).
        let start = Date()
        while !waiting.allSatisfy({ driver.responses[$0] != nil }), Date().timeIntervalSince(start) < 30 {
            driver.pump(timeout: 30)
        }
        for id in waiting {
            guard case .failure(.unavailable(let reason, _))? = driver.responses[id] else {
                return XCTFail("\(id): \(String(describing: driver.responses[id]))")
            }
            XCTAssertTrue(reason.contains("not sent"), reason)
        }
        XCTAssertNil(driver.responses[slow], "the request under way is still waiting for its answer")
        XCTAssertEqual(driver.client.requestsUnderWay.sent, 1)
        XCTAssertEqual(driver.client.requestsUnderWay.waiting, 0)
    }

    /// A plain-HTTP endpoint that takes connections and never answers: a socket that listens and
    /// never accepts.
    private func silentEndpoint() throws -> (Int32, String) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(listener, 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && listen(listener, 8) == 0
                && getsockname(listener, $0, &length) == 0 }
        }
        XCTAssertTrue(bound)
        return (listener, "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))")
    }

    func test_configurationThatCannotWork_isRefused() {
        func refused(_ change: (inout EtcdConfiguration) -> Void) -> Bool {
            var configuration = EtcdConfiguration(endpoints: ["http://127.0.0.1:2379"])
            change(&configuration)
            do {
                _ = try EtcdClient(configuration)
                return false
            } catch {
                if case .invalidConfiguration = error { return true }
                return false
            }
        }
        XCTAssertTrue(refused { $0.endpoints = [] })
        XCTAssertTrue(refused { $0.endpoints = ["127.0.0.1:2379"] })
        XCTAssertTrue(refused { $0.endpoints = ["unix:///run/etcd.sock"] })
        XCTAssertTrue(refused { $0.certFile = "/tmp/cert.pem" })
        XCTAssertTrue(refused { $0.password = "secret" })
        XCTAssertTrue(refused { $0.requestTimeout = .zero })
        XCTAssertTrue(refused { $0.maxResponseBytes = 0 })
        XCTAssertTrue(refused { $0.maxConcurrentRequests = 0 })
        XCTAssertFalse(refused { _ in })
    }

    func test_closedClient_answersClosedAtOnce() throws {
        let client = try EtcdClient(EtcdConfiguration(endpoints: ["http://127.0.0.1:1"]))
        client.close()
        let request = client.submit(.status)
        let watch = client.watch(.prefix(bytes("/")))
        var descriptor = pollfd(fd: client.completionFD, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&descriptor, 1, 10_000), 1)
        XCTAssertEqual(client.takeCompletions(), [.response(request, .failure(.closed)), .watch(watch, .failed(.closed))])
    }
}

/// Every test above again, over etcd's JSON gateway (`etcd_api = json`). Each is named here:
/// XCTest on Linux finds a test class by the test methods it declares, not those it inherits.
final class EtcdBoundsTestsOverTheGateway: EtcdBoundsTests {
    override class var api: EtcdAPI { .json }

    override func test_answerOverTheBound_isResponseTooLarge_andTheClientGoesOn() throws { try super.test_answerOverTheBound_isResponseTooLarge_andTheClientGoesOn() }
    override func test_watchMessageOverTheBound_endsTheWatch() throws { try super.test_watchMessageOverTheBound_endsTheWatch() }
    override func test_requestsBeyondTheBound_waitTheirTurn_andAreAllAnswered() throws { try super.test_requestsBeyondTheBound_waitTheirTurn_andAreAllAnswered() }
    override func test_requestWaitingPastItsDeadline_failsUnavailable_notSent() throws { try super.test_requestWaitingPastItsDeadline_failsUnavailable_notSent() }
    override func test_requestWaitingBehindASlowOne_failsAtItsOwnDeadline() throws { try super.test_requestWaitingBehindASlowOne_failsAtItsOwnDeadline() }
    override func test_configurationThatCannotWork_isRefused() { super.test_configurationThatCannotWork_isRefused() }
    override func test_closedClient_answersClosedAtOnce() throws { try super.test_closedClient_answersClosedAtOnce() }
}
