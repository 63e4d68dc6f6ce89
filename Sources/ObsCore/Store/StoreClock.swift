import Foundation

/// The store's time source: wall-clock seconds for `now()` and TTL deadlines (which survive
/// restarts), monotonic seconds for timers (throttle, debounce, progress). Tests inject a manual one.
public protocol StoreClock: AnyObject {
    /// Seconds since the epoch.
    var now: Double { get }
    /// Seconds on a clock that never jumps.
    var monotonic: Double { get }
}

/// The real clocks.
public final class SystemClock: StoreClock {
    public init() {}
    public var now: Double { Date().timeIntervalSince1970 }
    public var monotonic: Double {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
    }
}

/// A clock that moves only when told to: for tests.
public final class ManualClock: StoreClock {
    public var now: Double
    public var monotonic: Double

    public init(now: Double = 1_700_000_000, monotonic: Double = 1000) {
        self.now = now
        self.monotonic = monotonic
    }

    /// Moves both clocks forward by `seconds`.
    public func advance(_ seconds: Double) {
        now += seconds
        monotonic += seconds
    }
}
