import Foundation
import Synchronization
import XCTest
@testable import ObsCore

/// Everything a subscription holds is released once its token and the user's references go:
/// weak references prove it.
final class ReleaseTests: XCTestCase {
    /// A handler's captures, released with the observer.
    final class Witness: Sendable {}

    func test_computedChainWithObserver_isReleasedWhenTheTokenGoes() {
        weak var source: Observable<Int>?, middle: Computed<Int>?, bottom: Computed<Int>?
        weak var witness: Witness?
        var token: ObservationToken?
        do {
            let a = Observable(1)
            let b = Computed { a.value + 1 }
            let c = Computed { b.value * 2 }
            let captured = Witness()
            token = c.observe { _ in withExtendedLifetime(captured) {} }
            a.value = 2
            (source, middle, bottom, witness) = (a, b, c, captured)
        }
        XCTAssertNotNil(source, "the observer keeps what it observes alive")
        token = nil
        XCTAssertNil(token)
        XCTAssertNil(witness)
        XCTAssertNil(bottom)
        XCTAssertNil(middle)
        XCTAssertNil(source)
    }

    func test_bindToObject_holdsItWeaklyAndReleasesTheSourceOnCancel() {
        final class Label: @unchecked Sendable { var text = "" }
        weak var weakLabel: Label?, weakSource: Observable<Int>?
        var token: ObservationToken?
        do {
            let source = Observable(3)
            let label = Label()
            token = bind(source, to: label) { label, value in label.text = "\(value)" }
            XCTAssertEqual(label.text, "3")
            (weakLabel, weakSource) = (label, source)
        }
        XCTAssertNil(weakLabel, "the target is held weakly")
        weakSource?.value = 4
        token?.cancel()
        XCTAssertNil(weakSource)
    }

    func test_bindings_releaseBothEndsWhenTheTokenGoes() {
        weak var left: Observable<String>?, right: Observable<String>?
        weak var source: Observable<Int>?, target: Observable<Int>?
        var twoWay: ObservationToken?, oneWay: ObservationToken?
        do {
            let l = Observable("x"), r = Observable("")
            twoWay = bindTwoWay(l, r)
            r.value = "y"
            XCTAssertEqual(l.value, "y")
            let s = Observable(1), t = Observable(0)
            oneWay = bind(s, to: t, transform: { $0 * 2 })
            s.value = 2
            XCTAssertEqual(t.value, 4)
            (left, right, source, target) = (l, r, s, t)
        }
        twoWay = nil
        oneWay = nil
        XCTAssertNil(twoWay ?? oneWay)
        XCTAssertNil(left)
        XCTAssertNil(right)
        XCTAssertNil(source)
        XCTAssertNil(target)
    }

    func test_rateLimitedObservable_releasedWithItsSubscription() {
        weak var weakThrottled: Observable<Int>?, weakDebounced: Observable<Int>?
        let source = Observable(0)
        do {
            let throttled = source.throttled(for: .seconds(60), scheduler: ManualDelayScheduler())
            let debounced = source.debounced(for: .seconds(60), scheduler: ManualDelayScheduler())
            source.value = 1
            XCTAssertEqual(throttled.value, 1)
            (weakThrottled, weakDebounced) = (throttled, debounced)
        }
        XCTAssertNil(weakThrottled)
        XCTAssertNil(weakDebounced)
        XCTAssertNil(source.subs, "the rate limiters' observers are unlinked")
    }

    /// Observing a rate-limited copy or a computed without keeping it: the observer keeps it alive.
    func test_observedWithoutBeingKept_isKeptByItsObserver() {
        let clock = ManualDelayScheduler()
        let source = Observable(0)
        let seen = Log<String>()
        var tokens: [ObservationToken] = [
            source.debounced(for: .milliseconds(10), scheduler: clock).observe { seen.append("debounced \($0.newValue)") },
            Computed { source.value * 2 }.observe { seen.append("doubled \($0.newValue)") },
        ]
        source.value = 1
        clock.advance(by: .milliseconds(20))
        XCTAssertEqual(seen.entries, ["doubled 2", "debounced 1"])
        tokens.removeAll()
        XCTAssertNil(source.subs)
    }

    func test_changesStream_unsubscribesWhenDroppedOrLeft() async {
        let source = Observable(0)
        do {
            let unused = source.changes
            _ = unused
        }
        XCTAssertNil(source.subs, "a stream never iterated unsubscribes when dropped")
        let reader = Task { () -> Int in
            for await change in source.changes where change.newValue == 2 { return change.newValue }
            return -1
        }
        while !isSubscribed(source) { await Task.yield() }
        source.value = 1
        source.value = 2
        let last = await reader.value
        XCTAssertEqual(last, 2)
        XCTAssertNil(source.subs, "leaving the loop unsubscribes")
    }

    func test_changesStream_cancellingItsReader_endsItAndUnsubscribes() async {
        let source = Observable(0)
        let reader = Task { () -> Int in
            var seen = 0
            for await _ in source.changes { seen += 1 }
            return seen
        }
        while !isSubscribed(source) { await Task.yield() }
        reader.cancel()
        let seen = await reader.value
        XCTAssertEqual(seen, 0)
        XCTAssertNil(source.subs)
    }

    /// A bag and the tokens in it keep each other alive in one direction only: the bag holds its
    /// tokens (and through them the observers), a token holds its bag weakly.
    func test_observationBag_holdsItsTokens_whichDoNotHoldIt() {
        let source = Observable(0)
        weak var weakBag: ObservationBag?, cancelledToken: ObservationToken?, heldToken: ObservationToken?
        weak var cancelledWitness: Witness?, heldWitness: Witness?
        var bag: ObservationBag? = ObservationBag()
        var outside: ObservationToken?
        do {
            let (first, second) = (Witness(), Witness())
            let cancelled = source.observe { _ in withExtendedLifetime(first) {} }
            let held = source.observe { _ in withExtendedLifetime(second) {} }
            cancelled.store(in: bag!)
            held.store(in: bag!)
            outside = source.observe { _ in }
            outside?.store(in: bag!)
            cancelled.cancel()
            (weakBag, cancelledToken, heldToken, cancelledWitness, heldWitness) = (bag, cancelled, held, first, second)
        }
        XCTAssertNil(cancelledToken, "a cancelled token leaves its bag")
        XCTAssertNil(cancelledWitness)
        XCTAssertNotNil(heldToken, "the bag holds the others")
        bag = nil
        XCTAssertNil(bag)
        XCTAssertNil(weakBag, "tokens do not keep their bag")
        XCTAssertNil(heldToken)
        XCTAssertNil(heldWitness)
        XCTAssertEqual(outside?.isCancelled, true, "a bag cancels every token in it when released")
        outside = nil
        XCTAssertNil(outside)
        XCTAssertNil(source.subs)
    }

    func test_queueSchedulerObserver_isReleasedAfterCancelOnceItsQueueRan() {
        let queue = DispatchQueue(label: "test.release")
        let source = Observable(0)
        weak var witness: Witness?
        var token: ObservationToken?
        do {
            let captured = Witness()
            witness = captured
            token = source.observe(on: QueueScheduler(queue)) { _ in withExtendedLifetime(captured) {} }
        }
        source.value = 1
        token = nil
        XCTAssertNil(token)
        drain(queue)
        XCTAssertNil(witness)
        XCTAssertNil(source.subs)
    }

    func test_eventSubscription_keepsTheEventUntilCancelled_thenBothGo() {
        weak var witness: Witness?, weakEvent: Event<Int>?
        var token: ObservationToken?
        do {
            let event = Event<Int>()
            let captured = Witness()
            token = event.subscribe { _ in withExtendedLifetime(captured) {} }
            event.fire(1)
            (witness, weakEvent) = (captured, event)
        }
        XCTAssertNotNil(weakEvent, "a subscription keeps its event alive")
        token?.cancel()
        XCTAssertNil(witness)
        XCTAssertNil(weakEvent, "a cancelled token lets go of it")
    }

    func test_notificationBridge_stopsWhenTheEventAndItsSubscriptionsGo() {
        let center = NotificationCenter()
        let name = Notification.Name("ReleaseTests.bridge")
        let seen = Counter()
        weak var weakEvent: Event<Notification>?
        var token: ObservationToken?
        do {
            let event = center.observable(for: name)
            token = event.subscribe { _ in seen.bump() }
            center.post(name: name, object: nil)
            weakEvent = event
        }
        center.post(name: name, object: nil)
        XCTAssertEqual(seen.count, 2)
        token = nil
        XCTAssertNil(token)
        XCTAssertNil(weakEvent)
        center.post(name: name, object: nil)
        XCTAssertEqual(seen.count, 2)
    }

    /// Whether anything is subscribed to `node`, read under the engine's lock (another thread may
    /// be subscribing).
    private func isSubscribed(_ node: ReactiveNode) -> Bool {
        engine.enter()
        defer { engine.exit() }
        return node.subs != nil
    }

    /// Something a computed's closure holds writes an observable as it goes away (an owner's
    /// deinit): released at the end of a transaction, it is still part of it, and the observers
    /// of that write are called before the transaction's writer goes on, not at some later write.
    func test_writeFromADeinitRunByARelease_isDeliveredAtOnce() {
        final class Owner: Sendable {
            let closed: Observable<Bool>
            init(_ closed: Observable<Bool>) { self.closed = closed }
            deinit { closed.value = true }
        }
        let closed = Observable(false)
        let seen = Log<Bool>()
        let watcher = closed.observe { seen.append($0.newValue) }
        var token: ObservationToken?
        do {
            let owner = Owner(closed)
            let a = Observable(0)
            let computed = Computed { withExtendedLifetime(owner) { a.value } }
            token = computed.observe { _ in }
        }
        token = nil   // the observer lets go of `computed`, which lets go of `owner`
        XCTAssertNil(token)
        XCTAssertEqual(seen.entries, [true])
        watcher.cancel()
    }
}
