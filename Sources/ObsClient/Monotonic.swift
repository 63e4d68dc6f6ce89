import Glibc

/// Seconds on the monotonic clock: deadlines never jump with the wall clock.
public func monotonicNow() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
