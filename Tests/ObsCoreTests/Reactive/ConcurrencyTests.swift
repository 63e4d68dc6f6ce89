import Foundation
import Synchronization
import XCTest
@testable import ObsCore

/// Several threads using the library at once: subscribing, cancelling, writing through bindings,
/// firing events, and handlers that wait for other threads.
final class ConcurrencyTests: XCTestCase {
    /// Observers added and cancelled on several threads while others write: a change committed
    /// after `cancel()` returned is never delivered, whatever the scheduler. (A call that began
    /// before may still be running: the handler cannot tell the two apart, so the test looks at the
    /// value: writes only increase it, and one read after `cancel()` is at least every earlier commit.)
    func test_cancelFromManyThreadsWhileWriting_deliversNothingCommittedAfterIt() {
        let source = Observable(0)
        let lateCalls = Counter()
        let stop = Atomic<Bool>(false)
        let writers = DispatchGroup()
        for _ in 0..<2 {
            DispatchQueue.global().async(group: writers) {
                while !stop.load(ordering: .relaxed) { source.modify { $0 += 1 } }
            }
        }
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            let queue = DispatchQueue(label: "test.cancel.\(index)")
            for round in 0..<1_000 {
                let lastBeforeCancel = Atomic<Int>(.max)
                let scheduler: any EventScheduler = round.isMultiple(of: 2) ? ImmediateScheduler() : QueueScheduler(queue)
                let token = source.observe(on: scheduler) { change in
                    if change.newValue > lastBeforeCancel.load(ordering: .acquiring) { lateCalls.bump() }
                }
                if round.isMultiple(of: 3) { _ = source.value }
                token.cancel()
                lastBeforeCancel.store(source.value, ordering: .releasing)
            }
            drain(queue)
        }
        stop.store(true, ordering: .relaxed)
        writers.wait()
        XCTAssertEqual(lateCalls.count, 0)
        XCTAssertNil(source.subs, "every cancelled observer was unlinked")
    }

    /// A two-way binding written on both sides from two threads at once ends with both sides equal.
    func test_twoWayBindingWrittenFromTwoThreads_endsEqual() {
        let left = Observable(0), right = Observable(0)
        let binding = bindTwoWay(left, right, map: { $0 * 2 }, unmap: { $0 / 2 })
        DispatchQueue.concurrentPerform(iterations: 2) { side in
            for value in 1...2_000 {
                if side == 0 { left.value = value } else { right.value = 2 * (value + 5_000) }
            }
        }
        XCTAssertEqual(right.value, 2 * left.value)
        binding.cancel()
    }

    /// A handler that waits for another thread which writes the value being delivered and
    /// subscribes to it: no deadlock, and the other thread's write is delivered after the handler.
    func test_handlerWaitingForAThreadThatWritesAndSubscribes_doesNotDeadlock() {
        let a = Observable(0)
        let seen = Log<String>()
        let added = TokenHolder()
        let token = a.observe { change in
            seen.append("handler \(change.newValue)")
            guard change.newValue == 1 else { return }
            let finished = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                a.value = 2
                added.token = a.observe(initial: true) { seen.append("added \($0.newValue)") }
                finished.signal()
            }
            finished.wait()
            seen.append("handler 1 done")
        }
        let done = expectation(description: "the write returned")
        DispatchQueue.global().async {
            a.value = 1
            done.fulfill()
        }
        wait(for: [done], timeout: 60)
        XCTAssertEqual(seen.entries, ["handler 1", "handler 1 done", "handler 2", "added 2"])
        token.cancel()
        added.token?.cancel()
    }

    /// Events fired from several threads, each handler firing once more: every payload reaches
    /// every subscriber exactly once.
    func test_eventsFiredFromManyThreadsWithNestedFires_reachEverySubscriberOnce() {
        let event = Event<Int>()
        let first = Log<Int>(), second = Log<Int>()
        let t1 = event.subscribe { payload in
            first.append(payload)
            if payload >= 0 { event.fire(-payload - 1) }
        }
        let t2 = event.subscribe { second.append($0) }
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for index in 0..<500 { event.fire(thread * 1_000 + index) }
        }
        var expected: [Int] = []
        for thread in 0..<4 {
            for index in 0..<500 { expected += [thread * 1_000 + index, -(thread * 1_000 + index) - 1] }
        }
        XCTAssertEqual(first.entries.sorted(), expected.sorted())
        XCTAssertEqual(second.entries.sorted(), expected.sorted())
        [t1, t2].forEach { $0.cancel() }
    }
}
