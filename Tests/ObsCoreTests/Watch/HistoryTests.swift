import XCTest
@testable import ObsCore

/// The history's ring of encoded events against a plain list of what was appended: whatever the
/// sizes of the transactions, and however often the ring wraps, grows and shrinks, `since` gets
/// exactly the last transactions its bounds keep, in order, with their events intact.
final class HistoryTests: XCTestCase {
    /// The records of one transaction: `count` change events of keys `k.N` with values of `size`
    /// bytes.
    private func events(rev: UInt64, count: Int, size: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        for index in 0..<count {
            var key = "k.\(index)"
            key.withUTF8 { key in
                buffer.appendEvent(.change, key: UnsafeRawBufferPointer(key), rev: rev, created: false,
                                   new: .value(.string(String(repeating: "v", count: size))))
            }
        }
        return buffer
    }

    /// What the history gives for `since`, as (revision, bodies) per transaction.
    private func replay(_ history: borrowing History, after rev: UInt64) -> [(UInt64, [String])]? {
        var result: [(UInt64, [String])] = []
        let kept = history.forEachTransaction(after: rev) { rev, records in
            result.append((rev, records.map { String(decoding: $0.body, as: UTF8.self) }))
        }
        return kept ? result : nil
    }

    func test_ring_keepsTheLastTransactions_throughWrapsGrowthAndShrinking() {
        var generator = SplitMix64(seed: 16)
        for (capacity, maxBytes) in [(50, Int.max), (1000, 20_000), (10, 3_000)] {
            var history = History(capacity: capacity, maxBytes: maxBytes, start: 0)
            // The model: every transaction appended, with its byte size and bodies.
            var model: [(rev: UInt64, bytes: Int, bodies: [String])] = []
            for rev in UInt64(1)...3000 {
                // Mostly small transactions, now and then a burst that makes the ring grow.
                let count = generator.below(10) == 0 ? generator.below(40) : generator.below(3)
                let size = generator.below(20) == 0 ? 2000 : generator.below(100)
                let buffer = events(rev: rev, count: count, size: size)
                history.append(rev: rev, events: buffer.bytes)
                model.append((rev, buffer.count, EventRecords(buffer.bytes).map { String(decoding: $0.body, as: UTF8.self) }))
                // The model's bounds: the newest transactions within both limits.
                var kept = 0, bytes = 0
                for entry in model.reversed() {
                    guard kept < capacity, bytes + entry.bytes <= maxBytes else { break }
                    kept += 1
                    bytes += entry.bytes
                }
                let expected = model.suffix(kept)
                XCTAssertEqual(history.count, kept, "capacity \(capacity), rev \(rev)")
                XCTAssertEqual(history.bytes, bytes)
                XCTAssertEqual(history.start, kept == model.count ? 0 : model[model.count - kept - 1].rev)
                // The oldest transaction kept is the one a block placed over live ones would
                // damage first: checked every time, everything now and then.
                if let oldest = expected.first {
                    var bodies: [String]?
                    _ = history.forEachTransaction(after: oldest.rev - 1) { rev, records in
                        if rev == oldest.rev { bodies = records.map { String(decoding: $0.body, as: UTF8.self) } }
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
            model.append((rev, EventRecords(buffer.bytes).map { String(decoding: $0.body, as: UTF8.self) }))
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
