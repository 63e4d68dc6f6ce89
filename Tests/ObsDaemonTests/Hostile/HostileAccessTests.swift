// Other users on the socket: one `allow` does not name, one it lets read, and one whose write
// access a reload takes away while it is writing. Nothing they may not do is ever done.
import Foundation
import Glibc
@testable import ObsCore
import TestSupport
import XCTest

final class HostileAccessTests: XCTestCase {
    func test_otherUsers_withAndWithoutAllow_andRevokedWhileWriting() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to create users and connect as them")
        let stranger = try TestUser.make("obsd-test-none")
        let reader = try TestUser.make("obsd-test-ro")
        let writer = try TestUser.make("obsd-test-rw")
        let sandbox = try Sandbox()
        try sandbox.write("socket_mode = 0666\nallow = user:obsd-test-ro:read, user:obsd-test-rw:write\n", to: sandbox.config)
        let obsd = try ObsdProcess.started(sandbox, ["--config", sandbox.config])
        let owner = try Client(sandbox.socket)

        // Not in allow: one permission_denied line, then closed; nothing it sent is done.
        let attempts = Hostile.pick(quick: 100, long: 2000)
        var shutOut = 0
        for index in 0..<attempts {
            let client = try stranger.connect(sandbox.socket)
            client.send(#"{"op":"set","key":"stranger.\#(index)","value":1}"# + "\n")
            if errorCode(client.readLine()) == "permission_denied", client.readLine() == nil { shutOut += 1 }
        }
        XCTAssertEqual(shutOut, attempts)

        // Read access: every write operation of the table refused, reads answered.
        let readOnly = try reader.connect(sandbox.socket)
        let writes = Operations.all.filter { $0.access == .write }
        var refusedWrites = 0
        for operation in writes {
            let answer = readOnly.request(#"{"op":"\#(operation.name)","key":"r","value":1,"expr":"1","from":"a","to":"r","channel":"c","ops":[],"keys":[]}"#)
            if (answer?["error"] as? [String: Any])?["code"] as? String == "permission_denied" { refusedWrites += 1 }
        }
        XCTAssertEqual(refusedWrites, writes.count)
        XCTAssertEqual(readOnly.request(#"{"op":"list"}"#)?["ok"] as? Bool, true)

        // Write access taken away while writing: from the reload on, nothing more is applied, and
        // everything applied was acknowledged.
        let revoked = try writer.connect(sandbox.socket)
        let tally = Tally()
        let writing = DispatchGroup()
        DispatchQueue.global().async(group: writing) {
            var index = 0
            while true {
                // A send fails once obsd has closed the connection; what it said before is still
                // there to read.
                _ = revoked.send(#"{"id":\#(index),"op":"set","key":"w.\#(index)","value":\#(index)}"# + "\n")
                guard let line = revoked.readLine() else { return }
                if json(line)["ok"] as? Bool == true {
                    tally.count("acknowledged")
                } else {
                    tally.count(errorCode(line) ?? "other")
                }
                index += 1
            }
        }
        waitFor("some acknowledged writes") { tally["acknowledged"] >= 200 }
        try sandbox.write("socket_mode = 0666\nallow = user:obsd-test-ro:read\n", to: sandbox.config)
        obsd.signal(SIGHUP)
        XCTAssertEqual(writing.wait(timeout: .now() + 60), .success)
        let applied = (owner.request(#"{"op":"list","pattern":"w.*"}"#)?["keys"] as? [Any])?.count ?? -1
        XCTAssertEqual(applied, tally["acknowledged"], "every applied write was acknowledged, none after the revocation")
        XCTAssertEqual(tally["permission_denied"], 1, "one permission_denied line, then closed")
        XCTAssertEqual((owner.request(#"{"op":"list","pattern":"stranger.*"}"#)?["keys"] as? [Any])?.count, 0)
        XCTAssertTrue(obsd.log.contains("uid \(writer.uid)") && obsd.log.contains("no longer in allow"), obsd.log)
        Hostile.report("other users", "\(attempts) connections not in allow: \(shutOut) refused and closed, 0 requests done; read access: \(refusedWrites) of \(writes.count) write operations refused; revoked while writing: \(tally["acknowledged"]) acknowledged, \(applied) applied, then refused and closed")
    }
}
