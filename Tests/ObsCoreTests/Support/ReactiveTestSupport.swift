import Synchronization
import XCTest
@testable import ObsCore

/// A counter that closures of computeds and handlers can bump from any thread.
final class Counter: Sendable {
    private let storage = Locked(0)
    func bump() { storage.withLock { $0 += 1 } }
    var count: Int { storage.withLock { $0 } }
    func reset() { storage.withLock { $0 = 0 } }
}

/// A thread-safe log of what handlers saw, in order.
final class Log<Element: Sendable>: Sendable {
    private let storage = Locked<[Element]>([])
    func append(_ element: Element) { storage.withLock { $0.append(element) } }
    var entries: [Element] { storage.withLock { $0 } }
    func clear() { storage.withLock { $0.removeAll() } }
}

/// A delay scheduler driven by hand: actions run when the test advances the clock past them.
final class ManualDelayScheduler: DelayScheduler, Sendable {
    private struct Entry { let due: Duration; let order: Int; let action: @Sendable () -> Void }
    private let state = Locked<(now: Duration, order: Int, entries: [Entry])>((.zero, 0, []))

    func after(_ delay: Duration, _ action: @escaping @Sendable () -> Void) {
        state.withLock { state in
            state.entries.append(Entry(due: state.now + delay, order: state.order, action: action))
            state.order += 1
        }
    }

    /// Moves the clock forward, running every action that falls due, in time order.
    func advance(by interval: Duration) {
        let target = state.withLock { $0.now + interval }
        while true {
            let next = state.withLock { state -> Entry? in
                guard let index = state.entries.indices
                    .filter({ state.entries[$0].due <= target })
                    .min(by: { (state.entries[$0].due, state.entries[$0].order) < (state.entries[$1].due, state.entries[$1].order) })
                else { return nil }
                let entry = state.entries.remove(at: index)
                state.now = entry.due
                return entry
            }
            guard let next else { break }
            next.action()
        }
        state.withLock { $0.now = target }
    }
}

/// Waits until `queue` has run everything scheduled on it so far.
func drain(_ queue: DispatchQueue) {
    queue.sync {}
}
