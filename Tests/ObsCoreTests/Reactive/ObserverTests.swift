import Foundation
import Synchronization
import XCTest
@testable import ObsCore

/// Guarantees of observers, tokens and schedulers.
final class ObserverTests: XCTestCase {
    func test_observe_initialIsCalledOnceAtOnce() {
        let a = Observable(3)
        let seen = Log<Change<Int>>()
        let token = a.observe(initial: true) { seen.append($0) }
        defer { token.cancel() }
        XCTAssertEqual(seen.entries, [Change(oldValue: 3, newValue: 3, isInitial: true)])
        a.value = 4
        XCTAssertEqual(seen.entries.last, Change(oldValue: 3, newValue: 4))
    }

    func test_handlers_runInTheOrderTheyWereAdded() {
        let a = Observable(0)
        let order = Log<Int>()
        let tokens = (0..<10).map { index in a.observe { _ in order.append(index) } }
        a.value = 1
        XCTAssertEqual(order.entries, Array(0..<10))
        tokens.forEach { $0.cancel() }
    }

    func test_token_cancelsWhenReleased() {
        let a = Observable(0)
        let seen = Counter()
        do {
            let token = a.observe { _ in seen.bump() }
            a.value = 1
            _ = token
        }
        a.value = 2
        XCTAssertEqual(seen.count, 1)
        XCTAssertNil(a.subs, "the released observer is unlinked")
    }

    func test_observationBag_cancelsAllTogether() {
        let a = Observable(0)
        let seen = Counter()
        let bag = ObservationBag()
        a.observe { _ in seen.bump() }.store(in: bag)
        a.observe { _ in seen.bump() }.store(in: bag)
        a.value = 1
        XCTAssertEqual(seen.count, 2)
        bag.cancelAll()
        a.value = 2
        XCTAssertEqual(seen.count, 2)
    }

    /// A program that subscribes and cancels through one bag for as long as it runs keeps only
    /// what is live in it.
    func test_observationBag_cancelledTokensLeaveIt() {
        let a = Observable(0)
        let bag = ObservationBag()
        weak var first: ObservationToken?
        var most = 0
        for index in 0..<100_000 {
            let token = a.observe { _ in }
            token.store(in: bag)
            if index == 0 { first = token }
            token.cancel()
            most = max(most, bag.count)
        }
        XCTAssertEqual(most, 0)
        XCTAssertEqual(bag.count, 0)
        XCTAssertNil(first, "the bag let go of the cancelled token")
        let live = a.observe { _ in }
        live.store(in: bag)
        a.observe { _ in }.store(in: bag)
        XCTAssertEqual(bag.count, 2)
        live.cancel()
        XCTAssertEqual(bag.count, 1)
        let cancelled = a.observe { _ in }
        cancelled.cancel()
        cancelled.store(in: bag)
        XCTAssertEqual(bag.count, 1, "a token cancelled already is not kept")
        bag.cancelAll()
        XCTAssertEqual(bag.count, 0)
        XCTAssertNil(a.subs)
    }

    func test_observationBag_cancelAll_inTheOrderAdded_skippingThoseCancelled() {
        let order = Log<Int>()
        let bag = ObservationBag()
        let tokens = (0..<6).map { index in ObservationToken { order.append(index) } }
        tokens.forEach { $0.store(in: bag) }
        tokens[1].cancel()
        tokens[4].cancel()
        XCTAssertEqual(bag.count, 4)
        bag.cancelAll()
        XCTAssertEqual(order.entries, [1, 4, 0, 2, 3, 5])
    }

    func test_observationBag_manyThreadsAddingAndCancelling() {
        let a = Observable(0)
        let bag = ObservationBag()
        let kept = Log<ObservationToken>()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for index in 0..<2_000 {
                let token = a.observe { _ in }
                token.store(in: bag)
                if index % 4 == 0 { kept.append(token) } else { token.cancel() }
            }
        }
        XCTAssertEqual(bag.count, 8 * 500)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for (index, token) in kept.entries.enumerated() where index % 8 == thread { token.cancel() }
        }
        XCTAssertEqual(bag.count, 0)
        XCTAssertNil(a.subs)
    }

    func test_setOfObservations_holdsTokens() {
        let a = Observable(0)
        let seen = Counter()
        var set = Set<ObservationToken>()
        set.insert(a.observe { _ in seen.bump() })
        a.value = 1
        set.removeAll()
        a.value = 2
        XCTAssertEqual(seen.count, 1)
    }

    func test_queueScheduler_deliversNothingAfterCancel() {
        let queue = DispatchQueue(label: "test.observer")
        let a = Observable(0)
        let seen = Log<Int>()
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }          // hold the queue so deliveries pile up behind it
        let token = a.observe(on: QueueScheduler(queue)) { seen.append($0.newValue) }
        a.value = 1
        a.value = 2
        token.cancel()
        gate.signal()
        drain(queue)
        XCTAssertEqual(seen.entries, [], "changes queued before cancel are not delivered after it")
    }

    func test_queueScheduler_deliversInOrderOnTheQueue() {
        let queue = DispatchQueue(label: "test.order")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let a = Observable(0)
        let seen = Log<Int>()
        let onQueue = Log<Bool>()
        let token = a.observe(on: QueueScheduler(queue)) { change in
            onQueue.append(DispatchQueue.getSpecific(key: key) == true)
            seen.append(change.newValue)
        }
        for value in 1...100 { a.value = value }
        drain(queue)
        token.cancel()
        XCTAssertEqual(seen.entries, Array(1...100))
        XCTAssertEqual(Set(onQueue.entries), [true])
    }

    /// The initial value is captured when observing starts and delivered before any later change,
    /// even when the queue runs much later.
    func test_queueScheduler_initialValueIsNeverStale() {
        let queue = DispatchQueue(label: "test.initial")
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }
        let a = Observable(1)
        let seen = Log<Change<Int>>()
        let token = a.observe(initial: true, on: QueueScheduler(queue)) { seen.append($0) }
        a.value = 2
        a.value = 3
        gate.signal()
        drain(queue)
        token.cancel()
        XCTAssertEqual(seen.entries, [
            Change(oldValue: 1, newValue: 1, isInitial: true),
            Change(oldValue: 1, newValue: 2),
            Change(oldValue: 2, newValue: 3),
        ])
    }

    /// A write from inside a handler is applied after the current transaction, FIFO: handlers of
    /// the first change all run before any handler sees the second.
    func test_observerWritingDuringNotification_isQueuedFIFO() {
        let a = Observable(0), b = Observable(0)
        let events = Log<String>()
        let t1 = a.observe { change in
            events.append("a1:\(change.newValue)")
            if change.newValue == 1 {
                b.value = 10
                events.append("after write b=\(b.value)")
                a.value = 2
            }
        }
        let t2 = a.observe { change in events.append("a2:\(change.newValue)") }
        let t3 = b.observe { change in events.append("b:\(change.newValue)") }
        a.value = 1
        XCTAssertEqual(events.entries, [
            "a1:1", "after write b=0", "a2:1",
            "b:10",
            "a1:2", "a2:2",
        ])
        XCTAssertEqual(b.value, 10)
        XCTAssertEqual(a.value, 2)
        [t1, t2, t3].forEach { $0.cancel() }
    }

    func test_observerBatchDuringNotification_isOneTransaction() {
        let a = Observable(0), x = Observable(0), y = Observable(0)
        let runs = Counter()
        let sum = Computed { runs.bump(); return x.value + y.value }
        let sums = Log<Int>()
        let t1 = sum.observe { sums.append($0.newValue) }
        let t2 = a.observe { _ in batch { x.value = 1; y.value = 2 } }
        a.value = 1
        XCTAssertEqual(sums.entries, [3])
        XCTAssertEqual(runs.count, 2)
        [t1, t2].forEach { $0.cancel() }
    }

    func test_writeInsideComputedClosure_isDeferredUntilAfterTheTransaction() {
        let a = Observable(1), sideEffect = Observable(0)
        let c = Computed { () -> Int in
            sideEffect.value = a.value * 100
            return a.value
        }
        XCTAssertEqual(c.value, 1)
        XCTAssertEqual(sideEffect.value, 100)
    }

    func test_cancelInsideHandler_stopsFurtherDeliveries() {
        let a = Observable(0)
        let seen = Counter()
        let holder = TokenHolder()
        holder.token = a.observe { _ in
            seen.bump()
            holder.token?.cancel()
        }
        a.value = 1
        a.value = 2
        XCTAssertEqual(seen.count, 1)
    }

    /// A token released by another handler while its own change waits in the same batch: that
    /// change is dropped, and the observer and its handler are freed once the batch is delivered.
    func test_tokenReleasedWhileItsChangeWaits_isNeverCalledAndFreedAfterTheBatch() {
        final class Witness: Sendable {}
        let a = Observable(0)
        let seen = Counter()
        let holder = TokenHolder()
        weak var witness: Witness?
        let first = a.observe { _ in holder.token = nil }
        do {
            let captured = Witness()
            witness = captured
            holder.token = a.observe { _ in withExtendedLifetime(captured) { seen.bump() } }
        }
        a.value = 1
        XCTAssertEqual(seen.count, 0, "the second handler's change was queued, then its token went")
        XCTAssertNil(witness, "the observer and its handler were released after the batch")
        a.value = 2
        XCTAssertEqual(seen.count, 0)
        first.cancel()
    }

    func test_changes_isAnAsyncSequence() async {
        let a = Observable(0)
        let stream = a.changes
        let reader = Task { () -> [Int] in
            var values: [Int] = []
            for await change in stream {
                values.append(change.newValue)
                if values.count == 3 { break }
            }
            return values
        }
        a.value = 1
        a.value = 2
        a.value = 3
        let values = await reader.value
        XCTAssertEqual(values, [1, 2, 3])
    }

    /// A reader that does not keep up: at most `ChangeBuffer.limit` changes wait for it, and the
    /// later ones are merged into the last, so it still ends on the latest value, each change
    /// starting where the one before ended.
    func test_changes_slowReader_isBounded_andEndsOnTheLatestValue() async {
        let a = Observable(0)
        let stream = a.changes
        for value in 1...100_000 { a.value = value }
        var received: [Change<Int>] = []
        for await change in stream {
            received.append(change)
            if change.newValue == 100_000 { break }
        }
        let limit = ChangeBuffer<Int>.limit
        XCTAssertLessThanOrEqual(received.count, limit)
        XCTAssertEqual(received.dropLast().map(\.newValue), Array(1..<limit), "the changes before the limit as they came")
        XCTAssertEqual(received.last, Change(oldValue: limit - 1, newValue: 100_000))
        XCTAssertEqual(received.first?.oldValue, 0)
    }

    /// Changes merged into one that ends where it started are no change (for `Equatable` values).
    func test_changeBuffer_dropsAMergeBackToTheStart() async {
        let buffer = ChangeBuffer<Int>(limit: 2, isEqual: ==)
        for (old, new) in [(0, 1), (1, 2), (2, 3), (3, 1), (1, 5)] { buffer.push(Change(oldValue: old, newValue: new)) }
        let first = await buffer.next(), second = await buffer.next()
        XCTAssertEqual([first, second], [Change(oldValue: 0, newValue: 1), Change(oldValue: 1, newValue: 5)])
    }

    func test_manyThreadsWritingAtOnce_loseNoUpdateAndDoNotDeadlock() {
        let counter = Observable(0)
        let doubled = Computed { counter.value * 2 }
        let seen = Log<Int>()
        let token = doubled.observe { seen.append($0.newValue) }
        let threads = 8, increments = 2_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<increments {
                counter.modify { $0 += 1 }
                _ = doubled.value
            }
        }
        token.cancel()
        XCTAssertEqual(counter.value, threads * increments)
        XCTAssertEqual(doubled.value, 2 * threads * increments)
        XCTAssertEqual(seen.entries, Array(1...(threads * increments)).map { $0 * 2 },
                       "every change delivered once, in commit order")
    }

    func test_handlersMayReadAndObserveFromOtherThreadsWhileDelivering() {
        let a = Observable(0)
        let inner = Log<Int>()
        let token = a.observe { change in
            let reader = DispatchQueue(label: "reader")
            reader.sync { inner.append(a.value) }    // another thread reads while we deliver
        }
        a.value = 5
        token.cancel()
        XCTAssertEqual(inner.entries, [5])
    }
}

final class TokenHolder: @unchecked Sendable {
    var token: ObservationToken?
}
