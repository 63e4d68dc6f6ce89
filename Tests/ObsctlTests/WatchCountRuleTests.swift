// What `watch -n` counts across a resync, event by event (the end-to-end cases, with a real
// overflow, are in EndToEnd/WatchCountTests.swift).
import ObsClient
import ObsCore
import XCTest
@testable import ObsctlCore

final class WatchCountRuleTests: XCTestCase {
    private func event(_ name: String, _ fields: [String: JSONValue] = [:]) -> WatchEvent {
        var all = fields
        all["event"] = .string(name)
        return WatchEvent(fields: all)
    }

    private func item(_ key: String, _ value: Int64, rev: Int64) -> WatchEvent {
        event("initial", ["key": .string(key), "value": .int(value), "rev": .int(rev)])
    }

    /// With `--no-initial` the watch knows only the keys it saw change: in a resync after an
    /// overflow from revision 10, a key it never printed counts only if its own revision is in the
    /// gap.
    func test_afterOverflow_aKeyNotPrintedCountsOnlyIfItChangedInTheGap() {
        var count = WatchCount()
        XCTAssertEqual(count.count(event("synced", ["rev": .int(5)])), 0)
        XCTAssertEqual(count.count(event("change", ["key": .string("a"), "new": .int(1), "rev": .int(6)])), 1)
        XCTAssertEqual(count.count(event("overflow", ["from_rev": .int(10), "to_rev": .int(20)])), 0)
        XCTAssertEqual(count.count(item("a", 1, rev: 6)), 0, "printed, unchanged")
        XCTAssertEqual(count.count(item("b", 7, rev: 3)), 0, "not printed, last changed before the gap")
        XCTAssertEqual(count.count(item("c", 8, rev: 12)), 1, "not printed, changed in the gap")
        XCTAssertEqual(count.count(item("d", 9, rev: 10)), 1, "changed at the gap's first revision")
        XCTAssertEqual(count.count(event("synced", ["rev": .int(20)])), 0, "every key the watch printed is listed")
    }

    /// After `compacted`, the gap starts after `--since`'s revision, or after the newest revision
    /// the watch saw.
    func test_afterCompacted_theGapStartsAfterTheNewestRevisionSeen() {
        var count = WatchCount(since: 40)
        XCTAssertEqual(count.count(event("compacted", ["compact_rev": .int(50)])), 0)
        XCTAssertEqual(count.count(item("old", 1, rev: 40)), 0)
        XCTAssertEqual(count.count(item("new", 1, rev: 41)), 1)
        XCTAssertEqual(count.count(event("synced", ["rev": .int(60)])), 0)
        XCTAssertEqual(count.count(event("change", ["key": .string("x"), "new": .int(2), "rev": .int(61)])), 1)
        XCTAssertEqual(count.count(event("compacted", ["compact_rev": .int(70)])), 0)
        XCTAssertEqual(count.count(item("quiet", 1, rev: 61)), 0, "not after revision 61, the newest seen")
        XCTAssertEqual(count.count(item("moved", 1, rev: 62)), 1)
    }

    /// Without a revision to go by (compacted before anything was seen), a key not printed counts.
    func test_withoutAKnownRevision_aKeyNotPrintedCounts() {
        var count = WatchCount()
        XCTAssertEqual(count.count(event("compacted", ["compact_rev": .int(5)])), 0)
        XCTAssertEqual(count.count(item("k", 1, rev: 2)), 1)
    }
}
