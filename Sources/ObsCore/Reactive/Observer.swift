import Synchronization

/// An observer of one value: a watcher node whose only dependency is the value it observes.
/// It computes its changes under the lock (in the flush), queueing each with its values in the
/// engine's delivery queue (DeliveryQueue.swift), and the engine delivers them after, in order.
///
/// The value the handler last saw lives in the node's value cell (ValueCell.swift); whether there
/// is one, and whether the target was failing when last looked at, are flags (`hasValue`,
/// `failed`). Generic code here avoids composite types: see ObservableValue.
final class ObserverNode<Value: Sendable>: DeliveringObserver, @unchecked Sendable {
    /// Kept alive by the observer's link to it, for as long as the observer is subscribed.
    unowned(unsafe) let target: ObservableValue<Value>
    /// The user's handler, and how to call it with (old, new, isInitial): a closure that captures
    /// nothing, made in the caller's specialised code, so that it builds the `Change` without
    /// run-time type lookups and calling it reads no context of its own.
    private let handler: @Sendable (Change<Value>) -> Void
    private let deliver: @Sendable (@Sendable (Change<Value>) -> Void, Value, Value, Bool) -> Void
    /// Whether handlers are called directly on the delivering thread (`ImmediateScheduler`).
    private let immediate: Bool
    private let cancelled = Atomic<Bool>(false)
    /// The error handler, and for a non-immediate observer its scheduler with the calls waiting
    /// on it (`ScheduledDelivery`): nil for nearly all.
    private let extras: ObserverExtras?

    /// The value the handler last saw (or was given at subscription), once `hasLast`.
    @inline(__always) private var last: UnsafeMutablePointer<Value> { ValueCell<Value>.address(in: self) }

    private var hasLast: Bool {
        get { flags.contains(.hasValue) }
        set { if newValue { flags.insert(.hasValue) } else { flags.remove(.hasValue) } }
    }

    private var lastWasError: Bool {
        get { flags.contains(.failed) }
        set { if newValue { flags.insert(.failed) } else { flags.remove(.failed) } }
    }

    init(target: ObservableValue<Value>, scheduler: any EventScheduler,
         errorHandler: (@Sendable (any Error) -> Void)?, handler: @escaping @Sendable (Change<Value>) -> Void,
         deliver: @escaping @Sendable (@Sendable (Change<Value>) -> Void, Value, Value, Bool) -> Void) {
        self.target = target
        self.handler = handler
        self.deliver = deliver
        immediate = scheduler is ImmediateScheduler
        if !immediate {
            extras = ScheduledDelivery(scheduler: scheduler, isEqual: target.isEqual, errorHandler: errorHandler)
        } else if let errorHandler {
            extras = ObserverExtras(errorHandler: errorHandler)
        } else {
            extras = nil
        }
        super.init(flags: .watcher)
        ValueCell<Value>.prepare(in: self)
    }

    deinit {
        if hasLast { last.deinitialize(count: 1) }
        ValueCell<Value>.release(in: self)
    }

    /// Subscribes and captures the current value, queueing it for delivery when `initial`.
    /// Called inside the engine, so nothing can change between the snapshot and the subscription.
    ///
    /// A handler subscribing while it is delivered would find its initial call queued behind the
    /// rest of the batch under way, after `observe` returned; so there the initial call is returned,
    /// for the caller to make once it has left the engine. That is still before any change to the
    /// target: this thread delivers those, after the handler.
    func start(initial: Bool) -> (@Sendable () -> Void)? {
        engine.attach(self, to: target)
        guard initial, immediate, engine.isInsideHandlerOnly else {
            observeTarget(starting: true, initial: initial)
            return nil
        }
        observeTarget(starting: true, initial: false)
        if !lastWasError {
            let value = last.pointee
            return { self.call(value, value, true) }
        }
        guard extras?.errorHandler != nil else { return nil }
        do {
            _ = try engine.untracked { () throws -> Value in try target.read() }
            return nil
        } catch {
            return { self.callError(error) }
        }
    }

    override func prefetchWork() {
        target.ref.prefetch()
    }

    override func prefetchDependencies() {
        target.prefetchWork()
    }

    // The engine calls these two through the base class, into generic code; their bodies run in
    // a closure, so that the generic entry, which only picks the specialised code for the four
    // common types, has no generic values of its own to make room for (39 instructions -> 8).
    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    override func runWatcher() {
        withEngine { _ in observeTarget(starting: false, initial: false) }
    }

    /// The target's value: read in place when it is up to date (the flush has just brought it up
    /// to date when the observer runs), the long way otherwise.
    @inline(__always)
    private func readTarget() throws -> Value {
        if target.flags.isDisjoint(with: [.dirty, .pending, .running, .failed]) {
            return ValueCell<Value>.address(in: target).pointee
        }
        return try engine.untracked { () throws -> Value in try target.read() }
    }

    /// Reads the target and queues what the handler has not seen yet: at the start only what
    /// `initial` asks for.
    @inline(__always)
    private func observeTarget(starting: Bool, initial: Bool) {
        let value: Value
        do {
            value = try readTarget()
        } catch {
            lastWasError = true
            if let extras, extras.errorHandler != nil, !starting || initial {
                queueDelivery(.failure, bytes: MemoryLayout<any Error>.size, alignment: MemoryLayout<any Error>.alignment)
                    .initializeMemory(as: (any Error).self, repeating: error, count: 1)
            }
            return
        }
        if initial {
            let payload = queueChange(.initial)
            payload.initialize(to: value)
            (payload + 1).initialize(to: value)
        } else if starting {
            // Nothing to deliver: the handler starts from this value.
        } else if hasLast {
            if !lastWasError, target.isEqual(last.pointee, value) { return }
            let payload = queueChange(.change)
            payload.moveInitialize(from: last, count: 1)
            (payload + 1).initialize(to: value)
            last.initialize(to: value)
            lastWasError = false
            return
        } else {
            let payload = queueChange(.change)
            payload.initialize(to: value)
            (payload + 1).initialize(to: value)
        }
        if hasLast {
            last.pointee = value
        } else {
            last.initialize(to: value)
            hasLast = true
        }
        lastWasError = false
    }

    /// Queues a change and returns where its two values (old, new) go.
    @inline(__always)
    private func queueChange(_ kind: DeliveryKind) -> UnsafeMutablePointer<Value> {
        queueDelivery(kind, bytes: 2 * MemoryLayout<Value>.stride, alignment: MemoryLayout<Value>.alignment)
            .bindMemory(to: Value.self, capacity: 2)
    }

    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    override func deliver(_ kind: DeliveryKind, entry: UnsafeMutableRawPointer) {
        withEngine { _ in deliverQueued(kind, entry: entry) }
    }

    @inline(__always)
    private func deliverQueued(_ kind: DeliveryKind, entry: UnsafeMutableRawPointer) {
        if kind == .failure {
            let error = DeliveryQueue.payload(of: entry, alignment: MemoryLayout<any Error>.alignment)
                .assumingMemoryBound(to: (any Error).self).move()
            if immediate {
                callError(error)
            } else {
                scheduled.schedule(error, for: self)
            }
            return
        }
        let payload = DeliveryQueue.payload(of: entry, alignment: MemoryLayout<Value>.alignment)
            .assumingMemoryBound(to: Value.self)
        let old = payload.move()
        let new = (payload + 1).move()
        let isInitial = kind == .initial
        if immediate {
            call(old, new, isInitial)
        } else {
            scheduled.schedule(old, new, isInitial: isInitial, for: self)
        }
    }

    /// The extras of a non-immediate observer.
    private var scheduled: ScheduledDelivery<Value> {
        unsafeDowncast(extras.unsafelyUnwrapped, to: ScheduledDelivery<Value>.self)
    }

    @_specialize(where Value == Int)
    @_specialize(where Value == Double)
    @_specialize(where Value == Bool)
    @_specialize(where Value == String)
    func call(_ old: Value, _ new: Value, _ isInitial: Bool) {
        if cancelled.load(ordering: .acquiring) { return }
        deliver(handler, old, new, isInitial)
    }

    func callError(_ error: any Error) {
        if cancelled.load(ordering: .acquiring) { return }
        extras?.errorHandler?(error)
    }

    override func cancelSubscription() {
        cancelled.store(true, ordering: .releasing)
        dispose { $0.retireAfterDelivery(self) }
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
    ///     after `cancel()` returns, and at most 1024 calls wait on it: while they do, later changes
    ///     are merged into the last one waiting, from the value the one before it ended on to the
    ///     latest (an error waiting there gives way to a later value; docs/library.md).
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
        let initialCall = observer.start(initial: initial)
        engine.exit()
        initialCall?()
        return ObservationToken(cancelling: observer)
    }

    /// Every change from now on, as an asynchronous sequence; ending the iteration unsubscribes.
    /// A reader more than 1024 changes behind gets the later ones merged into one, from the value
    /// the one before ended on to the latest (docs/library.md).
    public var changes: AsyncStream<Change<Value>> {
        let buffer = ChangeBuffer<Value>(limit: ChangeBuffer<Value>.limit, isEqual: isEqual)
        let token = observe { buffer.push($0) }
        return AsyncStream {
            // The stream holds the subscription: it ends when the stream is cancelled or released.
            withExtendedLifetime(token) {}
            return await buffer.next()
        } onCancel: {
            token.cancel()
        }
    }
}

/// What an observer keeps only when it has an error handler or a scheduler that is not immediate
/// (then a `ScheduledDelivery`).
class ObserverExtras: @unchecked Sendable {
    final let errorHandler: (@Sendable (any Error) -> Void)?

    init(errorHandler: (@Sendable (any Error) -> Void)?) {
        self.errorHandler = errorHandler
    }
}
