import Foundation
import Synchronization
import XCTest
@testable import ObsCore

/// An event subscriber on an asynchronous scheduler with a bounded buffer: at most the bound
/// waits, the policy says which payloads are dropped, and `onDropped` says how many, at the place
/// of the gap; what is delivered comes in the order fired.
final class EventBufferingTests: XCTestCase {
    /// A scheduler that keeps what it is given until the test runs it.
    private final class HeldScheduler: EventScheduler {
        private let held = Mutex<[@Sendable () -> Void]>([])
        func schedule(_ action: @escaping @Sendable () -> Void) { held.withLock { $0.append(action) } }
        var count: Int { held.withLock { $0.count } }
        /// Runs the first action waiting; false when none did.
        @discardableResult
        func runOne() -> Bool {
            guard let next = held.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return false }
            next()
            return true
        }
        func runAll() { while runOne() {} }
    }

    /// What a subscription saw: payloads as numbers, gaps as negative counts.
    private func subscribe(_ event: Event<Int>, _ scheduler: HeldScheduler, _ buffering: EventBuffering) -> (Log<Int>, ObservationToken) {
        let seen = Log<Int>()
        let token = event.subscribe(on: scheduler, buffering: buffering, onDropped: { seen.append(-$0) }) { seen.append($0) }
        return (seen, token)
    }

    func test_newest_keepsTheLatest_andReportsTheGapBeforeThem() {
        let event = Event<Int>()
        let scheduler = HeldScheduler()
        let (seen, token) = subscribe(event, scheduler, .newest(3))
        defer { token.cancel() }
        for value in 1...10 { event.fire(value) }
        XCTAssertEqual(scheduler.count, 1, "one turn on the scheduler, however many wait")
        scheduler.runAll()
        XCTAssertEqual(seen.entries, [-7, 8, 9, 10])
        event.fire(11)
        scheduler.runAll()
        XCTAssertEqual(seen.entries, [-7, 8, 9, 10, 11], "no gap reported again")
    }

    func test_oldest_keepsTheFirst_andReportsTheGapBeforeTheNextDelivered() {
        let event = Event<Int>()
        let scheduler = HeldScheduler()
        let (seen, token) = subscribe(event, scheduler, .oldest(3))
        defer { token.cancel() }
        for value in 1...10 { event.fire(value) }
        scheduler.runAll()
        XCTAssertEqual(seen.entries, [1, 2, 3])
        event.fire(11)
        scheduler.runAll()
        XCTAssertEqual(seen.entries, [1, 2, 3, -7, 11])
    }

    func test_gapsBetweenDeliveries_areEachReportedWhereTheyAre() {
        let event = Event<Int>()
        let scheduler = HeldScheduler()
        let (seen, token) = subscribe(event, scheduler, .newest(2))
        defer { token.cancel() }
        for value in 1...3 { event.fire(value) }      // 1 dropped
        scheduler.runAll()
        for value in 4...8 { event.fire(value) }      // 4, 5, 6 dropped
        scheduler.runAll()
        XCTAssertEqual(seen.entries, [-1, 2, 3, -3, 7, 8])
    }

    func test_aPayloadFiredDuringADrain_goesInTheNextTurn_inOrder() {
        let event = Event<Int>()
        let scheduler = HeldScheduler()
        let seen = Log<Int>()
        let token = event.subscribe(on: scheduler, buffering: .newest(100)) { value in
            seen.append(value)
            if value < 5 { event.fire(value + 10) }
        }
        defer { token.cancel() }
        for value in 1...3 { event.fire(value) }
        XCTAssertTrue(scheduler.runOne())
        XCTAssertEqual(seen.entries, [1, 2, 3], "a turn delivers what waited when it began")
        scheduler.runAll()
        XCTAssertEqual(seen.entries, [1, 2, 3, 11, 12, 13])
    }

    func test_cancelled_deliversNothing_andReportsNoGap() {
        let event = Event<Int>()
        let scheduler = HeldScheduler()
        let (seen, token) = subscribe(event, scheduler, .newest(2))
        for value in 1...5 { event.fire(value) }
        token.cancel()
        scheduler.runAll()
        XCTAssertEqual(seen.entries, [])
    }

    /// Many threads firing at a subscriber on a slow concurrent queue: calls never overlap, and
    /// every payload is delivered or counted as dropped (a last one, fired once all was delivered,
    /// reports the drops that came after the last delivered one).
    func test_manyFiringThreads_everyPayloadDeliveredOrCounted_oneCallAtATime() {
        for buffering in [EventBuffering.newest(16), .oldest(16)] {
            let event = Event<Int>()
            let queue = DispatchQueue(label: "test.event.buffering", attributes: .concurrent)
            let delivered = Atomic<Int>(0)
            let dropped = Atomic<Int>(0)
            let inside = Atomic<Int>(0)
            let overlaps = Atomic<Int>(0)
            let token = event.subscribe(on: QueueScheduler(queue), buffering: buffering,
                                        onDropped: { dropped.add($0, ordering: .relaxed) }) { _ in
                if inside.add(1, ordering: .acquiringAndReleasing).newValue > 1 { overlaps.add(1, ordering: .relaxed) }
                usleep(20)
                delivered.add(1, ordering: .relaxed)
                inside.subtract(1, ordering: .acquiringAndReleasing)
            }
            /// Waits until a turn on the queue delivers nothing more: a drain that schedules
            /// another does so before the next barrier is queued.
            func settle() {
                var last = -1
                while true {
                    queue.sync(flags: .barrier) {}
                    let now = delivered.load(ordering: .relaxed)
                    if now == last { return }
                    last = now
                    usleep(2_000)
                }
            }
            DispatchQueue.concurrentPerform(iterations: 4) { thread in
                for value in 0..<2_000 { event.fire(thread * 10_000 + value) }
            }
            settle()
            event.fire(-1)
            settle()
            token.cancel()
            XCTAssertEqual(overlaps.load(ordering: .relaxed), 0, "\(buffering)")
            XCTAssertEqual(delivered.load(ordering: .relaxed) + dropped.load(ordering: .relaxed), 8_001, "\(buffering)")
            XCTAssertGreaterThan(dropped.load(ordering: .relaxed), 0, "\(buffering): the slow handler fell behind")
        }
    }
}
