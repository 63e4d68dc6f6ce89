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
