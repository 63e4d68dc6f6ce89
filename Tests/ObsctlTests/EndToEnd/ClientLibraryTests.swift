import ObsClient
import ObsCore
import TestSupport
import XCTest

/// The client library as a Swift program uses it: async requests and an AsyncSequence of events.
final class ClientLibraryTests: XCTestCase {
    func test_asyncRequests_andWatchSequence() async throws {
        let daemon = try Daemon()
        let obs = ObsClient(socketPath: daemon.socket)
        try await obs.set("volume", 0.4)
        let value = try await obs.get("volume")
        XCTAssertEqual(value, 0.4)
        do {
            _ = try await obs.request("get", ["key": "missing"])
            XCTFail("expected not_found")
        } catch {
            guard case .server(let failure) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.code, .notFound)
        }
        var seen: [JSONValue] = []
        for try await event in obs.watch(["volume"]) {
            if event.kind == "synced" { try await obs.set("volume", 0.8) }
            if let value = event.value { seen.append(value) }
            if seen.count == 2 { break }
        }
        XCTAssertEqual(seen, [0.4, 0.8])
    }

    /// Requests share one connection, kept between them. One the daemon has closed since (it
    /// restarted, say, as a systemd service does on an upgrade) used to fail the next request with
    /// `connectionLost`, though the daemon was back and that request never reached it. A request
    /// that reached no one now goes again, once, on a new connection.
    func test_theRequestAfterTheDaemonRestarted_getsItsAnswer() async throws {
        let daemon = try Daemon()
        let obs = ObsClient(socketPath: daemon.socket)
        try await obs.set("before", 1)
        daemon.stop()
        try daemon.start()
        try await obs.set("after", 2)
        let after = try await obs.get("after")
        XCTAssertEqual(after, 2)
    }

    /// The daemon answers a request line over its `max_line_bytes` with `too_large`, then closes
    /// the connection: the next request used to fail with `connectionLost`.
    func test_theRequestAfterATooLargeOne_getsItsAnswer() async throws {
        let daemon = try Daemon(config: "max_line_bytes = 4096\n")
        let obs = ObsClient(socketPath: daemon.socket)
        do {
            try await obs.set("big", .string(String(repeating: "v", count: 10_000)))
            XCTFail("the daemon took a line over its max_line_bytes")
        } catch {
            guard case .server(let failure) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.code, .tooLarge)
        }
        try await obs.set("small", 1)
        let small = try await obs.get("small")
        XCTAssertEqual(small, 1)
    }

    /// A daemon stopped for good: the request says it cannot connect, as a first one would.
    func test_theRequestAfterTheDaemonStopped_cannotConnect() async throws {
        let daemon = try Daemon()
        let obs = ObsClient(socketPath: daemon.socket)
        try await obs.set("before", 1)
        daemon.stop()
        do {
            _ = try await obs.request("ping")
            XCTFail("a stopped daemon answered")
        } catch {
            guard case .cannotConnect = error else { return XCTFail("\(error)") }
        }
    }

    func test_cannotConnect_isAClientError() async {
        let obs = ObsClient(socketPath: "/nonexistent/obsd.sock")
        do {
            _ = try await obs.request("ping")
            XCTFail("expected cannotConnect")
        } catch {
            XCTAssertEqual(error, .cannotConnect(path: "/nonexistent/obsd.sock", reason: .missing))
        }
    }
}
