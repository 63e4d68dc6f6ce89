import Foundation
import Synchronization

/// A subscription: cancelling it, or releasing the last reference to it, stops its handler.
///
/// Tokens are `Hashable` by identity, so a `Set<ObservationToken>` can hold many.
public final class ObservationToken: Hashable, Sendable {
    /// What cancelling does, held with a retain in one word until taken (0 once cancelled): one of
    /// the engine's own subscriptions (an observer or a binding's node, cancelled directly, with no
    /// closure to allocate), or, with the low bit set, a box holding a closure. Taking it is one
    /// atomic exchange, so exactly one `cancel()` runs it. (A token is 24 bytes, 32 with the
    /// allocator's header; an enum of the two behind a mutex made it 48.)
    private let action: Atomic<UInt>

    /// A token that runs `onCancel` once, when cancelled or released.
    public init(_ onCancel: @escaping @Sendable () -> Void) {
        action = Atomic(UInt(bitPattern: Unmanaged.passRetained(CancelAction(onCancel)).toOpaque()) | 1)
    }

    /// A token that cancels `node`'s subscription once, when cancelled or released.
    init(cancelling node: ReactiveNode) {
        action = Atomic(UInt(bitPattern: Unmanaged.passRetained(node).toOpaque()))
    }

    /// Stops the subscription. Safe to call more than once, from any thread, from inside its handler.
    public func cancel() {
        Self.run(action.exchange(0, ordering: .acquiringAndReleasing))
    }

    /// Runs an action taken out of `action`, releasing what it held.
    private static func run(_ taken: UInt) {
        guard let address = UnsafeRawPointer(bitPattern: taken & ~1) else { return }
        if taken & 1 != 0 {
            Unmanaged<CancelAction>.fromOpaque(address).takeRetainedValue().run()
        } else {
            Unmanaged<ReactiveNode>.fromOpaque(address).takeRetainedValue().cancelSubscription()
        }
    }

    /// Makes cancelling run `then` too, after what it did already; false (and `then` is not kept)
    /// when the token is cancelled already. Costs a closure, so only bags use it.
    func whenCancelled(_ then: @escaping @Sendable () -> Void) -> Bool {
        var current = action.load(ordering: .acquiring)
        while current != 0 {
            // The new action owns the old one's retain once it is in place; until then the token does.
            let previous = current
            let chained = Unmanaged.passRetained(CancelAction {
                Self.run(previous)
                then()
            })
            let (exchanged, found) = action.compareExchange(
                expected: current, desired: UInt(bitPattern: chained.toOpaque()) | 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            chained.release()
            current = found
        }
        return false
    }

    /// Whether `cancel()` has run.
    public var isCancelled: Bool { action.load(ordering: .acquiring) == 0 }

    /// Adds this token to `bag`, which cancels it with the others.
    public func store(in bag: ObservationBag) { bag.insert(self) }

    deinit { cancel() }

    public static func == (lhs: ObservationToken, rhs: ObservationToken) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// The closure of a token made with one.
private final class CancelAction: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

/// Holds many subscriptions and cancels them together: on `cancelAll()` or when released. A token
/// cancelled on its own leaves the bag, so a bag that lives long holds only what is still live.
public final class ObservationBag: @unchecked Sendable {
    // @unchecked: the tokens are guarded by `lock`, a pthread mutex rather than Synchronization's
    // Mutex, whose contended hand-over ThreadSanitizer does not see (EngineLock.swift).
    private let lock = NSLock()
    /// By the order they were added in, which `cancelAll` keeps.
    private var held: [UInt64: ObservationToken] = [:]
    private var nextNumber: UInt64 = 0

    public init() {}

    /// Keeps `token` until it is cancelled, or the bag is cancelled or released.
    public func insert(_ token: ObservationToken) {
        let number = lock.withLock {
            defer { nextNumber += 1 }
            held[nextNumber] = token
            return nextNumber
        }
        // The token holds the bag weakly, so neither keeps the other alive. Added after the token
        // is in the bag, so that a cancel on another thread meanwhile either finds it there or
        // makes this fail.
        if !token.whenCancelled({ [weak self] in self?.remove(number) }) { remove(number) }
    }

    /// Lets go of a cancelled token (so its release, under the lock, runs nothing).
    private func remove(_ number: UInt64) {
        lock.withLock { _ = held.removeValue(forKey: number) }
    }

    /// How many subscriptions the bag holds: those added and not cancelled yet.
    public var count: Int { lock.withLock { held.count } }

    /// Cancels every subscription in the bag, in the order added, and empties it.
    public func cancelAll() {
        let all = lock.withLock {
            defer { held = [:] }
            return held
        }
        for (_, token) in all.sorted(by: { $0.key < $1.key }) { token.cancel() }
    }

    deinit { cancelAll() }
}
