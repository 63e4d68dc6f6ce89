// A long full disk, with the daemon still committing writes of its own: a binding fed by a computed
// over `now()` writes its target every second, and TTL keys expire. Client writes are refused, but
// those commits join the batch that waits for the disk; it stays within its bound
// (GroupCommitStorage: compacted to the last record naming each thing), `stats` shows it, a little
// room is enough for the daemon to catch up, and what it wrote loads as what it served.
// The state lives on a small tmpfs the test mounts (root only), so the disk really fills.
import Foundation
import Glibc
import TestSupport
import XCTest

final class FullDiskOutageTests: XCTestCase {
    /// The bound a debug build's OBSD_TEST_BATCH_COMPACTION_BYTES sets here.
    private let compactionBytes = 64 << 10
    /// What the binding writes every second: a value of this many bytes (and the time).
    private let valueBytes = 40_000

    func test_theDaemonsOwnWritesDuringAFullDisk_keepTheUnwrittenBatchBounded_andALittleRoomLetsItCatchUp() throws {
        let sandbox = try Sandbox()
        let disk = try smallDisk(in: sandbox, size: "4m", options: "mode=0700")
        defer { umount2(disk, Int32(MNT_DETACH)) }
        let state = disk + "/state"
        let arguments = ["--socket", sandbox.socket, "--state-dir", state]
        let environment = ["OBSD_TEST_BATCH_COMPACTION_BYTES": String(compactionBytes)]
        let daemon = try ObsdProcess(sandbox, arguments: arguments, environment: environment)
        defer { daemon.signal(SIGKILL); _ = daemon.waitForExit() }
        XCTAssertTrue(daemon.waitUntilListening())

        // `stamp` is written every second by the binding; `ttl.N` expire during the outage.
        let client = try Client(sandbox.socket)
        let blob = String(repeating: "b", count: valueBytes)
        for request in [#"{"op":"set","key":"blob","value":"\#(blob)"}"#, #"{"op":"define","key":"big","expr":"$blob + string(now())"}"#,
                        #"{"op":"bind","from":"big","to":"stamp"}"#, #"{"op":"set","key":"before","value":1}"#]
            + (1...5).map({ #"{"op":"set","key":"ttl.\#($0)","value":\#($0),"ttl_ms":4000}"# }) {
            XCTAssertEqual(client.request(request)?["ok"] as? Bool, true, request)
        }
        // Its change events are sent only once written: they tell when the daemon has caught up.
        let watcher = try Client(sandbox.socket, timeout: 30)
        XCTAssertEqual(watcher.request(#"{"op":"watch","keys":["stamp"],"initial":false}"#)?["ok"] as? Bool, true)

        // Fill the disk. The next batch cannot be written; client writes are refused.
        let filler = disk + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
        for chunk in [64 << 10, 4 << 10] {
            let bytes = [UInt8](repeating: 0x61, count: chunk)
            while write(fd, bytes, bytes.count) > 0 {}
        }
        // (Each probe on a connection of its own: one whose write is the first the disk cannot
        // take gets no answer until it can, and nor does anything after it on that connection.)
        XCTAssertTrue(waitFor("writes refused") {
            let probe = try? Client(sandbox.socket, timeout: 2)
            return (probe?.request(#"{"op":"set","key":"probe","value":1}"#)?["error"] as? [String: Any])?["message"]
                .map { "\($0)".contains("writes are refused") } == true
        }, daemon.log)

        // Ten more writes of `stamp` (400 KB), each joining the unwritten batch, which `stats`
        // shows failing and within its bound all along: at most the bound or twice the latest state
        // of what it touches (`stamp`, the expired keys), whichever is more, plus one transaction.
        let bound = max(compactionBytes, 2 * (valueBytes + 200)) + valueBytes + 200
        let from = try XCTUnwrap(client.request(#"{"op":"get","key":"stamp"}"#)?["version"] as? Int)
        var largest = 0
        var notFailing: [String: Any]?
        XCTAssertTrue(waitFor("ten writes of stamp during the outage") {
            let stats = client.request(#"{"op":"stats"}"#) ?? [:]
            if stats["write_failing"] as? Bool != true { notFailing = stats }
            largest = max(largest, stats["unwritten_bytes"] as? Int ?? .max)
            return client.request(#"{"op":"get","key":"stamp"}"#)?["version"] as? Int ?? 0 >= from + 10
        })
        XCTAssertNil(notFailing, "stats did not say the write was failing")
        XCTAssertLessThanOrEqual(largest, bound, "the unwritten batch's bytes")
        let outageRev = try XCTUnwrap(client.request(#"{"op":"get","key":"stamp"}"#)?["rev"] as? Int)

        // Room for the bounded batch, not for ten writes of stamp: the daemon catches up, and the
        // watcher gets the change events it was held from.
        var size = stat()
        XCTAssertEqual(stat(filler, &size), 0)
        XCTAssertEqual(ftruncate(fd, size.st_size - (256 << 10)), 0)
        close(fd)
        var caughtUp = false
        while !caughtUp, let line = watcher.readLine() {
            let event = json(line)
            caughtUp = event["event"] as? String == "change" && event["rev"] as? Int ?? 0 >= outageRev
        }
        XCTAssertTrue(caughtUp, "the batch waiting for the disk was never written\n\(daemon.log)")

        // Room again: writes are accepted. Without the binding and the computed nothing changes by
        // itself: the state served, then after kill -9 what the commit log holds, must be the same.
        XCTAssertEqual(unlink(filler), 0)
        XCTAssertTrue(waitFor("writes accepted again") {
            client.request(#"{"op":"unbind","to":"stamp"}"#)?["ok"] as? Bool == true
        }, daemon.log)
        XCTAssertEqual(client.request(#"{"op":"delete","key":"big"}"#)?["ok"] as? Bool, true)
        XCTAssertTrue(daemon.log.contains("the database can be written again (written: "), daemon.log)
        let served = try XCTUnwrap(client.request(#"{"op":"dump"}"#))
        let names = Set((served["keys"] as? [[String: Any]] ?? []).compactMap { $0["key"] as? String })
        XCTAssertTrue(names.isSuperset(of: ["before", "blob", "stamp"]), "\(names)")
        XCTAssertTrue(names.isDisjoint(with: (1...5).map { "ttl.\($0)" }), "the TTL keys expired: \(names)")
        daemon.signal(SIGKILL)
        XCTAssertNotNil(daemon.waitForExit())

        let restarted = try ObsdProcess(sandbox, arguments: arguments)
        defer { restarted.signal(SIGKILL); _ = restarted.waitForExit() }
        XCTAssertTrue(restarted.waitUntilListening(), restarted.log)
        var loaded = try XCTUnwrap(try Client(sandbox.socket).request(#"{"op":"dump"}"#))
        // The start after kill -9 took a revision of its own (for the ephemeral keys a killed run
        // may have had): the rest is the state served.
        XCTAssertEqual(loaded["rev"] as? Int, (served["rev"] as? Int).map { $0 + 1 })
        loaded["rev"] = served["rev"]
        XCTAssertEqual(NSDictionary(dictionary: loaded), NSDictionary(dictionary: served), "what was served is what was written")
    }
}
