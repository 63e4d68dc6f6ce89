import Foundation
import XCTest
@testable import ObsCore

final class BindingTests: XCTestCase {
    func test_bind_copiesAtOnceAndOnEveryChange() {
        let source = Observable(3), target = Observable(0)
        let binding = bind(source, to: target)
        XCTAssertEqual(target.value, 3)
        source.value = 4
        XCTAssertEqual(target.value, 4)
        binding.cancel()
        source.value = 5
        XCTAssertEqual(target.value, 4)
    }

    func test_bind_targetChangesInTheSameTransactionAsTheSource() {
        let source = Observable(1), target = Observable(0)
        let binding = bind(source, to: target)
        let pair = Computed { "\(source.value)-\(target.value)" }
        let seen = Log<String>()
        let token = pair.observe { seen.append($0.newValue) }
        source.value = 2
        XCTAssertEqual(seen.entries, ["2-2"], "no observer sees the source changed without its target")
        [binding, token].forEach { $0.cancel() }
    }

    func test_bind_withTransform() {
        let source = Observable(3), doubled = Observable(0)
        let binding = bind(source, to: doubled, transform: { $0 * 2 })
        XCTAssertEqual(doubled.value, 6)
        source.value = 10
        XCTAssertEqual(doubled.value, 20)
        binding.cancel()
    }

    func test_bind_fromComputed() {
        let a = Observable(2)
        let square = Computed { a.value * a.value }
        let target = Observable(0)
        let binding = bind(square, to: target)
        a.value = 3
        XCTAssertEqual(target.value, 9)
        binding.cancel()
    }

    func test_bind_targetCanStillBeSetLastWriteWins() {
        let source = Observable(1), target = Observable(0)
        let binding = bind(source, to: target)
        target.value = 42
        XCTAssertEqual(target.value, 42)
        source.value = 2
        XCTAssertEqual(target.value, 2)
        binding.cancel()
    }

    /// In a batch the binding writes at the end, after the batch's own writes, whatever their order.
    func test_bind_inABatchWritesAfterTheBatchsOwnWrites() {
        let source = Observable(1), target = Observable(0)
        let binding = bind(source, to: target)
        let inside = batch { () -> Int in
            source.value = 2
            target.value = 42
            return target.value
        }
        XCTAssertEqual(inside, 42)
        XCTAssertEqual(target.value, 2)
        binding.cancel()
    }

    /// What a transform reads is a dependency of the binding only while it reads it.
    func test_bindTransform_dropsADependencyItNoLongerReads() {
        let useExtra = Observable(true), extra = Observable(100)
        let source = Observable(1), target = Observable(0)
        let binding = bind(source, to: target, transform: { $0 + (useExtra.value ? extra.value : 0) })
        XCTAssertEqual(target.value, 101)
        extra.value = 200
        XCTAssertEqual(target.value, 201)
        useExtra.value = false
        XCTAssertEqual(target.value, 1)
        XCTAssertNil(extra.subs, "the binding no longer reads it")
        target.value = 5
        extra.value = 300
        XCTAssertEqual(target.value, 5, "a write to what the transform no longer reads does not rerun it")
        binding.cancel()
    }

    final class Label: @unchecked Sendable { var text = "" }

    func test_bind_toWeakTargetThroughSetter() {
        let source = Observable(3)
        var label: Label? = Label()
        weak let weakLabel = label
        let binding = bind(source, to: label!) { label, value in label.text = "\(value)" }
        XCTAssertEqual(label?.text, "3")
        source.value = 7
        XCTAssertEqual(label?.text, "7")
        label = nil
        XCTAssertNil(weakLabel, "the binding does not keep its target alive")
        source.value = 8
        binding.cancel()
    }

    func test_bindTwoWay_startsEqualAndDoesNotEcho() {
        let left = Observable("x"), right = Observable("")
        let rightWrites = Counter(), leftWrites = Counter()
        let t1 = right.observe { _ in rightWrites.bump() }
        let t2 = left.observe { _ in leftWrites.bump() }
        let binding = bindTwoWay(left, right)
        XCTAssertEqual(right.value, "x")
        XCTAssertEqual(left.value, "x")

        left.value = "a"
        XCTAssertEqual(right.value, "a")
        right.value = "b"
        XCTAssertEqual(left.value, "b")
        XCTAssertEqual(rightWrites.count, 3)     // initial copy, from left, own write
        XCTAssertEqual(leftWrites.count, 2)      // own write, from right
        [binding, t1, t2].forEach { $0.cancel() }
    }

    /// With lossy conversions an echo would never settle (1.4 -> "1" -> 1.0 -> "1" ...); the binding's
    /// own writes are recognised and not sent back.
    func test_bindTwoWay_withConversionsNeverEchoes() {
        let number = Observable(1.4), text = Observable("")
        let numberChanges = Log<Double>()
        let token = number.observe { numberChanges.append($0.newValue) }
        let binding = bindTwoWay(number, text, map: { String(Int($0)) }, unmap: { Double($0) ?? 0 })
        XCTAssertEqual(text.value, "1")
        XCTAssertEqual(number.value, 1.4, "the initial copy does not come back")
        number.value = 2.6
        XCTAssertEqual(text.value, "2")
        XCTAssertEqual(number.value, 2.6)
        text.value = "5"
        XCTAssertEqual(number.value, 5)
        XCTAssertEqual(numberChanges.entries, [2.6, 5])
        [binding, token].forEach { $0.cancel() }
    }

    /// A transform that reads a failed computed through `.value` gets its last good value, which
    /// fails the binding's run: the target keeps its value (as with a failed source) instead of
    /// taking one computed from the stale value, and follows again once the computed recovers.
    func test_transformReadingAFailedComputed_leavesTheTargetAsItIs() {
        struct Broken: Error {}
        let broken = Observable(false), offset = Observable(10)
        let failing = Computed { () throws -> Int in
            if broken.value { throw Broken() }
            return offset.value
        }
        let source = Observable(1), target = Observable(0), right = Observable(0)
        let oneWay = bind(source, to: target, transform: { $0 + failing.value })
        let twoWay = bindTwoWay(source, right, map: { $0 + failing.value }, unmap: { $0 - failing.value })
        XCTAssertEqual(target.value, 11)
        XCTAssertEqual(right.value, 11)
        broken.value = true
        offset.value = 20
        source.value = 2
        XCTAssertEqual(target.value, 11, "not 2 + the stale 10")
        XCTAssertEqual(right.value, 11)
        right.value = 50
        XCTAssertEqual(source.value, 2, "not 50 - the stale 10")
        broken.value = false
        XCTAssertEqual(target.value, 22)
        [oneWay, twoWay].forEach { $0.cancel() }
    }

    /// Two bindings feeding each other through transforms that never settle
    /// (`a -> b` as +1, `b -> a` as +1) would run forever under the engine lock, hanging every thread
    /// that uses the library. Each binding runs at most `EffectNode.maxRunsPerTransaction` times in
    /// one transaction; the cycle is cut and the engine stays usable. (Run on another thread, so that
    /// a loop fails the test instead of hanging it.)
    func test_bindingCycleThatNeverSettles_isCutInsteadOfLooping() {
        let a = Observable(0), b = Observable(0)
        let tokens = TokenHolder(), other = TokenHolder()
        let settled = expectation(description: "binding and writing return")
        Thread.detachNewThread {
            tokens.token = bind(a, to: b, transform: { $0 + 1 })
            other.token = bind(b, to: a, transform: { $0 + 1 })
            a.value = 1_000
            settled.fulfill()
        }
        guard XCTWaiter().wait(for: [settled], timeout: 60) == .completed else {
            return XCTFail("the bindings are still running: the engine is locked for good")
        }
        let limit = EffectNode.maxRunsPerTransaction
        XCTAssertGreaterThan(a.value, 1_000)
        XCTAssertLessThanOrEqual(a.value, 1_000 + 2 * limit + 1, "each binding ran a bounded number of times")
        let unrelated = Observable(0), copy = Observable(0)
        let binding = bind(unrelated, to: copy)
        unrelated.value = 5
        XCTAssertEqual(copy.value, 5, "bindings still run after a cut")
        [tokens.token, other.token, binding].forEach { $0?.cancel() }
    }
}

final class EventTests: XCTestCase {
    func test_event_firesToSubscribersInOrder() {
        let tapped = Event<String>()
        let seen = Log<String>()
        let t1 = tapped.subscribe { seen.append("1:\($0)") }
        let t2 = tapped.subscribe { seen.append("2:\($0)") }
        tapped.fire("hello")
        XCTAssertEqual(seen.entries, ["1:hello", "2:hello"])
        t1.cancel()
        tapped.fire("again")
        XCTAssertEqual(seen.entries, ["1:hello", "2:hello", "2:again"])
        t2.cancel()
        XCTAssertEqual(tapped.subscriberCount, 0)
    }

    func test_event_onQueueDeliversNothingAfterCancel() {
        let queue = DispatchQueue(label: "test.event")
        let gate = DispatchSemaphore(value: 0)
        queue.async { gate.wait() }
        let event = Event<Int>()
        let seen = Log<Int>()
        let token = event.subscribe(on: QueueScheduler(queue)) { seen.append($0) }
        event.fire(1)
        token.cancel()
        gate.signal()
        drain(queue)
        XCTAssertEqual(seen.entries, [])
    }

    func test_notificationCenterBridge_firesForPostedNotifications() {
        let center = NotificationCenter()
        let name = Notification.Name("obscore.test")
        let event = center.observable(for: name)
        let seen = Counter()
        let token = event.subscribe { notification in
            if notification.name == name { seen.bump() }
        }
        center.post(name: name, object: nil)
        center.post(name: Notification.Name("other"), object: nil)
        XCTAssertEqual(seen.count, 1)
        token.cancel()
    }

    /// A subscription keeps its event alive: subscribing to the bridge's event without keeping the
    /// event (the natural one-liner) still receives the notifications until the token goes.
    func test_notificationCenterBridge_subscribedWithoutKeepingTheEvent_stillFires() {
        let center = NotificationCenter()
        let name = Notification.Name("obscore.test.oneLiner")
        let seen = Counter()
        var token: ObservationToken? = center.observable(for: name).subscribe { _ in seen.bump() }
        center.post(name: name, object: nil)
        XCTAssertEqual(seen.count, 1)
        token = nil
        center.post(name: name, object: nil)
        XCTAssertEqual(seen.count, 1, "the registration went with the token")
        XCTAssertNil(token)
    }
}
