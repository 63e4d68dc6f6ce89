import Glibc

/// A point on the monotonic clock, in nanoseconds.
struct Monotonic: Comparable, Sendable {
    let nanoseconds: UInt64

    static var now: Monotonic {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Monotonic(nanoseconds: UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec))
    }

    static func + (lhs: Monotonic, rhs: Duration) -> Monotonic {
        let (seconds, attoseconds) = rhs.components
        return Monotonic(nanoseconds: lhs.nanoseconds + UInt64(max(0, seconds)) * 1_000_000_000
                            + UInt64(max(0, attoseconds) / 1_000_000_000))
    }

    /// Milliseconds from now until this point, 0 when it has passed.
    var millisecondsLeft: Int {
        let now = Monotonic.now.nanoseconds
        return nanoseconds > now ? Int((nanoseconds - now + 999_999) / 1_000_000) : 0
    }

    static func < (lhs: Monotonic, rhs: Monotonic) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
}

extension Duration {
    var milliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}
