import Foundation
import Synchronization
import XCTest
@testable import ObsCore

/// An observer on an asynchronous scheduler that falls behind: at most `ChangeBuffer.limit` calls
/// wait on the scheduler, later changes are merged into the last, and its handler still ends on
/// the latest value, each change starting where the one before ended.
final class ScheduledDeliveryTests: XCTestCase {
    private let limit = ChangeBuffer<Int>.limit

    /// A scheduler that keeps what it is given until the test runs it: what waits on it can be
    /// counted.
    private final class HeldScheduler: EventScheduler {
        private let held = Mutex<[@Sendable () -> Void]>([])
        func schedule(_ action: @escaping @Sendable () -> Void) { held.withLock { $0.append(action) } }
        var count: Int { held.withLock { $0.count } }
        /// Runs what waits, in order, and what that schedules, until nothing waits.
        func runAll() {
            while let next = held.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { next() }
        }
    }

    /// Checks that `changes` follow on from each other from `start` and end on `end`.
    private func assertChained(_ changes: [Change<Int>], from start: Int, to end: Int,
                               file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(changes.first?.oldValue, start, "the first change starts from the value observed", file: file, line: line)
        XCTAssertEqual(changes.last?.newValue, end, "the last change ends on the latest value", file: file, line: line)
        let breaks = zip(changes, changes.dropFirst()).filter { $0.newValue != $1.oldValue }
        XCTAssertEqual(breaks.count, 0, "each change starts where the one before ended: \(breaks.prefix(3))", file: file, line: line)
    }

    func test_queueScheduler_slowQueue_isBounded_andEndsOnTheLatestValue() {
        let queue = DispatchQueue(label: "test.scheduled.slow")
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }          // hold the queue so deliveries pile up behind it
        let a = Observable(0)
        let seen = Log<Change<Int>>()
        let token = a.observe(on: QueueScheduler(queue)) { seen.append($0) }
        for value in 1...100_000 { a.value = value }
        gate.signal()
        drain(queue)
        token.cancel()
        let changes = seen.entries
        XCTAssertLessThanOrEqual(changes.count, limit, "at most \(limit) calls waited on the queue")
        XCTAssertEqual(changes.dropLast().map(\.newValue), Array(1..<limit), "the changes before the limit as they came")
        XCTAssertEqual(changes.last, Change(oldValue: limit - 1, newValue: 100_000))
        assertChained(changes, from: 0, to: 100_000)
    }

    func test_heldScheduler_neverHoldsMoreThanTheLimit() {
        let scheduler = HeldScheduler()
        let a = Observable(0)
        let seen = Log<Change<Int>>()
        let token = a.observe(on: scheduler) { seen.append($0) }
        var most = 0
        for value in 1...100_000 {
            a.value = value
            most = max(most, scheduler.count)
        }
        XCTAssertEqual(most, limit, "at most \(limit) calls waited")
        XCTAssertEqual(scheduler.count, limit, "\(limit - 1) changes, then one call for all the rest")
        scheduler.runAll()
        XCTAssertEqual(seen.entries.count, limit)
        assertChained(seen.entries, from: 0, to: 100_000)

        // Once the calls have run, changes are scheduled one by one again.
        a.value = 1
        a.value = 2
        XCTAssertEqual(scheduler.count, 2)
        scheduler.runAll()
        XCTAssertEqual(seen.entries.suffix(2), [Change(oldValue: 100_000, newValue: 1), Change(oldValue: 1, newValue: 2)])
        token.cancel()
    }

    /// Calls that start while changes are still coming: slots are taken and filled again as the
    /// writer goes on (on this machine 100,000 writes made about 7,700 calls, a few of them merged),
    /// and the handler's view stays chained whatever the timing.
    func test_queueScheduler_fastWriterAndRunningQueue_staysChainedAndEndsOnTheLatestValue() {
        let queue = DispatchQueue(label: "test.scheduled.racing")
        let a = Observable(0)
        let seen = Log<Change<Int>>()
        let token = a.observe(on: QueueScheduler(queue)) { change in
            usleep(20)    // slower than the writer
            seen.append(change)
        }
        for value in 1...100_000 { a.value = value }
        drain(queue)
        token.cancel()
        assertChained(seen.entries, from: 0, to: 100_000)
        XCTAssertEqual(seen.entries.filter { $0.oldValue == $0.newValue }, [], "no change ends where it started")
    }

    func test_initialCall_comesFirst_thenMergedChanges() {
        let scheduler = HeldScheduler()
        let a = Observable(5)
        let seen = Log<Change<Int>>()
        let token = a.observe(initial: true, on: scheduler) { seen.append($0) }
        for value in 1...10_000 { a.value = value }
        XCTAssertEqual(scheduler.count, limit)
        scheduler.runAll()
        XCTAssertEqual(seen.entries.first, Change(oldValue: 5, newValue: 5, isInitial: true))
        assertChained(Array(seen.entries.dropFirst()), from: 5, to: 10_000)
        token.cancel()
    }

    /// A merge that comes back to where it started is no change: the slot empties, and fills again
    /// from there.
    func test_mergeBackToTheStart_deliversNothing_andTheNextChangeStartsThere() {
        let scheduler = HeldScheduler()
        let a = Observable(0)
        let seen = Log<Change<Int>>()
        let token = a.observe(on: scheduler) { seen.append($0) }
        for value in 1..<limit { a.value = value }
        a.value = -1                        // into the slot: limit - 1 -> -1
        a.value = limit - 1                 // back where it started
        XCTAssertEqual(scheduler.count, limit)
        scheduler.runAll()
        XCTAssertEqual(seen.entries.count, limit - 1, "the merged change came to nothing")
        a.value = -1
        a.value = limit - 1
        a.value = 7
        scheduler.runAll()
        assertChained(seen.entries, from: 0, to: 7)
        token.cancel()
    }

    private struct Failure: Error {
        let value: Int
    }

    /// `value`, failing for negative values, observed on `scheduler` into `seen`.
    private func observeFailing(_ a: Observable<Int>, on scheduler: HeldScheduler, into seen: Log<String>) -> ObservationToken {
        let checked = Computed { () throws -> Int in
            if a.value < 0 { throw Failure(value: a.value) }
            return a.value
        }
        return checked.observe(on: scheduler, onError: { seen.append("error \(($0 as? Failure)?.value ?? 0)") }) {
            seen.append("\($0.oldValue)->\($0.newValue)")
        }
    }

    /// The slot holds the latest outcome: a merged change, then the latest error after it.
    func test_errorWhileMerging_isDeliveredAfterTheMergedChange() {
        let scheduler = HeldScheduler()
        let a = Observable(0)
        let seen = Log<String>()
        let token = observeFailing(a, on: scheduler, into: seen)
        for value in 1...(limit + 10) { a.value = value }
        a.value = -1
        a.value = -2
        XCTAssertEqual(scheduler.count, limit)
        scheduler.runAll()
        XCTAssertEqual(seen.entries.suffix(2), ["\(limit - 1)->\(limit + 10)", "error -2"])
        XCTAssertEqual(seen.entries.count, limit + 1)
        token.cancel()
    }

    /// An error then a value, while merging: the value is delivered, the error is not.
    func test_errorThenValueWhileMerging_deliversTheValue() {
        let scheduler = HeldScheduler()
        let a = Observable(0)
        let seen = Log<String>()
        let token = observeFailing(a, on: scheduler, into: seen)
        for value in 1...(limit + 10) { a.value = value }
        a.value = -1
        a.value = 7
        scheduler.runAll()
        XCTAssertEqual(seen.entries.last, "\(limit - 1)->7")
        XCTAssertEqual(seen.entries.filter { $0.hasPrefix("error") }, [])
        // The slot began with an error: the value after it starts from the last good value.
        for value in 1..<limit { a.value = value + 100 }
        a.value = -5
        a.value = 9
        scheduler.runAll()
        XCTAssertEqual(seen.entries.last, "\(limit - 1 + 100)->9")
        token.cancel()
    }

    func test_cancel_dropsTheWaitingAndMergedCalls() {
        let queue = DispatchQueue(label: "test.scheduled.cancel")
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }
        let a = Observable(0)
        let calls = Counter()
        let token = a.observe(on: QueueScheduler(queue)) { _ in calls.bump() }
        for value in 1...100_000 { a.value = value }
        token.cancel()
        a.value = -1
        gate.signal()
        drain(queue)
        XCTAssertEqual(calls.count, 0, "nothing is delivered after cancel() returned")
    }

    /// The handler cancels its own token part way: nothing after that call.
    func test_cancelFromTheHandler_stopsDeliveryWhileMerging() {
        let queue = DispatchQueue(label: "test.scheduled.selfCancel")
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }
        let a = Observable(0)
        let seen = Log<Int>()
        let holder = Mutex<ObservationToken?>(nil)
        let token = a.observe(on: QueueScheduler(queue)) { change in
            seen.append(change.newValue)
            if change.newValue == 10 { holder.withLock { $0?.cancel() } }
        }
        holder.withLock { $0 = token }
        for value in 1...100_000 { a.value = value }
        gate.signal()
        drain(queue)
        XCTAssertEqual(seen.entries, Array(1...10))
    }
}
