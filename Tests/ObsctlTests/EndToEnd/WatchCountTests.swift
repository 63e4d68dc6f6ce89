import Foundation
import TestSupport
import XCTest

/// `watch -n COUNT` counts the changes a resync's snapshot stands in for, and never the initial
/// snapshot (docs/cli.md).
final class WatchCountTests: XCTestCase {
    /// `w.a`, `w.b`, `w.c`, and 64 keys `w.pNN` of 128 KiB: a snapshot of 8 MiB, far more than
    /// obsctl's stdout pipe and its socket hold, so an obsctl whose stdout is not read stops
    /// reading the daemon with most of the snapshot still queued there.
    private func daemonWithLargeSnapshot() throws -> Daemon {
        // An output limit smaller than one event: the first event after the unread snapshot is
        // queued, the next one overflows the watch. A long client_timeout: obsd must not give up
        // on obsctl while the test holds it.
        let daemon = try Daemon(config: "output_buffer_bytes = 16\nclient_timeout = 1h\n")
        for (key, value) in [("w.a", "a0"), ("w.b", "b0"), ("w.c", "c0")] { try obsctl(daemon, ["set", key, value]) }
        let padding = String(repeating: "x", count: 128 << 10)
        let client = try Client(daemon.socket, timeout: 60)
        for number in 0..<64 {
            XCTAssertTrue(client.send(#"{"op":"set","key":"w.p\#(number)","value":"\#(padding)"}"# + "\n"))
            XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        }
        return daemon
    }

    /// ```
    ///   obsctl watch 'w.*' -n 3         stdout not read: the snapshot waits in obsd
    ///   set w.a a1                      sent after the snapshot        counts 1
    ///   set w.b b1, del w.c, set w.d,   dropped: overflow
    ///   set w.b b0                      (w.b back to what was printed)
    ///   read stdout                     overflow, snapshot: w.d new    counts 1
    ///                                   w.a, w.b, w.pNN as printed     count 0
    ///                                   synced: w.c not listed         counts 1 -> exit 0
    /// ```
    func test_n_countsTheChangesAResyncSnapshotStandsFor() throws {
        let daemon = try daemonWithLargeSnapshot()
        let watch = try Obsctl(daemon, ["watch", "w.*", "-n", "3", "--timeout", "120s"])
        XCTAssertEqual(watch.readLine().map { $0.hasPrefix(#"{"event":"initial","key":"w.a""#) }, true)
        daemon.waitForWatches(1)
        try obsctl(daemon, ["set", "w.a", "a1"])
        try obsctl(daemon, ["set", "w.b", "b1"])
        waitFor("the watch to overflow") { daemon.stat("overflows") >= 1 }
        try obsctl(daemon, ["del", "w.c"])
        try obsctl(daemon, ["set", "w.d", "d1"])
        try obsctl(daemon, ["set", "w.b", "b0"])

        let result = watch.finish(timeout: 120)
        XCTAssertEqual(result.status, 0, result.stderr)
        let events = result.stdout.split(separator: "\n").map { json(String($0)) }
        let kinds = events.map { $0["event"] as? String ?? "" }
        XCTAssertEqual(kinds.filter { $0 == "change" }.count, 1, "only w.a's change came before the overflow")
        XCTAssertEqual(kinds.filter { $0 == "overflow" }.count, 1)
        XCTAssertEqual(kinds.last, "synced", "obsctl exited at the resync's synced, counting w.c as deleted")
        let resync = events.drop { $0["event"] as? String != "overflow" }
        XCTAssertEqual(resync.compactMap { $0["key"] as? String }.filter { !$0.hasPrefix("w.p") }, ["w.a", "w.b", "w.d"])
        XCTAssertEqual(resync.first { $0["key"] as? String == "w.b" }?["value"] as? String, "b0")
    }

    /// Unchanged keys of a resync's snapshot, and a key whose value came back to what was printed,
    /// count nothing: with one change before the overflow and COUNT 2, obsctl is still watching
    /// after the resync, and exits at the next change.
    func test_n_doesNotCountUnchangedKeysOfAResyncSnapshot() throws {
        let daemon = try daemonWithLargeSnapshot()
        let watch = try Obsctl(daemon, ["watch", "w.*", "-n", "2", "--timeout", "120s"])
        XCTAssertNotNil(watch.readLine())
        daemon.waitForWatches(1)
        try obsctl(daemon, ["set", "w.a", "a1"])
        try obsctl(daemon, ["set", "w.b", "b1"])
        waitFor("the watch to overflow") { daemon.stat("overflows") >= 1 }
        try obsctl(daemon, ["set", "w.b", "b0"])

        var kinds: [String] = []
        while kinds.filter({ $0 == "synced" }).count < 2, let line = watch.readLine(timeout: 120) {
            kinds.append(json(line)["event"] as? String ?? "")
        }
        XCTAssertEqual(kinds.filter { $0 == "overflow" }.count, 1, "the watch overflowed and resynced")
        try obsctl(daemon, ["set", "w.a", "a2"])
        let result = watch.finish(timeout: 120)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(json(result.stdout.split(separator: "\n").last.map(String.init))["new"] as? String, "a2",
                       "obsctl was still watching after the resync, and counted the next change")
    }

    func test_n_initialSnapshotCountsNothing() throws {
        let daemon = try Daemon()
        for key in ["s.a", "s.b", "s.c"] { try obsctl(daemon, ["set", key, "1"]) }
        let result = try obsctl(daemon, ["watch", "s.*", "--values", "-n", "1", "--timeout", "1s"])
        XCTAssertEqual(result, Result(status: 3, stdout: "1\n1\n1\n", stderr: "obsctl: timed out\n"))
    }
}
