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
    override func test_configurationThatCannotWork_isRefused() { super.test_configurationThatCannotWork_isRefused() }
    override func test_closedClient_answersClosedAtOnce() throws { try super.test_closedClient_answersClosedAtOnce() }
}
