import Foundation
import Synchronization
import XCTest
@testable import ObsCore

/// Handlers and closures that use the library while it is calling them: writes, cancellations and
/// subscriptions made from inside a notification.
final class ReentrancyTests: XCTestCase {
    /// Two read-modify-writes made by handlers while a change is delivered are both applied: each
    /// reads the value the one before it wrote, as `modify` promises.
    func test_modifyInsideHandler_losesNoUpdate() {
        let trigger = Observable(0), counter = Observable(0)
        let first = trigger.observe { _ in counter.modify { $0 += 1 } }
        let second = trigger.observe { _ in
            counter.modify { $0 += 10 }
            counter.modify { $0 += 100 }
        }
        trigger.value = 1
        XCTAssertEqual(counter.value, 111)
        [first, second].forEach { $0.cancel() }
    }

    /// An `ObservableArray` edited by several observers of one change keeps every edit, and its diff
    /// observer sees them in the order they were made.
    func test_arrayEditsInsideHandlers_areAllKept() {
        let trigger = Observable(0)
        let log = ObservableArray<String>()
        let diffs = Log<ArrayDiff>()
        let diffToken = log.observeDiff { diffs.append($0) }
        let first = trigger.observe { change in log.append("first \(change.newValue)") }
        let second = trigger.observe { change in
            log.append("second \(change.newValue)")
            log.insert("front", at: 0)
        }
        trigger.value = 1
        XCTAssertEqual(log.value, ["front", "first 1", "second 1"])
        XCTAssertEqual(diffs.entries, [ArrayDiff(inserted: [0]), ArrayDiff(inserted: [1]), ArrayDiff(inserted: [0])])
        [diffToken, first, second].forEach { $0.cancel() }
    }

    /// A read-modify-write made by a computed's closure (deferred until after the transaction) reads
    /// the value as it is when applied.
    func test_modifyInsideComputedClosure_losesNoUpdate() {
        let a = Observable(1), reads = Observable(0)
        let c = Computed { () -> Int in
            reads.modify { $0 += 1 }
            reads.modify { $0 += 1 }
            return a.value
        }
        XCTAssertEqual(c.value, 1)
        XCTAssertEqual(reads.value, 2)
    }

    /// A handler that cancels a handler added after it, in the middle of delivering a change: the
    /// cancelled one is not called for it, nor later.
    func test_handlerCancellingALaterHandler_stopsItAtOnce() {
        let a = Observable(0)
        let seen = Log<String>()
        let holder = TokenHolder()
        let first = a.observe { change in
            seen.append("first \(change.newValue)")
            holder.token?.cancel()
        }
        holder.token = a.observe { change in seen.append("second \(change.newValue)") }
        a.value = 1
        a.value = 2
        XCTAssertEqual(seen.entries, ["first 1", "first 2"])
        first.cancel()
    }

    /// A handler that adds an observer while a change is delivered: the new observer sees only
    /// changes committed after it was added, each once, in order with the others.
    func test_handlerAddingAnObserver_seesOnlyLaterChanges() {
        let a = Observable(0)
        let seen = Log<String>()
        let added = TokenHolder()
        let first = a.observe { change in
            seen.append("first \(change.newValue)")
            if added.token == nil {
                added.token = a.observe { change in seen.append("added \(change.oldValue)->\(change.newValue)") }
            }
        }
        a.value = 1
        a.value = 2
        XCTAssertEqual(seen.entries, ["first 1", "first 2", "added 1->2"])
        first.cancel()
        added.token?.cancel()
    }

    /// A write made by a handler is delivered to every handler after the change being delivered,
    /// so all handlers see the changes in the same order.
    func test_writeFromHandler_isDeliveredToAllHandlersAfterTheCurrentChange() {
        let a = Observable(0)
        let first = Log<Int>(), second = Log<Int>()
        let t1 = a.observe { change in
            first.append(change.newValue)
            if change.newValue == 1 { a.value = 2 }
        }
        let t2 = a.observe { second.append($0.newValue) }
        a.value = 1
        XCTAssertEqual(first.entries, [1, 2])
        XCTAssertEqual(second.entries, [1, 2])
        [t1, t2].forEach { $0.cancel() }
    }

    /// Event handlers: one cancelling a later one stops it for the payload being fired; one
    /// subscribing is not called for it; one firing again is called in order, after.
    func test_eventHandlersCancellingSubscribingAndFiring() {
        let event = Event<Int>()
        let seen = Log<String>()
        let later = TokenHolder(), added = TokenHolder()
        let first = event.subscribe { payload in
            seen.append("first \(payload)")
            later.token?.cancel()
            if added.token == nil {
                added.token = event.subscribe { seen.append("added \($0)") }
            }
        }
        later.token = event.subscribe { seen.append("later \($0)") }
        event.fire(1)
        event.fire(2)
        XCTAssertEqual(seen.entries, ["first 1", "first 2", "added 2"])
        XCTAssertEqual(event.subscriberCount, 2)
        first.cancel()
        added.token?.cancel()
        XCTAssertEqual(event.subscriberCount, 0)
    }

    /// A handler reading a computed in a diamond sees it consistent with the change delivered.
    ///
    ///         a
    ///        / \
    ///     left  right
    ///        \ /
    ///       bottom
    func test_computedReadInsideHandler_isConsistentWithTheChange() {
        let a = Observable(1)
        let left = Computed { a.value + 1 }, right = Computed { a.value * 10 }
        let bottom = Computed { left.value + right.value }
        let seen = Log<String>()
        let token = a.observe { change in seen.append("\(change.newValue): \(bottom.value)") }
        a.value = 2
        batch { a.value = 3; a.value = 4 }
        XCTAssertEqual(seen.entries, ["2: 23", "4: 45"])
        token.cancel()
    }
}

extension ReentrancyTests {
    /// A handler firing the event it is handling: the new payload reaches every subscriber after the
    /// one under way, so a later subscriber does not see the payloads reversed (ending on the stale one).
    func test_eventFiredFromItsHandler_isDeliveredAfterTheCurrentPayloadInOrder() {
        let event = Event<Int>()
        let seen = Log<String>()
        let first = event.subscribe { payload in
            seen.append("first \(payload)")
            if payload == 1 {
                event.fire(2)
                event.fire(3)
            }
        }
        let second = event.subscribe { seen.append("second \($0)") }
        event.fire(1)
        XCTAssertEqual(seen.entries, ["first 1", "second 1", "first 2", "second 2", "first 3", "second 3"])
        event.fire(4)
        XCTAssertEqual(seen.entries.suffix(2), ["first 4", "second 4"], "the event fires again once it drained")
        [first, second].forEach { $0.cancel() }
    }
}

extension ReentrancyTests {
    /// `observe(initial: true)` called by a handler calls the new handler before it returns, as it
    /// does anywhere else, and the changes after it still follow in order.
    func test_observeInitialFromAHandler_isCalledAtOnce() {
        let trigger = Observable(0), watched = Observable(7)
        let seen = Log<String>()
        let added = TokenHolder()
        let outer = trigger.observe { _ in
            added.token = watched.observe(initial: true) { change in
                seen.append("\(change.isInitial ? "initial" : "change") \(change.newValue)")
            }
            seen.append("observe returned")
            watched.value = 8
        }
        trigger.value = 1
        XCTAssertEqual(seen.entries, ["initial 7", "observe returned", "change 8"])
        outer.cancel()
        added.token?.cancel()
    }

    /// The same for a weak-target binding made by a handler: the target is set before `bind` returns.
    func test_bindToObjectFromAHandler_setsTheTargetAtOnce() {
        final class Label: @unchecked Sendable { var text = "" }
        let trigger = Observable(0), source = Observable(3)
        let label = Label()
        let seenInside = Log<String>()
        let binding = TokenHolder()
        let outer = trigger.observe { _ in
            binding.token = bind(source, to: label) { label, value in label.text = "\(value)" }
            seenInside.append(label.text)
        }
        trigger.value = 1
        XCTAssertEqual(seenInside.entries, ["3"])
        outer.cancel()
        binding.token?.cancel()
    }

    /// A failing computed observed with `initial` from a handler reports its error at once.
    func test_observeInitialFromAHandler_reportsAnErrorAtOnce() {
        struct Failure: Error, Equatable {}
        let trigger = Observable(0)
        let failing = Computed<Int> { throw Failure() }
        let seen = Log<String>()
        let added = TokenHolder()
        let outer = trigger.observe { _ in
            added.token = failing.observe(initial: true, onError: { seen.append("error \($0 is Failure)") }) { _ in
                seen.append("value")
            }
            seen.append("observe returned")
        }
        trigger.value = 1
        XCTAssertEqual(seen.entries, ["error true", "observe returned"])
        outer.cancel()
        added.token?.cancel()
    }

    /// Logs when it goes away: what a handler or transform captures, freed with its subscription.
    final class Witness: Sendable {
        let log: Log<String>
        init(_ log: Log<String>) { self.log = log }
        deinit { log.append("freed") }
    }

    /// A binding whose transform cancels the binding itself (bind until a condition holds), then
    /// reads a value it never read before: the run under way finishes with the binding alive and
    /// linked (the new read is linked like any other, and unlinked with the rest once the
    /// transaction has settled), nothing runs after it, and a write to `extra` reaches nothing.
    /// ```
    /// a -----bind(transform cancels at 3, then reads extra)--> b
    /// extra -'
    /// ```
    func test_transformCancellingItsOwnBinding_stopsItThere() {
        let a = Observable(0), b = Observable(0), extra = Observable(100)
        let binding = TokenHolder()
        let log = Log<String>()
        do {
            let captured = Witness(log)
            binding.token = bind(a, to: b) { value in
                withExtendedLifetime(captured) { log.append("run \(value)") }
                guard value == 3 else { return value }
                binding.token?.cancel()
                log.append("cancelled")
                return value + extra.value
            }
        }
        for value in 1...6 { a.value = value }
        extra.value = 200
        XCTAssertEqual(b.value, 103, "the run that cancelled finished its write; none after")
        XCTAssertEqual(log.entries, ["run 0", "run 1", "run 2", "run 3", "cancelled", "freed"])
        XCTAssertFalse(extra.hasSubscribers, "nothing is left linked to what the last run read")
        binding.token = nil
    }

    /// A computed whose closure cancels the observer of it (an owner letting go of its token, say):
    /// the observer is kept, with its links, until the transaction settles (the engine is walking
    /// through them: it used to free them under the walk), is never called again, and is freed then.
    /// ```
    /// c --> doubled --> watched (closure cancels watched's observer at 4) --> observer
    /// ```
    func test_computedClosureCancellingItsObserver_neverCallsItAgainAndFreesIt() {
        let c = Observable(0)
        let doubled = Computed { c.value * 2 }
        let observer = TokenHolder()
        let log = Log<String>()
        let watched = Computed { () -> Int in
            let value = doubled.value
            if value == 4 {
                observer.token?.cancel()
                log.append("cancelled")
            }
            return value
        }
        do {
            let captured = Witness(log)
            observer.token = watched.observe { change in withExtendedLifetime(captured) { log.append("seen \(change.newValue)") } }
        }
        for value in 1...4 { c.value = value }
        XCTAssertEqual(log.entries, ["seen 2", "cancelled", "freed"])
        XCTAssertEqual(watched.value, 8, "the engine goes on")
        observer.token = nil
    }

    /// A watcher cancelled by a computed's closure waits, linked, for the transaction to settle;
    /// if, meanwhile, the release of something that closure stopped reading writes what the
    /// watcher observes (an owner's deinit), the watcher is queued again: it is still never
    /// called, and it is taken out of the queue (which does not retain) before it is freed.
    /// ```
    /// switcher --> parent (reads dropped while switcher is true; when false cancels the
    ///              watcher of `closed` and stops reading dropped, whose owner then writes `closed`)
    /// ```
    func test_watcherCancelledInAClosure_andWrittenByAReleaseBeforeItGoes_isNeverCalled() {
        final class Owner: Sendable {
            let closed: Observable<Int>
            init(_ closed: Observable<Int>) { self.closed = closed }
            deinit { closed.value = 1 }
        }
        let closed = Observable(0), switcher = Observable(true)
        let watcher = TokenHolder()
        let log = Log<String>()
        weak var weakDropped: Computed<Int>?
        let parent: Computed<Int>
        do {
            let owner = Owner(closed)
            let dropped = Computed { withExtendedLifetime(owner) { 0 } }
            weakDropped = dropped
            parent = Computed { [unowned dropped] () -> Int in
                if switcher.value { return dropped.value }
                watcher.token?.cancel()
                return 2
            }
            XCTAssertEqual(parent.value, 0, "now parent's link holds dropped")
        }
        /// Freed with the watcher, under the engine lock: says whether a watcher was still queued.
        final class QueueWitness: Sendable {
            let log: Log<String>
            init(_ log: Log<String>) { self.log = log }
            deinit { log.append(engine.pendingObservers.isEmpty ? "freed" : "freed while queued") }
        }
        do {
            let captured = QueueWitness(log)
            watcher.token = closed.observe { change in withExtendedLifetime(captured) { log.append("closed \(change.newValue)") } }
        }
        let reader = parent.observe { change in log.append("parent \(change.newValue)") }
        XCTAssertNotNil(weakDropped, "held by parent's link alone")
        switcher.value = false
        XCTAssertNil(weakDropped)
        XCTAssertEqual(closed.value, 1)
        XCTAssertEqual(log.entries, ["freed", "parent 2"])
        reader.cancel()
        watcher.token = nil
    }
}
