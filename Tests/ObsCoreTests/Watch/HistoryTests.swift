import XCTest
@testable import ObsCore
import TestSupport

/// The history's ring of encoded events against a plain list of what was appended: whatever the
/// sizes of the transactions, and however often the ring wraps, grows and shrinks, `since` gets
/// exactly the last transactions its bounds keep, in order, with their events intact.
final class HistoryTests: XCTestCase {
    /// The records of one transaction: `count` change events of keys `k.N` with values of `size`
    /// bytes.
    func events(rev: UInt64, count: Int, size: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        for index in 0..<count {
            var key = "k.\(index)"
            key.withUTF8 { key in
                buffer.appendEvent(.change, key: UnsafeRawBufferPointer(key), created: false,
                                   new: .value(.string(String(repeating: "v", count: size))))
            }
        }
        return buffer
    }

    /// What the history gives for `since`, as (revision, bodies) per transaction.
    func replay(_ history: borrowing History, after rev: UInt64) -> [(UInt64, [String])]? {
        var result: [(UInt64, [String])] = []
        let kept = history.forEachTransaction(after: rev) { rev, records in
            result.append((rev, records.map { String(decoding: $0.body(rev: rev), as: UTF8.self) }))
        }
        return kept ? result : nil
    }

    func test_ring_keepsTheLastTransactions_throughWrapsGrowthAndShrinking() {
        var generator = SplitMix64(seed: 16)
        for (capacity, maxBytes) in [(50, Int.max), (1000, 20_000), (10, 3_000)] {
            var history = History(capacity: capacity, maxBytes: maxBytes, start: 0)
            // The model: every transaction appended, with its byte size and bodies.
            var model: [(rev: UInt64, bytes: Int, bodies: [String])] = []
            var largest = 0
            for rev in UInt64(1)...3000 {
                // Mostly small transactions, now and then a burst that makes the ring grow.
                let count = generator.below(10) == 0 ? generator.below(40) : generator.below(3)
                let size = generator.below(20) == 0 ? 2000 : generator.below(100)
                let buffer = events(rev: rev, count: count, size: size)
                history.append(rev: rev, events: buffer.bytes)
                model.append((rev, buffer.count, EventRecords(buffer.bytes).map { String(decoding: $0.body(rev: rev), as: UTF8.self) }))
                // The model's bounds: the newest transactions within both limits, all of them
                // (the ring, kept within its own bound, still never has to drop more).
                var kept = 0, keptBytes = 0
                for entry in model.reversed() {
                    guard kept < capacity, keptBytes + entry.bytes <= maxBytes else { break }
                    kept += 1
                    keptBytes += entry.bytes
                }
                let expected = model.suffix(kept)
                XCTAssertEqual(history.count, kept, "capacity \(capacity), rev \(rev)")
                XCTAssertEqual(history.bytes, keptBytes)
                largest = max(largest, buffer.count)
                if maxBytes < .max { XCTAssertLessThanOrEqual(history.ringCapacity, maxBytes + 2 * largest, "the ring stays within its bound") }
                XCTAssertEqual(history.start, kept == model.count ? 0 : model[model.count - kept - 1].rev)
                // The oldest transaction kept is the one a block placed over live ones would
                // damage first: checked every time, everything now and then.
                if let oldest = expected.first {
                    var bodies: [String]?
                    _ = history.forEachTransaction(after: oldest.rev - 1) { rev, records in
                        if rev == oldest.rev { bodies = records.map { String(decoding: $0.body(rev: rev), as: UTF8.self) } }
                    }
                    XCTAssertEqual(bodies, oldest.bodies, "capacity \(capacity), rev \(rev)")
                }
                guard rev % 97 == 0 || rev == 3000 else { continue }
                let since = expected.first.map { $0.rev - 1 } ?? rev
                let replayed = replay(history, after: since)
                XCTAssertEqual(replayed?.map(\.0), expected.map(\.rev))
                XCTAssertEqual(replayed?.map(\.1), expected.map(\.bodies))
                if since > 0 { XCTAssertNil(replay(history, after: since - 1), "older than kept: compacted") }
            }
        }
    }

    /// Few revisions kept, sizes that vary a lot: the ring is often wrapped when a larger block
    /// comes, and must then grow rather than write over the oldest blocks.
    func test_ring_wrappedWhenALargerBlockComes_growsAndKeepsEveryBlockIntact() {
        var generator = SplitMix64(seed: 4)
        var history = History(capacity: 4, start: 0)
        var model: [(rev: UInt64, bodies: [String])] = []
        for rev in UInt64(1)...2000 {
            let buffer = events(rev: rev, count: 1 + generator.below(4), size: generator.below(8) == 0 ? 1500 : generator.below(300))
            history.append(rev: rev, events: buffer.bytes)
            model.append((rev, EventRecords(buffer.bytes).map { String(decoding: $0.body(rev: rev), as: UTF8.self) }))
            let expected = model.suffix(4)
            let replayed = replay(history, after: expected.first!.rev - 1)
            XCTAssertEqual(replayed?.map(\.0), expected.map(\.rev), "rev \(rev)")
            XCTAssertEqual(replayed?.map(\.1), expected.map(\.bodies), "rev \(rev)")
        }
    }

    func test_aTransactionOverTheByteLimit_isNotKept_andTheHistoryStartsAfterIt() {
        var history = History(capacity: 10, maxBytes: 500, start: 0)
        history.append(rev: 1, events: events(rev: 1, count: 1, size: 10).bytes)
        history.append(rev: 2, events: events(rev: 2, count: 1, size: 1000).bytes)
        XCTAssertEqual(history.count, 0)
        XCTAssertEqual(history.start, 2)
        XCTAssertNil(replay(history, after: 1))
        XCTAssertEqual(replay(history, after: 2)?.count, 0)
    }
}

extension HistoryTests {
    /// A key overwritten with values near half the byte bound: each block is about half of it,
    /// and the ring, kept within the bound, must still hold the newest intact.
    func test_blocksNearHalfTheBound_keepTheNewestIntact() {
        var history = History(capacity: 10_000, maxBytes: 13_000, start: 0)
        var model: [(rev: UInt64, bodies: [String])] = []
        for rev in UInt64(1)...30 {
            let buffer = events(rev: rev, count: 1, size: rev == 1 ? 3000 : 6100)
            history.append(rev: rev, events: buffer.bytes)
            model.append((rev, EventRecords(buffer.bytes).map { String(decoding: $0.body(rev: rev), as: UTF8.self) }))
            let kept = model.suffix(history.count)
            let replayed = replay(history, after: kept.first!.rev - 1)
            XCTAssertEqual(replayed?.map(\.1), kept.map(\.bodies), "rev \(rev)")
            XCTAssertGreaterThanOrEqual(history.count, 1)
        }
    }
}
