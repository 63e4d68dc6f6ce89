import XCTest
@testable import ObsCore
import TestSupport

/// The watch unit on its own: events in from a committed transaction, lines out to sinks.
final class WatchHubTests: XCTestCase {
    private let clock = ManualClock()
    private let state = FixedState()

    private func hub(_ configure: (inout StoreConfiguration) -> Void = { _ in }) -> WatchHub {
        var configuration = StoreConfiguration()
        configure(&configuration)
        let hub = WatchHub(configuration: configuration, clock: clock, rev: 0)
        hub.state = state
        return hub
    }

    private func change(_ key: String, _ old: JSONValue?, _ new: JSONValue, rev: UInt64) -> KeyEvent {
        KeyEvent(kind: .change, key: key, old: old, new: new, rev: rev, created: old == nil)
    }

    private func options(_ patterns: [String], start: Watch.Options.Start = .nothing) throws -> Watch.Options {
        var options = Watch.Options(patterns: try patterns.map { try KeyPattern($0) })
        options.start = start
        return options
    }

    /// A transaction of many events in no order (names that share their first 8 bytes or more,
    /// and names that are prefixes of others): each watch gets them in key order, once each, for
    /// sizes around the lengths the delivery sorts in runs and merges.
    func test_manyEventsOfOneTransaction_reachAWatchInKeyOrder() throws {
        var generator = SplitMix64(seed: 1000)
        for count in [2, 15, 16, 17, 33, 100, 1000] {
            let hub = hub()
            let sink = RecordingSink()
            let client = hub.register(sink)
            _ = try hub.watch(client, options(["**"]))
            _ = sink.take()
            var names = Set<String>()
            while names.count < count {
                let stems = ["a", "abcdefgh", "abcdefghij", "f", "f.1", "sensor.room"]
                names.insert("\(stems[Int(generator.next() % 6)]).\(generator.next() % 5000)")
            }
            let events = names.shuffled(using: &generator).map { change($0, nil, 1, rev: 1) }
            hub.committed(events, rev: 1)
            let keys = try sink.take().map { try XCTUnwrap(JSONValue.parse($0).objectValue?["key"]?.stringValue) }
            XCTAssertEqual(keys, names.sorted(by: JSONValue.utf8Precedes), "\(count) events")
        }
    }

    func test_committedEvents_reachEveryMatchingWatch_inKeyOrder_encodedPerWatch() throws {
        let hub = hub()
        let a = RecordingSink(), b = RecordingSink()
        let clientA = hub.register(a), clientB = hub.register(b)
        XCTAssertEqual(try hub.watch(clientA, options(["k.*"])), 1)
        XCTAssertEqual(try hub.watch(clientB, options(["k.b", "**"])), 1)
        XCTAssertEqual(a.take(), [#"{"event":"synced","watch":1,"rev":0}"#])
        _ = b.take()

        hub.committed([change("k.a", nil, 1, rev: 1), change("k.b", 1, 2, rev: 1), change("other", nil, 3, rev: 1)], rev: 1)

        XCTAssertEqual(a.take(), [
            #"{"event":"change","watch":1,"key":"k.a","new":1,"rev":1,"created":true}"#,
            #"{"event":"change","watch":1,"key":"k.b","old":1,"new":2,"rev":1,"created":false}"#,
        ])
        XCTAssertEqual(b.take().count, 3, "two patterns of one watch match k.b: it is sent once")
        XCTAssertEqual(hub.stats.eventsSent, 7)
    }

    /// Transactions of several events of which patterns match one (a computed over a source nobody
    /// watches), then one where several entries match that event before another's is met: each
    /// watch gets each matching event once, in key order, whichever way the hub delivers them.
    func test_severalEvents_oneOrMoreWatched_eachWatchGetsItsEventsOnce_inKeyOrder() throws {
        let hub = hub()
        let a = RecordingSink(), b = RecordingSink(), c = RecordingSink()
        let clientA = hub.register(a), clientB = hub.register(b), clientC = hub.register(c)
        _ = try hub.watch(clientA, options(["c.v", "c.*"]))
        _ = try hub.watch(clientB, options(["c.v"]))
        _ = try hub.watch(clientC, options(["c.*"]))
        for sink in [a, b, c] { _ = sink.take() }
        func keys(_ sink: RecordingSink) throws -> [String] {
            try sink.take().map { try XCTUnwrap(JSONValue.parse($0).objectValue?["key"]?.stringValue) }
        }

        hub.committed([change("src.x", nil, 1, rev: 1), change("c.v", nil, 2, rev: 1)], rev: 1)
        XCTAssertEqual(try keys(a), ["c.v"], "two patterns of one watch match c.v: sent once")
        XCTAssertEqual(try keys(b), ["c.v"])
        XCTAssertEqual(try keys(c), ["c.v"])

        // c.w is met first (two entries match it), then c.v (four entries) and b.z (none).
        hub.committed([change("src.x", 1, 2, rev: 2), change("c.w", nil, 3, rev: 2), change("c.v", 2, 4, rev: 2),
                       change("b.z", nil, 5, rev: 2)], rev: 2)
        XCTAssertEqual(try keys(a), ["c.v", "c.w"])
        XCTAssertEqual(try keys(b), ["c.v"])
        XCTAssertEqual(try keys(c), ["c.v", "c.w"])
        XCTAssertEqual(hub.stats.eventsSent, 3 + 8, "three synced, eight changes")
    }

    /// A client whose output is over the limit gets nothing more until it drains; then each of its
    /// watches says what it missed and sends a fresh snapshot.
    func test_overflow_dropsUntilDrained_thenOverflowAndSnapshot() throws {
        let hub = hub { $0.maxOutputBytes = 100 }
        let sink = RecordingSink()
        let client = hub.register(sink)
        _ = try hub.watch(client, options(["k"]))
        _ = sink.take()
        sink.unsentBytes = 101
        hub.committed([change("k", nil, 1, rev: 1)], rev: 1)
        hub.committed([change("k", 1, 2, rev: 2)], rev: 2)
        XCTAssertEqual(sink.take(), [])
        XCTAssertTrue(client.overflowed)
        XCTAssertEqual(hub.stats.overflows, 1)

        hub.drained(client)
        XCTAssertEqual(sink.take(), [], "still over the limit: nothing yet")
        sink.unsentBytes = 0
        state.keys["k"] = (2, 2)
        hub.drained(client)
        XCTAssertEqual(sink.take(), [
            #"{"event":"overflow","watch":1,"from_rev":1,"to_rev":2}"#,
            #"{"event":"initial","watch":1,"key":"k","kind":"value","value":2,"rev":2}"#,
            #"{"event":"synced","watch":1,"rev":2}"#,
        ])
        hub.committed([change("k", 2, 3, rev: 3)], rev: 3)
        XCTAssertEqual(sink.take().count, 1, "live again")
    }

    func test_since_replaysHistory_andTooOld_isCompactedThenSnapshot() throws {
        let hub = hub { $0.historyRevisions = 2 }
        for rev in UInt64(1)...3 { hub.committed([change("k", .int(Int64(rev) - 1), .int(Int64(rev)), rev: rev)], rev: rev) }
        let sink = RecordingSink()
        let client = hub.register(sink)
        _ = try hub.watch(client, options(["k"], start: .since(2)))
        XCTAssertEqual(sink.take(), [
            #"{"event":"change","watch":1,"key":"k","old":2,"new":3,"rev":3,"created":false}"#,
            #"{"event":"synced","watch":1,"rev":3}"#,
        ])
        state.keys["k"] = (3, 3)
        _ = try hub.watch(client, options(["k"], start: .since(0)))
        XCTAssertEqual(sink.take(), [
            #"{"event":"compacted","watch":2,"compact_rev":1}"#,
            #"{"event":"initial","watch":2,"key":"k","kind":"value","value":3,"rev":3}"#,
            #"{"event":"synced","watch":2,"rev":3}"#,
        ])
    }

    func test_unwatchAndRemove_stopEverything_andEmptyPatternsLeaveTheIndex() throws {
        let hub = hub()
        let sink = RecordingSink()
        let client = hub.register(sink)
        let first = try hub.watch(client, options(["a"]))
        _ = try hub.watch(client, options(["b.*"]))
        XCTAssertEqual(hub.patterns.count, 2)
        try hub.unwatch(client, first)
        XCTAssertThrowsError(try hub.unwatch(client, first)) { XCTAssertEqual(($0 as? ObsError)?.code, .notFound) }
        XCTAssertEqual(hub.patterns.count, 1)
        hub.remove(client)
        XCTAssertEqual(hub.patterns.count, 0)
        XCTAssertEqual(hub.stats.watches, 0)
        _ = sink.take()
        hub.committed([change("a", nil, 1, rev: 1), change("b.c", nil, 1, rev: 1)], rev: 1)
        XCTAssertEqual(hub.publish("b.c", "hi"), 0)
        XCTAssertEqual(sink.take(), [])
    }

    func test_publish_countsEachWatchOnce() throws {
        let hub = hub()
        let sink = RecordingSink()
        let client = hub.register(sink)
        _ = try hub.watch(client, options(["news.*", "**"]))
        var quiet = try options(["news.*"])
        quiet.channels = false
        _ = try hub.watch(client, quiet)
        _ = sink.take()
        XCTAssertEqual(hub.publish("news.today", "hello"), 1)
        XCTAssertEqual(sink.take(), [#"{"event":"publish","watch":1,"channel":"news.today","payload":"hello"}"#])
    }
}
