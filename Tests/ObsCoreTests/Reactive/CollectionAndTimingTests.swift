import Foundation
import Observation
import Synchronization
import XCTest
@testable import ObsCore
import TestSupport

final class ObservableArrayTests: XCTestCase {
    func test_observeDiff_reportsInsertions() {
        let list = ObservableArray([1, 2, 3])
        let diffs = Log<ArrayDiff>()
        let token = list.observeDiff { diffs.append($0) }
        list.append(4)
        list.insert(0, at: 0)
        XCTAssertEqual(diffs.entries, [ArrayDiff(inserted: [3]), ArrayDiff(inserted: [0])])
        token.cancel()
    }

    func test_observeDiff_reportsRemovals() {
        let list = ObservableArray(["a", "b", "c", "d"])
        let diffs = Log<ArrayDiff>()
        let token = list.observeDiff { diffs.append($0) }
        list.remove(at: 1)
        list.removeAll()
        XCTAssertEqual(diffs.entries, [ArrayDiff(removed: [1]), ArrayDiff(removed: [0, 1, 2])])
        token.cancel()
    }

    func test_observeDiff_reportsMoves() {
        let list = ObservableArray(["a", "b", "c", "d"])
        let diffs = Log<ArrayDiff>()
        let token = list.observeDiff { diffs.append($0) }
        list.move(from: 0, to: 3)
        XCTAssertEqual(list.value, ["b", "c", "d", "a"])
        XCTAssertEqual(diffs.entries, [ArrayDiff(moved: [.init(from: 0, to: 3)])])
        token.cancel()
    }

    func test_observeDiff_batchIsOneDiff() {
        let list = ObservableArray([1, 2, 3])
        let diffs = Log<ArrayDiff>()
        let token = list.observeDiff { diffs.append($0) }
        batch {
            list.remove(at: 0)
            list.append(9)
        }
        XCTAssertEqual(diffs.entries, [ArrayDiff(removed: [0], inserted: [2])])
        token.cancel()
    }

    func test_diff_appliedToOldGivesNew() {
        var generator = SplitMix64(seed: 7)
        for _ in 0..<200 {
            let old = (0..<Int(generator.next() % 8)).map { _ in Int(generator.next() % 5) }
            let new = (0..<Int(generator.next() % 8)).map { _ in Int(generator.next() % 5) }
            let diff = ArrayDiff(from: old, to: new)
            // Removing `removed` and every move's source, then inserting `inserted` and every move's
            // target, in index order, must rebuild `new`.
            let movedFrom = Set(diff.moved.map(\.from))
            var survivors = old.enumerated().filter { !diff.removed.contains($0.offset) && !movedFrom.contains($0.offset) }.map(\.element)
            let targets = diff.inserted.map { ($0, new[$0]) } + diff.moved.map { ($0.to, old[$0.from]) }
            for (index, element) in targets.sorted(by: { $0.0 < $1.0 }) { survivors.insert(element, at: index) }
            XCTAssertEqual(survivors, new, "old \(old) new \(new) diff \(diff)")
        }
    }

    /// Random edits, alone and in batches, through `observeDiff`: every diff delivered turns the
    /// array before the transaction into the array after it, and one transaction is one diff.
    func test_observeDiff_randomEditsEachDiffRebuildsTheNewArray() {
        var generator = SplitMix64(seed: 11)
        let list = ObservableArray<Int>()
        let changes = Log<(diff: ArrayDiff, old: [Int], new: [Int])>()
        let diffs = list.observeDiff { diff in changes.append((diff, [], [])) }
        let wholes = list.observe { change in changes.append((ArrayDiff(), change.oldValue, change.newValue)) }
        func edit() {
            let count = list.count
            switch generator.next() % 6 {
            case 0: list.append(Int(generator.next() % 6))
            case 1: list.insert(Int(generator.next() % 6), at: Int(generator.next() % UInt64(count + 1)))
            case 2 where count > 0: list.remove(at: Int(generator.next() % UInt64(count)))
            case 3 where count > 0: list.move(from: Int(generator.next() % UInt64(count)), to: Int(generator.next() % UInt64(count)))
            case 4 where count > 0: list[Int(generator.next() % UInt64(count))] = Int(generator.next() % 6)
            default: if generator.next() % 8 == 0 { list.removeAll() } else { list.append(contentsOf: [1, 2]) }
            }
        }
        var transactions = 0
        for _ in 0..<400 {
            let before = list.value
            if generator.next() % 3 == 0 {
                batch { for _ in 0..<(1 + generator.next() % 4) { edit() } }
            } else {
                edit()
            }
            if list.value != before { transactions += 1 }
        }
        let entries = changes.entries
        XCTAssertEqual(entries.count, 2 * transactions, "one diff and one change per transaction that changed the array")
        for pair in stride(from: 0, to: entries.count, by: 2) {
            let diff = entries[pair].diff, old = entries[pair + 1].old, new = entries[pair + 1].new
            let movedFrom = Set(diff.moved.map(\.from))
            var rebuilt = old.enumerated().filter { !diff.removed.contains($0.offset) && !movedFrom.contains($0.offset) }.map(\.element)
            let targets = diff.inserted.map { ($0, new[$0]) } + diff.moved.map { ($0.to, old[$0.from]) }
            for (index, element) in targets.sorted(by: { $0.0 < $1.0 }) { rebuilt.insert(element, at: index) }
            XCTAssertEqual(rebuilt, new, "old \(old) new \(new) diff \(diff)")
        }
        [diffs, wholes].forEach { $0.cancel() }
    }

    func test_arrayValue_isADependency() {
        let list = ObservableArray([1, 2])
        let total = Computed { list.value.reduce(0, +) }
        XCTAssertEqual(total.value, 3)
        list.append(10)
        XCTAssertEqual(total.value, 13)
    }
}

final class RateLimitingTests: XCTestCase {
    func test_throttled_firstAtOnceThenLatestPerInterval() {
        let clock = ManualDelayScheduler()
        let source = Observable(0)
        let throttled = source.throttled(for: .milliseconds(100), scheduler: clock)
        let seen = Log<Int>()
        let token = throttled.observe { seen.append($0.newValue) }
        source.value = 1
        source.value = 2
        source.value = 3
        XCTAssertEqual(seen.entries, [1])
        clock.advance(by: .milliseconds(100))
        XCTAssertEqual(seen.entries, [1, 3])
        clock.advance(by: .milliseconds(100))
        source.value = 4
        XCTAssertEqual(seen.entries, [1, 3, 4], "a quiet interval reopens the window")
        token.cancel()
    }

    /// A change of the source between the copy's first value and its subscription (another
    /// thread's write; here a write its first evaluation queued) is not lost: the copy starts
    /// from the value the subscription saw, not stays on the older one until the next change.
    func test_rateLimited_changeWhileBeingMade_isNotLost() {
        for mode in ["throttled", "debounced"] {
            let clock = ManualDelayScheduler()
            let a = Observable(0)
            let first = Atomic<Bool>(true)
            let source = Computed { () -> Int in
                let value = a.value
                if first.exchange(false, ordering: .relaxed) { a.value = 5 }   // applied right after
                return value
            }
            let copy = mode == "throttled" ? source.throttled(for: .milliseconds(100), scheduler: clock)
                                           : source.debounced(for: .milliseconds(100), scheduler: clock)
            clock.advance(by: .milliseconds(100))
            XCTAssertEqual(copy.value, 5, mode)
        }
    }

    func test_throttled_burstEndingWhereItStartedProducesNothing() {
        let clock = ManualDelayScheduler()
        let source = Observable(0)
        let throttled = source.throttled(for: .milliseconds(100), scheduler: clock)
        let seen = Log<Int>()
        let token = throttled.observe { seen.append($0.newValue) }
        source.value = 1
        source.value = 2
        source.value = 1
        clock.advance(by: .milliseconds(300))
        XCTAssertEqual(seen.entries, [1])
        token.cancel()
    }

    func test_debounced_onlyAfterQuiet() {
        let clock = ManualDelayScheduler()
        let source = Observable(0)
        let debounced = source.debounced(for: .milliseconds(50), scheduler: clock)
        let seen = Log<Int>()
        let token = debounced.observe { seen.append($0.newValue) }
        source.value = 1
        clock.advance(by: .milliseconds(30))
        source.value = 2
        clock.advance(by: .milliseconds(30))
        XCTAssertEqual(seen.entries, [])
        clock.advance(by: .milliseconds(30))
        XCTAssertEqual(seen.entries, [2])
        token.cancel()
    }

    func test_throttled_onADispatchQueueEventuallyCarriesTheLatestValue() {
        let source = Observable(0)
        let queue = DispatchQueue(label: "throttle")
        let throttled = source.throttled(for: .milliseconds(5), on: queue)
        let done = XCTestExpectation(description: "latest value arrives")
        let token = throttled.observe { if $0.newValue == 3 { done.fulfill() } }
        source.value = 1
        source.value = 2
        source.value = 3
        wait(for: [done], timeout: 30)
        token.cancel()
        // The queue's thread delivered the change and may still be finishing that delivery: a
        // write made meanwhile (by the next test) would be delivered by it, after the write
        // returned, as the library documents. Let it finish.
        queue.sync {}
    }
}

@Observation.Observable
final class TrackedModel: @unchecked Sendable {
    var name = "first"
}

final class ObservationBridgeTests: XCTestCase {
    @MainActor
    func test_observableTracking_followsAnObservationProperty() async {
        let model = TrackedModel()
        let name = ObsCore.Observable(tracking: { model.name })
        XCTAssertEqual(name.value, "first")
        let arrived = XCTestExpectation(description: "the change arrives")
        let token = name.observe { if $0.newValue == "second" { arrived.fulfill() } }
        model.name = "second"
        await fulfillment(of: [arrived], timeout: 30)
        XCTAssertEqual(name.value, "second")
        token.cancel()
    }
}
