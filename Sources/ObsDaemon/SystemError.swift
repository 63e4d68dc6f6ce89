import Glibc

/// A failed system call: what was attempted and errno's text.
public struct SystemError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public var code: Int32

    public init(_ what: String, code: Int32 = errno) {
        self.code = code
        description = "\(what): \(String(cString: strerror(code)))"
    }
}

/// The monotonic clock in seconds, the same one the service's deadlines use.
func monotonicSeconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}
