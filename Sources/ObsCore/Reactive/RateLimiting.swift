import Dispatch
import Synchronization

/// Runs actions after a delay: a dispatch queue in real use, a manual clock in tests.
protocol DelayScheduler: Sendable {
    func after(_ delay: Duration, _ action: @escaping @Sendable () -> Void)
}

struct DispatchDelayScheduler: DelayScheduler {
    let queue: DispatchQueue
    func after(_ delay: Duration, _ action: @escaping @Sendable () -> Void) {
        let (seconds, attoseconds) = delay.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds), execute: action)
    }
}

extension ObservableValue {
    /// An observable that follows this one at most once per `interval`: the first change at once,
    /// then the latest value at the end of each interval in which it changed. A burst that ends on
    /// the value it started from produces nothing (for `Equatable` values).
    public func throttled(for interval: Duration, on queue: DispatchQueue = .global()) -> Observable<Value> {
        throttled(for: interval, scheduler: DispatchDelayScheduler(queue: queue))
    }

    /// An observable that takes this one's value only once it has been quiet for `interval`.
    public func debounced(for interval: Duration, on queue: DispatchQueue = .global()) -> Observable<Value> {
        debounced(for: interval, scheduler: DispatchDelayScheduler(queue: queue))
    }

    func throttled(for interval: Duration, scheduler: some DelayScheduler) -> Observable<Value> {
        rateLimited(.throttle, interval: interval, scheduler: scheduler)
    }

    func debounced(for interval: Duration, scheduler: some DelayScheduler) -> Observable<Value> {
        rateLimited(.debounce, interval: interval, scheduler: scheduler)
    }

    private func rateLimited(_ mode: RateLimiter<Value>.Mode, interval: Duration, scheduler: some DelayScheduler) -> Observable<Value> {
        let output = Observable(peek(), isEqual: isEqual)
        let weakOutput = WeakReference(output)
        let limiter = RateLimiter(mode: mode, interval: interval, scheduler: scheduler, output: weakOutput)
        // The initial call brings the copy to the value the subscription starts from: one written
        // since `peek()` (by another thread) would otherwise be missing until the next change.
        let token = observe(initial: true) { change in
            if change.isInitial {
                weakOutput.object?.value = change.newValue
            } else {
                limiter.receive(change.newValue)
            }
        }
        output.retained.append(token)
        return output
    }
}

/// Feeds an observable from another at a limited rate.
private final class RateLimiter<Value: Sendable>: Sendable {
    enum Mode {
        /// First value at once, then at most one (the latest) per interval.
        case throttle
        /// The latest value once nothing has arrived for an interval.
        case debounce
    }

    private struct State {
        var windowOpen = false
        var generation: UInt64 = 0
        var latest: Value?
    }

    private let mode: Mode
    private let interval: Duration
    private let scheduler: any DelayScheduler
    private let output: WeakReference<Observable<Value>>
    private let state = Locked(State())

    init(mode: Mode, interval: Duration, scheduler: any DelayScheduler, output: WeakReference<Observable<Value>>) {
        self.mode = mode
        self.interval = interval
        self.scheduler = scheduler
        self.output = output
    }

    func receive(_ value: Value) {
        switch mode {
        case .throttle: throttle(value)
        case .debounce: debounce(value)
        }
    }

    private func throttle(_ value: Value) {
        let emitNow = state.withLock { state -> Bool in
            if state.windowOpen {
                state.latest = value
                return false
            }
            state.windowOpen = true
            return true
        }
        if emitNow {
            output.object?.value = value
            scheduler.after(interval) { self.windowEnded() }
        }
    }

    private func windowEnded() {
        let latest = state.withLock { state -> Value? in
            defer { state.latest = nil }
            if state.latest == nil { state.windowOpen = false }
            return state.latest
        }
        if let latest {
            output.object?.value = latest
            scheduler.after(interval) { self.windowEnded() }
        }
    }

    private func debounce(_ value: Value) {
        let generation = state.withLock { state -> UInt64 in
            state.generation &+= 1
            state.latest = value
            return state.generation
        }
        scheduler.after(interval) { self.fire(generation) }
    }

    private func fire(_ generation: UInt64) {
        let value = state.withLock { state -> Value? in
            guard state.generation == generation else { return nil }
            defer { state.latest = nil }
            return state.latest
        }
        if let value { output.object?.value = value }
    }
}
