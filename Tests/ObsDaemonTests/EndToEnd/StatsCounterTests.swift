// The counters `stats` reports for monitoring (obsctl turns them into Prometheus metrics), read from
// a real obsd over its socket.
import Foundation
import Glibc
import ObsCore
import TestSupport
import XCTest

final class StatsCounterTests: XCTestCase {
    private func stats(_ client: Client) -> [String: Any] {
        client.send("{\"op\":\"stats\"}\n")
        return json(client.readLine())
    }

    func test_stats_countConnectionsRequestsByOperationAndErrorsByCode() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--memory"])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        for _ in 0..<3 {
            let client = try Client(sandbox.socket)
            client.send("{\"op\":\"ping\"}\n")
            XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        }
        let client = try Client(sandbox.socket)
        client.send("""
            {"op":"set","key":"a","value":1}
            {"op":"set","key":"b","value":2}
            {"op":"get","key":"a"}
            {"op":"get","key":"missing"}
            {"op":"frobnicate"}
            not json
            {"op":"incr","key":"a","by":"x"}

            """)
        for _ in 0..<7 { _ = client.readLine() }
        let counters = stats(client)
        XCTAssertEqual(counters["version"] as? String, "0.1.0")
        XCTAssertGreaterThanOrEqual(counters["connections_accepted"] as? Int ?? 0, 4, "waitUntilListening's probes count too")
        let requests = try XCTUnwrap(counters["requests"] as? [String: Int])
        XCTAssertEqual(requests["ping"], 3)
        XCTAssertEqual(requests["set"], 2)
        XCTAssertEqual(requests["get"], 2)
        XCTAssertEqual(requests["incr"], 1)
        XCTAssertEqual(requests["stats"], 1, "counted before it answers")
        XCTAssertEqual(requests["watch"], 0, "every operation is listed, zeros too")
        XCTAssertNil(requests["frobnicate"])
        let errors = try XCTUnwrap(counters["errors"] as? [String: Int])
        XCTAssertEqual(errors["not_found"], 1)
        XCTAssertEqual(errors["unknown_op"], 1)
        XCTAssertEqual(errors["bad_json"], 1)
        XCTAssertEqual(errors["bad_request"], 1)
        XCTAssertEqual(errors["cycle"], 0)
        XCTAssertEqual(errors.count, ObsError.Code.all.count, "every error code is listed")
        XCTAssertEqual(counters["unwritten_revisions"] as? Int, 0, "memory mode writes nothing, so nothing trails")
    }

    /// With the writer held back (a debug build's OBSD_TEST_WRITE_DELAY), a `stats` answered while
    /// a set waits for its batch reports one unwritten revision and its records' bytes, not a
    /// failing write; once it is written, none. (FullDiskOutageTests has a failing one.)
    func test_stats_reportTheWriteLag() throws {
        #if !DEBUG
        throw XCTSkip("OBSD_TEST_WRITE_DELAY needs a debug build of obsd")
        #endif
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--state-dir", sandbox.state],
                                   environment: ["OBSD_TEST_WRITE_DELAY": "0.5"])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let client = try Client(sandbox.socket)
        client.send("{\"op\":\"set\",\"key\":\"a\",\"value\":1}\n{\"op\":\"stats\"}\n")
        XCTAssertEqual(json(client.readLine())["rev"] as? Int, 1)
        let during = json(client.readLine())
        XCTAssertEqual(during["unwritten_revisions"] as? Int, 1)
        XCTAssertGreaterThanOrEqual(during["unwritten_age_s"] as? Double ?? -1, 0)
        XCTAssertEqual(during["unwritten_bytes"] as? Int, 47, "a transaction record (13 bytes) and the put of a = 1 (34)")
        XCTAssertEqual(during["write_failing"] as? Bool, false)
        let after = stats(client)
        XCTAssertEqual(after["unwritten_revisions"] as? Int, 0)
        XCTAssertEqual(after["unwritten_age_s"] as? Double, 0)
        XCTAssertEqual(after["unwritten_bytes"] as? Int, 0)
        XCTAssertEqual(after["write_failing"] as? Bool, false)
    }
}
