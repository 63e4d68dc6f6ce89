import Foundation
@testable import ObsClient
import ObsCore
@testable import ObsctlCore
import Synchronization
import TestSupport
import XCTest

/// The queue between the socket and `watch -- COMMAND`: bounded, in order, coalescing with --latest.
final class EventQueueTests: XCTestCase {
    func event(_ line: String) -> WatchEvent {
        guard case .object(let fields) = try! JSONValue.parse(line) else { fatalError() }
        return WatchEvent(fields: fields)
    }

    func change(_ rev: Int, key: String = "k") -> WatchEvent {
        event(#"{"event":"change","key":"\#(key)","old":\#(rev - 1),"new":\#(rev),"rev":\#(rev),"created":false}"#)
    }

    func test_latestQueue_coalescesPerKey_keepingTheOldValueLastSeen() throws {
        let queue = EventQueue(coalescing: true)
        queue.push(event(#"{"event":"change","key":"k","old":1,"new":2,"rev":2,"created":false}"#))
        queue.push(event(#"{"event":"change","key":"j","old":0,"new":5,"rev":3,"created":false}"#))
        queue.push(event(#"{"event":"change","key":"k","old":2,"new":3,"rev":4,"created":false}"#))
        XCTAssertEqual(try queue.next(deadline: 0)?.fields, event(#"{"event":"change","key":"k","old":1,"new":3,"rev":4,"created":false}"#).fields)
        XCTAssertEqual(try queue.next(deadline: 0)?["key"], "j")
        XCTAssertNil(try queue.next(deadline: 0))
    }

    /// A reconnection marked on a change that a later one of its key replaces still reaches
    /// WatchCount, on the event that stands for both.
    func test_latestQueue_keepsTheMarkOfAReconnection() throws {
        let queue = EventQueue(coalescing: true)
        var resumed = change(2)
        resumed.followsReconnection = true
        queue.push(resumed)
        queue.push(change(3))
        let merged = try XCTUnwrap(try queue.next(deadline: 0))
        XCTAssertEqual(merged["rev"], 3)
        XCTAssertTrue(merged.followsReconnection)
    }

    /// A `reset` (WatchStream, --reconnect) is a barrier: a key's snapshot item of the new state is
    /// not merged into its change from the old one still waiting, ahead of the reset.
    func test_latestQueue_mergesNothingAcrossAReset() throws {
        let queue = EventQueue(coalescing: true)
        queue.push(change(2))
        queue.push(event(#"{"event":"reset","rev":1,"reason":"obsd restarted with its state in memory"}"#))
        queue.push(event(#"{"event":"initial","key":"k","kind":"value","value":7,"rev":1}"#))
        queue.push(event(#"{"event":"change","key":"k","old":7,"new":8,"rev":2,"created":false}"#))
        XCTAssertEqual(try queue.next(deadline: 0)?.fields, change(2).fields)
        XCTAssertEqual(try queue.next(deadline: 0)?.kind, "reset")
        XCTAssertEqual(try queue.next(deadline: 0)?.fields,
                       event(#"{"event":"change","key":"k","old":7,"new":8,"rev":2,"created":false}"#).fields,
                       "events after the reset still merge with each other")
        XCTAssertNil(try queue.next(deadline: 0))
    }

    /// The reading thread waits while the queue is full (it reads nothing off the socket then):
    /// the queue never holds more than its limit, and every event comes out, in order.
    func test_fullQueue_makesTheReaderWait_andLosesNothing() throws {
        let limit = 10 * EventQueue.size(of: change(200))
        let queue = EventQueue(coalescing: false, limitBytes: limit)
        let pushed = Atomic<Int>(0)
        let events = (200..<400).map { change($0) }
        let reader = Thread {
            for event in events {
                queue.push(event)
                pushed.add(1, ordering: .releasing)
            }
        }
        reader.start()
        waitFor("the queue to fill") { pushed.load(ordering: .acquiring) >= 10 }
        for (taken, rev) in (200..<400).enumerated() {
            XCTAssertLessThanOrEqual(queue.waitingBytes, limit)
            XCTAssertLessThanOrEqual(pushed.load(ordering: .acquiring) - taken, 10, "more events waited than fit")
            XCTAssertEqual(try queue.next(deadline: monotonicNow() + 30)?["rev"], .int(Int64(rev)))
        }
        XCTAssertEqual(queue.waitingBytes, 0)
    }

    func test_anEventLargerThanTheLimit_passesAlone() throws {
        let queue = EventQueue(coalescing: false, limitBytes: 1)
        let events = (1...3).map { change($0) }
        let reader = Thread {
            for event in events { queue.push(event) }
        }
        reader.start()
        for rev in 1...3 {
            XCTAssertEqual(try queue.next(deadline: monotonicNow() + 30)?["rev"], .int(Int64(rev)))
        }
    }

    /// Whether `--latest` merges two events: the scan the queue made before it had an index.
    func sameSubject(_ a: WatchEvent, _ b: WatchEvent) -> Bool {
        let kinds: Set<String> = ["change", "delete", "error", "initial"]
        if kinds.contains(a.kind), kinds.contains(b.kind) { return a["key"] != nil && a["key"] == b["key"] }
        if a.kind == "publish", b.kind == "publish" { return a["channel"] == b["channel"] }
        return false
    }

    /// Coalescing through the index by key and channel gives what the straightforward queue gave
    /// (a scan for the last waiting event of the same key or channel), for random pushes and takes.
    func test_coalescing_agreesWithALinearScan() throws {
        var random = SplitMix64(seed: 7)
        let queue = EventQueue(coalescing: true)
        var model: [WatchEvent] = []
        let keys = ["a", "b", "c", "d"]
        for step in 0..<5000 {
            if random.below(3) == 0 {
                let expected = model.isEmpty ? nil : model.removeFirst()
                XCTAssertEqual(try queue.next(deadline: 0)?.fields, expected?.fields, "step \(step)")
                continue
            }
            let key = random.pick(keys), rev = step + 1
            let pushed = switch random.below(6) {
            case 0: event(#"{"event":"initial","key":"\#(key)","kind":"value","value":\#(rev),"rev":\#(rev)}"#)
            case 1: event(#"{"event":"delete","key":"\#(key)","old":\#(rev - 1),"rev":\#(rev)}"#)
            case 2: event(#"{"event":"publish","channel":"\#(key)","payload":\#(rev)}"#)
            case 3: event(#"{"event":"synced","rev":\#(rev)}"#)
            default: change(rev, key: key)
            }
            queue.push(pushed)
            if let index = model.lastIndex(where: { sameSubject($0, pushed) }) {
                model[index] = EventQueue.merged(model[index], pushed)
            } else {
                model.append(pushed)
            }
        }
        while let expected = model.first {
            model.removeFirst()
            XCTAssertEqual(try queue.next(deadline: 0)?.fields, expected.fields)
        }
        XCTAssertNil(try queue.next(deadline: 0))
    }
}
