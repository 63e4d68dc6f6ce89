import XCTest
@testable import ObsCore
import TestSupport

/// An event's record keeps its values, not its line: the body is written from the record when a
/// watch gets the event or `since` replays it. Whichever way, the bytes must be the protocol's,
/// the same as the general encoder's for the event, and the same live and replayed.
final class EventBodyTests: XCTestCase {
    private let clock = ManualClock()
    private let state = FixedState()

    /// Events of every kind and shape: with and without `old`, created, deletes of each reason,
    /// errors, and keys and strings that need escaping.
    private let events: [KeyEvent] = {
        var events = [
            KeyEvent(kind: .change, key: "a", old: nil, new: 1, rev: 7, created: true),
            KeyEvent(kind: .change, key: "b.c", old: "x", new: ["n": [1, 2.5, nil, true]], rev: 7, created: false),
            KeyEvent(kind: .change, key: "quote\"back\\slash\u{1}", old: "tab\there", new: "line\nbreak \u{e9}", rev: 7, created: false),
            KeyEvent(kind: .change, key: "recovering", old: nil, new: -9_223_372_036_854_775_808, rev: 7, created: false),
            KeyEvent(kind: .delete, key: "d", old: ["k": "v"], rev: 7, created: false),
            KeyEvent(kind: .delete, key: "t", old: 3, rev: 7, created: false, reason: "ttl"),
            KeyEvent(kind: .delete, key: "e", old: nil, rev: 7, created: false, reason: "ephemeral"),
        ]
        var error = KeyEvent(kind: .error, key: "c", rev: 7, created: false)
        error.error = ObsError(.evalError, "division by zero at 3")
        events.append(error)
        var created = KeyEvent(kind: .error, key: "c2", rev: 7, created: true)
        created.error = ObsError(.typeMismatch, "cannot add \"a\" and 1")
        events.append(created)
        return events
    }()

    private func records(_ events: [KeyEvent]) -> ByteBuffer {
        var buffer = ByteBuffer()
        for event in events {
            var key = event.key
            key.withUTF8 { key in
                buffer.appendEvent(event.kind, key: UnsafeRawBufferPointer(key), created: event.created,
                                   old: event.old.map { .value($0) }, new: event.new.map { .value($0) }, error: event.error,
                                   reason: event.reason)
            }
        }
        return buffer
    }

    func test_aRecordsBody_isTheGeneralEncodersBody() {
        let buffer = records(events)
        let bodies = EventRecords(buffer.bytes).map { String(decoding: $0.body(rev: 7), as: UTF8.self) }
        XCTAssertEqual(bodies.count, events.count)
        for (body, event) in zip(bodies, events) {
            var expected = event
            if expected.kind == .delete && expected.old == nil { expected.old = .null }
            XCTAssertEqual(body, String(decoding: LineEncoding.body(expected), as: UTF8.self), event.key)
        }
    }

    func test_aRecordGivesBackItsEvent() {
        let buffer = records(events)
        for (record, event) in zip(EventRecords(buffer.bytes), events) {
            let back = KeyEvent(record, rev: 7)
            XCTAssertEqual(back.kind, event.kind)
            XCTAssertEqual(back.key, event.key)
            XCTAssertEqual(back.old, event.kind == .delete ? event.old ?? .null : event.old)
            XCTAssertEqual(back.new, event.new)
            XCTAssertEqual(back.created, event.created)
            XCTAssertEqual(back.reason, event.reason)
        }
    }

    /// A watch of some keys gets its events live; watches of everything started later with
    /// `since` get every event replayed, and a live watch of everything got the same lines.
    func test_eventsReplayedBySince_areTheLinesLiveWatchesGot() throws {
        let hub = WatchHub(configuration: StoreConfiguration(), clock: clock, rev: 0)
        hub.state = state
        let everything = RecordingSink(), some = RecordingSink()
        _ = try hub.watch(hub.register(everything), Watch.Options(patterns: [try KeyPattern("**")]))
        _ = try hub.watch(hub.register(some), Watch.Options(patterns: [try KeyPattern("b.*")]))
        _ = everything.take()
        _ = some.take()
        hub.committed(Array(events.prefix(4)), rev: 1)
        hub.committed(Array(events.suffix(from: 4)), rev: 2)
        hub.committed([KeyEvent(kind: .change, key: "b.z", old: 1, new: 2, rev: 3, created: false)], rev: 3)
        let live = everything.take()
        XCTAssertEqual(live.count, events.count + 1)
        XCTAssertEqual(some.take().count, 2, "b.c and b.z")

        let replaying = RecordingSink()
        var options = Watch.Options(patterns: [try KeyPattern("**")])
        options.start = .since(0)
        _ = try hub.watch(hub.register(replaying), options)
        let replayed = replaying.take()
        XCTAssertEqual(replayed.last, #"{"event":"synced","watch":1,"rev":3}"#)
        XCTAssertEqual(Array(replayed.dropLast()), live)
    }
}
