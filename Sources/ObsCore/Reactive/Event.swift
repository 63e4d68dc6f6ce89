import Synchronization

/// A stream of occurrences with a payload, and no current value: `fire` calls every subscriber, in
/// the order they subscribed.
public final class Event<Payload>: @unchecked Sendable {
    fileprivate final class Subscriber: @unchecked Sendable {
        let handler: @Sendable (Payload) -> Void
        /// Runs the handler for a payload; nil: call it directly.
        let dispatch: (@Sendable (Subscriber, Payload) -> Void)?
        let cancelled = Atomic<Bool>(false)
        init(handler: @escaping @Sendable (Payload) -> Void, dispatch: (@Sendable (Subscriber, Payload) -> Void)?) {
            self.handler = handler
            self.dispatch = dispatch
        }
        func call(_ payload: Payload) {
            if !cancelled.load(ordering: .acquiring) { handler(payload) }
        }
    }

    /// The subscribers, and the threads delivering a payload now, each with the payloads its
    /// handlers fired meanwhile.
    private struct State {
        var subscribers: [Subscriber] = []
        var firing: [(thread: UInt, pending: [Pending])] = []
    }

    /// A payload waiting on its firing thread: only that thread puts it in and takes it out.
    private struct Pending: @unchecked Sendable {
        let payload: Payload
    }

    private let state = Locked(State())
    /// Run when the event goes away (a bridge removing its source registration).
    var onDeinit: (@Sendable () -> Void)?

    public init() {}

    deinit { onDeinit?() }

    /// Calls `handler` synchronously, on the firing thread, for every payload fired until the
    /// token is cancelled or released. The token keeps the event alive until then.
    public func subscribe(_ handler: @escaping @Sendable (Payload) -> Void) -> ObservationToken {
        add(Subscriber(handler: handler, dispatch: nil))
    }

    private func add(_ subscriber: Subscriber) -> ObservationToken {
        state.withLock { $0.subscribers.append(subscriber) }
        // The token holds the event until cancelled: `center.observable(for: name).subscribe { }`
        // must go on firing though nothing else keeps the bridge's event.
        return ObservationToken {
            subscriber.cancelled.store(true, ordering: .releasing)
            self.state.withLock { $0.subscribers.removeAll { $0 === subscriber } }
        }
    }

    /// Delivers `payload` to every current subscriber, in subscription order. No lock is held while
    /// handlers run: a handler may subscribe, cancel or fire. A payload fired by a handler is
    /// delivered after the one under way has reached every subscriber, in the order fired, never
    /// recursively, so that every subscriber sees the payloads in the same order.
    public func fire(_ payload: Payload) {
        let thread = currentThreadID()
        let nested = state.withLock { state -> Bool in
            if let index = state.firing.firstIndex(where: { $0.thread == thread }) {
                state.firing[index].pending.append(Pending(payload: payload))
                return true
            }
            state.firing.append((thread, []))
            return false
        }
        if nested { return }
        var next: Pending? = Pending(payload: payload)
        while let current = next {
            deliver(current.payload)
            next = state.withLock { state -> Pending? in
                let index = state.firing.firstIndex { $0.thread == thread }!
                if state.firing[index].pending.isEmpty {
                    state.firing.remove(at: index)
                    return nil
                }
                return state.firing[index].pending.removeFirst()
            }
        }
    }

    private func deliver(_ payload: Payload) {
        let current = state.withLock { $0.subscribers }
        for subscriber in current {
            if let dispatch = subscriber.dispatch {
                dispatch(subscriber, payload)
            } else {
                subscriber.call(payload)
            }
        }
    }

    /// How many subscribers the event has.
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }
}

/// How many payloads of an event wait for a subscriber's asynchronous scheduler, and which are
/// dropped past that (`Event.subscribe(on:buffering:onDropped:_:)`).
public enum EventBuffering: Sendable, Hashable {
    /// Every payload waits, however many.
    case unbounded
    /// At most this many wait; a payload fired when they do pushes the oldest waiting one out.
    case newest(Int)
    /// At most this many wait; a payload fired when they do is dropped.
    case oldest(Int)
}

extension Event where Payload: Sendable {
    /// Calls `handler` on `scheduler` for every payload fired until the token is cancelled or
    /// released; with an asynchronous scheduler nothing is delivered after `cancel()` returns.
    ///
    /// Every payload is scheduled, without a bound: occurrences cannot be merged as an observer's
    /// changes are. For a subscriber that may fall behind, `subscribe(on:buffering:onDropped:_:)`
    /// bounds them and says how many it dropped (docs/library.md, Limits).
    public func subscribe(on scheduler: some EventScheduler, _ handler: @escaping @Sendable (Payload) -> Void) -> ObservationToken {
        subscribe(on: scheduler, buffering: .unbounded, handler)
    }

    /// Calls `handler` on `scheduler` for the payloads fired until the token is cancelled or
    /// released, keeping at most as many waiting as `buffering` says: past that the oldest waiting
    /// one (`.newest`) or the one fired (`.oldest`) is dropped, and `onDropped` is called on
    /// `scheduler` with how many were dropped, just before the first payload delivered after
    /// them, so the handler knows where the gap is. The calls run one after another, in the
    /// order fired, even on a concurrent queue; one turn on the scheduler delivers at most what
    /// was waiting when it began, then gives the scheduler back. With `ImmediateScheduler` nothing
    /// ever waits, and nothing is dropped.
    public func subscribe(on scheduler: some EventScheduler, buffering: EventBuffering,
                          onDropped: (@Sendable (Int) -> Void)? = nil,
                          _ handler: @escaping @Sendable (Payload) -> Void) -> ObservationToken {
        if scheduler is ImmediateScheduler { return subscribe(handler) }
        let limit: Int
        switch buffering {
        case .unbounded:
            return add(Subscriber(handler: handler, dispatch: { subscriber, payload in
                scheduler.schedule { subscriber.call(payload) }
            }))
        case .newest(let count), .oldest(let count):
            precondition(count > 0, "an event's buffer must hold at least one payload")
            limit = count
        }
        let mailbox = Mailbox(limit: limit, keepNewest: { if case .newest = buffering { true } else { false } }())
        return add(Subscriber(handler: handler, dispatch: { subscriber, payload in
            if mailbox.put(payload) {
                scheduler.schedule { mailbox.drain(subscriber, onDropped: onDropped, reschedule: scheduler) }
            }
        }))
    }
}

extension Event {
    /// The payloads waiting for one bounded subscription's scheduler, each with how many were
    /// dropped just before it.
    private final class Mailbox: @unchecked Sendable {
        private struct Entry {
            let payload: Payload
            var droppedBefore: Int
        }

        private struct State {
            var entries: [Entry] = []
            var head = 0
            /// Dropped after the last entry: reported before the next one put.
            var trailingDropped = 0
            /// A drain is scheduled and has not finished.
            var scheduled = false
            var count: Int { entries.count - head }
        }

        private let state = Locked(State())
        private let limit: Int
        private let keepNewest: Bool

        init(limit: Int, keepNewest: Bool) {
            self.limit = limit
            self.keepNewest = keepNewest
        }

        /// Keeps `payload` (or drops it, or the oldest); whether a drain must be scheduled.
        func put(_ payload: Payload) -> Bool {
            state.withLock { state in
                if state.count == limit {
                    guard keepNewest else {
                        state.trailingDropped += 1
                        return false
                    }
                    let oldest = state.entries[state.head]
                    state.head += 1
                    if state.count > 0 {
                        state.entries[state.head].droppedBefore += oldest.droppedBefore + 1
                    } else {
                        state.trailingDropped += oldest.droppedBefore + 1
                    }
                }
                if state.head > 0, state.head * 2 >= state.entries.count {
                    state.entries.removeFirst(state.head)
                    state.head = 0
                }
                state.entries.append(Entry(payload: payload, droppedBefore: state.trailingDropped))
                state.trailingDropped = 0
                guard !state.scheduled else { return false }
                state.scheduled = true
                return true
            }
        }

        /// Delivers what waits now, with no lock held while the handlers run; what is put
        /// meanwhile goes in a drain scheduled after this one.
        func drain(_ subscriber: Subscriber, onDropped: (@Sendable (Int) -> Void)?, reschedule scheduler: some EventScheduler) {
            var left = state.withLock { $0.count }
            while left > 0 {
                left -= 1
                let entry = state.withLock { state -> Entry in
                    let entry = state.entries[state.head]
                    state.head += 1
                    return entry
                }
                if entry.droppedBefore > 0, let onDropped, !subscriber.cancelled.load(ordering: .acquiring) {
                    onDropped(entry.droppedBefore)
                }
                subscriber.call(entry.payload)
            }
            let more = state.withLock { state -> Bool in
                if state.count == 0 {
                    state.entries.removeAll(keepingCapacity: state.entries.capacity <= 2 * limit)
                    state.head = 0
                    state.scheduled = false
                    return false
                }
                return true
            }
            if more { scheduler.schedule { self.drain(subscriber, onDropped: onDropped, reschedule: scheduler) } }
        }
    }
}
