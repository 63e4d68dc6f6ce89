import Synchronization

/// What an observer has to deliver.
enum ObserverEvent<Value> {
    case change(Change<Value>)
    case failure(any Error)
}

extension ObserverEvent: Sendable where Value: Sendable {}

/// An observer of one value: a watcher node whose only dependency is the value it observes.
/// It computes its changes under the lock (in the flush) and delivers them after, in order.
final class ObserverNode<Value: Sendable>: ReactiveNode, DeliveringObserver, @unchecked Sendable {
    /// Kept alive by the observer's link to it, for as long as the observer is subscribed.
    unowned(unsafe) let target: ObservableValue<Value>
    private let handler: @Sendable (Change<Value>) -> Void
    private let errorHandler: (@Sendable (any Error) -> Void)?
    /// nil: call handlers directly on the delivering thread.
    private let scheduler: (any EventScheduler)?
    private let cancelled = Atomic<Bool>(false)
    /// The value the handler last saw (or was given at subscription).
    private var last: Value?
    private var lastWasError = false
    /// Undelivered events, oldest at `pendingHead`.
    private var pending = ContiguousArray<ObserverEvent<Value>>()
    private var pendingHead = 0

    init(target: ObservableValue<Value>, scheduler: any EventScheduler,
         errorHandler: (@Sendable (any Error) -> Void)?, handler: @escaping @Sendable (Change<Value>) -> Void) {
        self.target = target
        self.handler = handler
        self.errorHandler = errorHandler
        self.scheduler = scheduler is ImmediateScheduler ? nil : scheduler
        super.init(flags: .watcher)
    }

    /// Subscribes and captures the current value, queueing it for delivery when `initial`.
    /// Called inside the engine, so nothing can change between the snapshot and the subscription.
    func start(initial: Bool) {
        engine.link(target, self)
        switch currentOfTarget() {
        case .success(let value):
            last = value
            if initial { push(.change(Change(oldValue: value, newValue: value, isInitial: true))) }
        case .failure(let error):
            lastWasError = true
            if initial, errorHandler != nil { push(.failure(error)) }
        }
    }

    private func currentOfTarget() -> Result<Value, any Error> {
        let reader = engine.activeSub
        engine.activeSub = nil
        defer { engine.activeSub = reader }
        return target.readTracked()
    }

    override func runWatcher() {
        switch currentOfTarget() {
        case .success(let value):
            if !lastWasError, let old = last, let isEqual = target.isEqual, isEqual(old, value) { return }
            push(.change(Change(oldValue: last ?? value, newValue: value)))
            last = value
            lastWasError = false
        case .failure(let error):
            lastWasError = true
            if errorHandler != nil { push(.failure(error)) }
        }
    }

    private func push(_ event: ObserverEvent<Value>) {
        pending.append(event)
        engine.deliveryQueue.append(self)
    }

    func deliverNext() {
        engine.lock.lock()
        guard pendingHead < pending.count else {
            engine.lock.unlock()
            return
        }
        let event = pending[pendingHead]
        pendingHead += 1
        if pendingHead == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingHead = 0
        }
        engine.lock.unlock()
        if let scheduler {
            scheduler.schedule { self.call(event) }
        } else {
            call(event)
        }
    }

    private func call(_ event: ObserverEvent<Value>) {
        if cancelled.load(ordering: .acquiring) { return }
        switch event {
        case .change(let change): handler(change)
        case .failure(let error): errorHandler?(error)
        }
    }

    func cancel() {
        cancelled.store(true, ordering: .releasing)
        engine.enter()
        flags.insert(.disposed)
        pending.removeAll()
        pendingHead = 0
        engine.exit()
        engine.detachDependencies(of: self)
    }
}

extension ObservableValue {
    /// Calls `handler` with every change of the value, in order, until the token is cancelled or
    /// released.
    ///
    /// - Parameters:
    ///   - initial: also call it at once with the current value (`isInitial`); its value is never
    ///     older than a change delivered after it.
    ///   - scheduler: where the handler runs; with an asynchronous scheduler nothing is delivered
    ///     after `cancel()` returns.
    ///   - onError: called when a computed value fails (enters or stays in an error state with a
    ///     new error); the next good value is delivered as a change.
    public func observe(initial: Bool = false,
                        on scheduler: some EventScheduler = ImmediateScheduler(),
                        onError: (@Sendable (any Error) -> Void)? = nil,
                        _ handler: @escaping @Sendable (Change<Value>) -> Void) -> ObservationToken {
        let observer = ObserverNode(target: self, scheduler: scheduler, errorHandler: onError, handler: handler)
        engine.enter()
        observer.start(initial: initial)
        engine.exit()
        return ObservationToken { observer.cancel() }
    }

    /// Every change from now on, as an asynchronous sequence; ending the iteration unsubscribes.
    public var changes: AsyncStream<Change<Value>> {
        AsyncStream { continuation in
            let token = self.observe { continuation.yield($0) }
            continuation.onTermination = { _ in token.cancel() }
        }
    }
}
