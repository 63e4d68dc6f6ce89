import Foundation

/// A value behind a pthread mutex (`NSLock`). Synchronization's `Mutex` costs the same when nobody
/// waits, but ThreadSanitizer does not see how a contended `Mutex` hands over and reports races
/// between accesses it orders (EngineLock.swift): the library's own state, and the tests', use
/// this so that a ThreadSanitizer run reports only real races.
final class Locked<State>: @unchecked Sendable {
    private let lock = NSLock()
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
