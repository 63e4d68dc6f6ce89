// A reload that changes `allow` applies to the connections already open, not only to new ones.
import Foundation
import Glibc
import TestSupport
import XCTest

final class AccessReloadTests: XCTestCase {
    func test_aReload_takesAccessAwayFromOpenConnections() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to create users and connect as them")
        let sandbox = try Sandbox()
        let writer = try TestUser.make("obsd-test-rw")
        let reader = try TestUser.make("obsd-test-ro")
        try sandbox.write("socket_mode = 0666\nallow = user:obsd-test-rw:write, user:obsd-test-ro:read\n", to: sandbox.config)
        let obsd = try ObsdProcess(sandbox, arguments: ["--config", sandbox.config, "--socket", sandbox.socket,
                                                        "--state-dir", sandbox.state])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)

        let demoted = try writer.connect(sandbox.socket)
        demoted.send(#"{"id":1,"op":"set","key":"k","value":1}"# + "\n" + #"{"id":2,"op":"watch","keys":["k"],"initial":false}"# + "\n")
        XCTAssertEqual(json(demoted.readLine())["ok"] as? Bool, true)
        XCTAssertEqual(json(demoted.readLine())["watch"] as? Int, 1)
        XCTAssertEqual(json(demoted.readLine())["event"] as? String, "synced")
        let revoked = try reader.connect(sandbox.socket)
        revoked.send(#"{"id":1,"op":"get","key":"k"}"# + "\n")
        XCTAssertEqual(json(revoked.readLine())["value"] as? Int, 1)

        try sandbox.write("socket_mode = 0666\nallow = user:obsd-test-rw:read\n", to: sandbox.config)
        obsd.signal(SIGHUP)
        XCTAssertTrue(waitFor("the reload") { obsd.log.contains("reloaded the configuration") })

        // The reader is out: one permission_denied line, then the connection is closed.
        let line = revoked.readLine()
        XCTAssertEqual(errorCode(line), "permission_denied", line ?? "no line")
        XCTAssertTrue(revoked.readsEOF())
        XCTAssertTrue(obsd.log.contains("uid \(reader.uid)") && obsd.log.contains("no longer in allow"), obsd.log)

        // The writer may only read now: its write is refused, its watch still reports changes.
        demoted.send(#"{"id":3,"op":"set","key":"k","value":2}"# + "\n" + #"{"id":4,"op":"get","key":"k"}"# + "\n")
        XCTAssertEqual(errorCode(demoted.readLine()), "permission_denied")
        XCTAssertEqual(json(demoted.readLine())["value"] as? Int, 1)
        let owner = try Client(sandbox.socket)
        owner.send(#"{"op":"set","key":"k","value":3}"# + "\n")
        XCTAssertEqual(json(owner.readLine())["ok"] as? Bool, true)
        let event = json(demoted.readLine())
        XCTAssertEqual(event["event"] as? String, "change")
        XCTAssertEqual(event["new"] as? Int, 3)
    }
}
