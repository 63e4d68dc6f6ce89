import Synchronization

/// An observer of one value: a watcher node whose only dependency is the value it observes.
/// It computes its changes under the lock (in the flush) and delivers them after, in order.
///
/// Pending changes wait in a ring of values (old, new, old, new, ...) rather than an array of
/// `Change<Value>`: see ObservableValue on why generic code here avoids composite types.
final class ObserverNode<Value: Sendable>: DeliveringObserver, @unchecked Sendable {
    private typealias Kind = DeliveryKind

    // Field order is memory order: what the flush and delivery read of every observer comes first
    // and fits in the object's first two cache lines; what few observers use sits behind `extras`.
    // (232 -> 168 bytes: a graph of many observers is walked with fewer cache misses. The ring's
    // positions are 32-bit: a billion undelivered changes of one observer is out of reach.)

    /// Kept alive by the observer's link to it, for as long as the observer is subscribed.
    unowned(unsafe) let target: ObservableValue<Value>
    /// The user's handler, and how to call it with (old, new, isInitial): a closure that captures
    /// nothing, made in the caller's specialised code, so that it builds the `Change` without
    /// run-time type lookups and calling it reads no context of its own.
    private let handler: @Sendable (Change<Value>) -> Void
    private let deliver: @Sendable (@Sendable (Change<Value>) -> Void, Value, Value, Bool) -> Void
    /// The value the handler last saw (or was given at subscription), once `hasLast`, in the
    /// first slot; the other slots hold the ring until it outgrows them.
    private let storage: UnsafeMutablePointer<Value>
    /// Undelivered events: their kinds in order, the values of changes in a ring (its capacity a
    /// power of two, so positions wrap with a mask), errors in order (in `extras`).
    @exclusivity(unchecked) private var ring: UnsafeMutablePointer<Value>
    @exclusivity(unchecked) private var kinds = KindQueue()
    @exclusivity(unchecked) private var hasLast = false
    @exclusivity(unchecked) private var lastWasError = false
    /// Whether handlers are called directly on the delivering thread (`ImmediateScheduler`).
    private let immediate: Bool
    private let cancelled = Atomic<Bool>(false)
    @exclusivity(unchecked) private var ringHead: Int32 = 0
    @exclusivity(unchecked) private var ringCount: Int32 = 0
    @exclusivity(unchecked) private var ringCapacity: Int32 = 2
    /// The scheduler of a non-immediate observer and the error handler: nil for nearly all.
    private let extras: ObserverExtras?

    @inline(__always) private var last: UnsafeMutablePointer<Value> { storage }

    init(target: ObservableValue<Value>, scheduler: any EventScheduler,
         errorHandler: (@Sendable (any Error) -> Void)?, handler: @escaping @Sendable (Change<Value>) -> Void,
         deliver: @escaping @Sendable (@Sendable (Change<Value>) -> Void, Value, Value, Bool) -> Void) {
        self.target = target
        self.handler = handler
        self.deliver = deliver
        immediate = scheduler is ImmediateScheduler
        extras = immediate && errorHandler == nil
            ? nil : ObserverExtras(scheduler: immediate ? nil : scheduler, errorHandler: errorHandler)
        // One allocation for the last value and a ring of one change: what nearly every observer
        // ever needs, in one place in memory.
        storage = .allocate(capacity: 3)
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
        engine.attach(self, to: target)
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
    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    private func observeTarget(starting: Bool, initial: Bool) {
        let value: Value
        do {
            value = try engine.untracked { () throws -> Value in try target.read() }
        } catch {
            lastWasError = true
            if let extras, extras.errorHandler != nil, !starting || initial {
                kinds.append(.failure)
                extras.errors.append(error)
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

    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    private func pushChange(_ kind: Kind, old: Value, new: Value) {
        if ringCount + 2 > ringCapacity { growRing() }
        let mask = ringCapacity - 1
        (ring + Int((ringHead + ringCount) & mask)).initialize(to: old)
        (ring + Int((ringHead + ringCount + 1) & mask)).initialize(to: new)
        ringCount += 2
        kinds.append(kind)
        queueDelivery()
    }

    private func growRing() {
        let capacity = ringCapacity * 2
        let grown = UnsafeMutablePointer<Value>.allocate(capacity: Int(capacity))
        for index in 0..<ringCount {
            (grown + Int(index)).moveInitialize(from: ring + Int((ringHead + index) & (ringCapacity - 1)), count: 1)
        }
        if ring != storage + 1 { ring.deallocate() }
        ring = grown
        ringCapacity = capacity
        ringHead = 0
    }

    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    private func popValue() -> Value {
        let value = (ring + Int(ringHead)).move()
        ringHead = (ringHead + 1) & (ringCapacity - 1)
        ringCount -= 1
        return value
    }

    private func dropPending() {
        while ringCount > 0 { _ = popValue() }
        kinds.removeAll()
        extras?.errors.removeAll()
    }

    override func deliverNext() {
        withEngine { deliverNext(engine: $0) }
    }

    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    private func deliverNext(engine: Engine) {
        engine.lock.lock()
        guard !kinds.isEmpty else {
            engine.lock.unlock()
            return
        }
        let kind = kinds.removeFirst()
        if kind == .failure {
            let extras = extras!
            let error = extras.errors.removeFirst()
            engine.lock.unlock()
            if immediate {
                callError(error)
            } else {
                extras.scheduler!.schedule { self.callError(error) }
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
            extras!.scheduler!.schedule { self.call(old, new, isInitial) }
        }
    }

    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    private func call(_ old: Value, _ new: Value, _ isInitial: Bool) {
        if cancelled.load(ordering: .acquiring) { return }
        deliver(handler, old, new, isInitial)
    }

    private func callError(_ error: any Error) {
        if cancelled.load(ordering: .acquiring) { return }
        extras?.errorHandler?(error)
    }

    override func cancelSubscription() {
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
        subscribe(initial: initial, scheduler: scheduler, onError: onError, handler: handler) { handler, old, new, isInitial in
            handler(Change(oldValue: old, newValue: new, isInitial: isInitial))
        }
    }

    @usableFromInline
    func subscribe(initial: Bool, scheduler: any EventScheduler, onError: (@Sendable (any Error) -> Void)?,
                   handler: @escaping @Sendable (Change<Value>) -> Void,
                   deliver: @escaping @Sendable (@Sendable (Change<Value>) -> Void, Value, Value, Bool) -> Void) -> ObservationToken {
        let observer = ObserverNode(target: self, scheduler: scheduler, errorHandler: onError, handler: handler, deliver: deliver)
        engine.enter()
        observer.start(initial: initial)
        engine.exit()
        return ObservationToken(cancelling: observer)
    }

    /// Every change from now on, as an asynchronous sequence; ending the iteration unsubscribes.
    public var changes: AsyncStream<Change<Value>> {
        AsyncStream { continuation in
            let token = self.observe { continuation.yield($0) }
            continuation.onTermination = { _ in token.cancel() }
        }
    }
}

/// What an observer keeps only when it has an error handler or a scheduler that is not immediate.
private final class ObserverExtras: @unchecked Sendable {
    let scheduler: (any EventScheduler)?
    let errorHandler: (@Sendable (any Error) -> Void)?
    /// The errors of undelivered failures, in order (guarded by the engine lock).
    var errors = ContiguousArray<any Error>()

    init(scheduler: (any EventScheduler)?, errorHandler: (@Sendable (any Error) -> Void)?) {
        self.scheduler = scheduler
        self.errorHandler = errorHandler
    }
}
