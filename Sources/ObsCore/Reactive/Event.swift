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

    private let subscribers = Mutex<[Subscriber]>([])
    /// Run when the event goes away (a bridge removing its source registration).
    var onDeinit: (@Sendable () -> Void)?

    public init() {}

    deinit { onDeinit?() }

    /// Calls `handler` synchronously, on the firing thread, for every payload fired until the
    /// token is cancelled or released.
    public func subscribe(_ handler: @escaping @Sendable (Payload) -> Void) -> ObservationToken {
        add(Subscriber(handler: handler, dispatch: nil))
    }

    private func add(_ subscriber: Subscriber) -> ObservationToken {
        subscribers.withLock { $0.append(subscriber) }
        return ObservationToken { [weak self] in
            subscriber.cancelled.store(true, ordering: .releasing)
            self?.subscribers.withLock { $0.removeAll { $0 === subscriber } }
        }
    }

    /// Delivers `payload` to every current subscriber, in subscription order. No lock is held while
    /// handlers run: a handler may subscribe, cancel or fire.
    public func fire(_ payload: Payload) {
        let current = subscribers.withLock { $0 }
        for subscriber in current {
            if let dispatch = subscriber.dispatch {
                dispatch(subscriber, payload)
            } else {
                subscriber.call(payload)
            }
        }
    }

    /// How many subscribers the event has.
    public var subscriberCount: Int { subscribers.withLock { $0.count } }
}

extension Event where Payload: Sendable {
    /// Calls `handler` on `scheduler` for every payload fired until the token is cancelled or
    /// released; with an asynchronous scheduler nothing is delivered after `cancel()` returns.
    public func subscribe(on scheduler: some EventScheduler, _ handler: @escaping @Sendable (Payload) -> Void) -> ObservationToken {
        if scheduler is ImmediateScheduler { return subscribe(handler) }
        return add(Subscriber(handler: handler, dispatch: { subscriber, payload in
            scheduler.schedule { subscriber.call(payload) }
        }))
    }
}
