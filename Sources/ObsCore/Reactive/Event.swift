import Synchronization

/// A stream of occurrences with a payload, and no current value: `fire` calls every subscriber, in
/// the order they subscribed.
public final class Event<Payload>: @unchecked Sendable {
    private final class Subscriber: @unchecked Sendable {
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

extension Event where Payload: Sendable {
    /// Calls `handler` on `scheduler` for every payload fired until the token is cancelled or
    /// released; with an asynchronous scheduler nothing is delivered after `cancel()` returns.
    ///
    /// Every payload is scheduled, without a bound: occurrences cannot be merged as an observer's
    /// changes are, and dropping some would lose them unseen (docs/library.md, Limits).
    public func subscribe(on scheduler: some EventScheduler, _ handler: @escaping @Sendable (Payload) -> Void) -> ObservationToken {
        if scheduler is ImmediateScheduler { return subscribe(handler) }
        return add(Subscriber(handler: handler, dispatch: { subscriber, payload in
            scheduler.schedule { subscriber.call(payload) }
        }))
    }
}
