import Synchronization

/// An observer of one value: a watcher node whose only dependency is the value it observes.
/// It computes its changes under the lock (in the flush) and delivers them after, in order.
///
/// Pending changes wait in a ring of values (old, new, old, new, ...) rather than an array of
/// `Change<Value>`: see ObservableValue on why generic code here avoids composite types.
final class ObserverNode<Value: Sendable>: DeliveringObserver, @unchecked Sendable {
    private typealias Kind = DeliveryKind

    /// Kept alive by the observer's link to it, for as long as the observer is subscribed.
    unowned(unsafe) let target: ObservableValue<Value>
    /// Calls the user's handler with (old, new, isInitial).
    private let deliver: @Sendable (Value, Value, Bool) -> Void
    private let errorHandler: (@Sendable (any Error) -> Void)?
    /// Whether handlers are called directly on the delivering thread (`ImmediateScheduler`).
    private let immediate: Bool
    /// The scheduler of a non-immediate observer (boxed: an existential inline would add 40 bytes
    /// to every observer, and nearly all are immediate).
    private let scheduler: SchedulerBox?
    private let cancelled = Atomic<Bool>(false)

    /// The value the handler last saw (or was given at subscription), once `hasLast`: the first
    /// slot of `storage`, whose other slots hold the ring until it outgrows them.
    private let last: UnsafeMutablePointer<Value>
    private let storage: UnsafeMutablePointer<Value>
    @exclusivity(unchecked) private var hasLast = false
    @exclusivity(unchecked) private var lastWasError = false

    /// Undelivered events: their kinds in order, the values of changes in a ring (its capacity a
    /// power of two, so positions wrap with a mask), errors in order.
    @exclusivity(unchecked) private var kinds = KindQueue()
    @exclusivity(unchecked) private var ring: UnsafeMutablePointer<Value>
    @exclusivity(unchecked) private var ringCapacity = 2
    @exclusivity(unchecked) private var ringHead = 0
    @exclusivity(unchecked) private var ringCount = 0
    @exclusivity(unchecked) private var errors = ContiguousArray<any Error>()

    init(target: ObservableValue<Value>, scheduler: any EventScheduler,
         errorHandler: (@Sendable (any Error) -> Void)?, deliver: @escaping @Sendable (Value, Value, Bool) -> Void) {
        self.target = target
        self.deliver = deliver
        self.errorHandler = errorHandler
        self.immediate = scheduler is ImmediateScheduler
        self.scheduler = immediate ? nil : SchedulerBox(scheduler)
        // One allocation for the last value and a ring of one change: what nearly every observer
        // ever needs, in one place in memory.
        storage = .allocate(capacity: 3)
        last = storage
        ring = storage + 1
        super.init(flags: .watcher)
    }

    deinit {
        dropPending()
        if ring != storage + 1 { ring.deallocate() }
        if hasLast { last.deinitialize(count: 1) }
        storage.deallocate()
    }

    /// Subscribes and captures the current value, queueing it for delivery when `initial`.
    /// Called inside the engine, so nothing can change between the snapshot and the subscription.
    func start(initial: Bool) {
        engine.link(target.ref, ref)
        observeTarget(starting: true, initial: initial)
    }

    override func prefetchWork() {
        target.ref.prefetch()
        prefetch(UnsafeRawPointer(storage))
    }

    override func prefetchDependencies() {
        target.prefetchWork()
    }

    override func prefetchDelivery() {
        prefetch(UnsafeRawPointer(storage))
    }

    override func runWatcher() {
        observeTarget(starting: false, initial: false)
    }

    /// Reads the target and queues what the handler has not seen yet: at the start only what
    /// `initial` asks for.
    private func observeTarget(starting: Bool, initial: Bool) {
        let reader = engine.activeSub
        engine.activeSub = nil
        defer { engine.activeSub = reader }
        let value: Value
        do {
            value = try target.read()
        } catch {
            lastWasError = true
            if errorHandler != nil, !starting || initial {
                kinds.append(.failure)
                errors.append(error)
                queueDelivery()
            }
            return
        }
        if initial {
            pushChange(.initial, old: value, new: value)
        } else if starting {
            // Nothing to deliver: the handler starts from this value.
        } else if hasLast {
            if !lastWasError, target.isEqual(last.pointee, value) { return }
            pushChange(.change, old: last.pointee, new: value)
        } else {
            pushChange(.change, old: value, new: value)
        }
        if hasLast {
            last.pointee = value
        } else {
            last.initialize(to: value)
            hasLast = true
        }
        lastWasError = false
    }

    private func pushChange(_ kind: Kind, old: Value, new: Value) {
        if ringCount + 2 > ringCapacity { growRing() }
        let mask = ringCapacity - 1
        (ring + ((ringHead + ringCount) & mask)).initialize(to: old)
        (ring + ((ringHead + ringCount + 1) & mask)).initialize(to: new)
        ringCount += 2
        kinds.append(kind)
        queueDelivery()
    }

    private func growRing() {
        let capacity = ringCapacity * 2
        let grown = UnsafeMutablePointer<Value>.allocate(capacity: capacity)
        for index in 0..<ringCount {
            (grown + index).moveInitialize(from: ring + ((ringHead + index) & (ringCapacity - 1)), count: 1)
        }
        if ring != storage + 1 { ring.deallocate() }
        ring = grown
        ringCapacity = capacity
        ringHead = 0
    }

    private func popValue() -> Value {
        let value = (ring + ringHead).move()
        ringHead = (ringHead + 1) & (ringCapacity - 1)
        ringCount -= 1
        return value
    }

    private func dropPending() {
        while ringCount > 0 { _ = popValue() }
        kinds.removeAll()
        errors.removeAll()
    }

    override func deliverNext() {
        withEngine { deliverNext(engine: $0) }
    }

    private func deliverNext(engine: Engine) {
        engine.lock.lock()
        guard !kinds.isEmpty else {
            engine.lock.unlock()
            return
        }
        let kind = kinds.removeFirst()
        if kind == .failure {
            let error = errors.removeFirst()
            engine.lock.unlock()
            if immediate {
                callError(error)
            } else {
                scheduler!.scheduler.schedule { self.callError(error) }
            }
            return
        }
        let old = popValue()
        let new = popValue()
        engine.lock.unlock()
        let isInitial = kind == .initial
        if immediate {
            call(old, new, isInitial)
        } else {
            scheduler!.scheduler.schedule { self.call(old, new, isInitial) }
        }
    }

    private func call(_ old: Value, _ new: Value, _ isInitial: Bool) {
        if cancelled.load(ordering: .acquiring) { return }
        deliver(old, new, isInitial)
    }

    private func callError(_ error: any Error) {
        if cancelled.load(ordering: .acquiring) { return }
        errorHandler?(error)
    }

    func cancel() {
        cancelled.store(true, ordering: .releasing)
        engine.enter()
        flags.insert(.disposed)
        if flags.contains(.queued) { engine.keepUntilSettled(self) }
        dropPending()
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
    @inlinable
    public func observe(initial: Bool = false,
                        on scheduler: some EventScheduler = ImmediateScheduler(),
                        onError: (@Sendable (any Error) -> Void)? = nil,
                        _ handler: @escaping @Sendable (Change<Value>) -> Void) -> ObservationToken {
        // Built here, in the caller's module, so that the Change is made by specialised code.
        subscribe(initial: initial, scheduler: scheduler, onError: onError) { old, new, isInitial in
            handler(Change(oldValue: old, newValue: new, isInitial: isInitial))
        }
    }

    @usableFromInline
    func subscribe(initial: Bool, scheduler: any EventScheduler, onError: (@Sendable (any Error) -> Void)?,
                   deliver: @escaping @Sendable (Value, Value, Bool) -> Void) -> ObservationToken {
        let observer = ObserverNode(target: self, scheduler: scheduler, errorHandler: onError, deliver: deliver)
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

/// A scheduler kept by reference, for the few observers that are not immediate.
private final class SchedulerBox: Sendable {
    let scheduler: any EventScheduler
    init(_ scheduler: any EventScheduler) { self.scheduler = scheduler }
}
