import Synchronization

/// A subscription: cancelling it, or releasing the last reference to it, stops its handler.
///
/// Tokens are `Hashable` by identity, so a `Set<ObservationToken>` can hold many.
public final class ObservationToken: Hashable, Sendable {
    /// What cancelling does: run a closure, or cancel one of the engine's own subscriptions
    /// (observers, bindings) directly, with no closure to allocate per subscription.
    private enum Action: Sendable {
        case closure(@Sendable () -> Void)
        case subscription(any Subscription)
    }

    private let action: Mutex<Action?>

    /// A token that runs `onCancel` once, when cancelled or released.
    public init(_ onCancel: @escaping @Sendable () -> Void) {
        action = Mutex(.closure(onCancel))
    }

    /// A token that cancels `subscription` once, when cancelled or released.
    init(cancelling subscription: any Subscription) {
        action = Mutex(.subscription(subscription))
    }

    /// Stops the subscription. Safe to call more than once, from any thread, from inside its handler.
    public func cancel() {
        let taken = action.withLock { action -> Action? in
            defer { action = nil }
            return action
        }
        switch taken {
        case .closure(let onCancel): onCancel()
        case .subscription(let subscription): subscription.cancel()
        case nil: break
        }
    }

    /// Whether `cancel()` has run.
    public var isCancelled: Bool { action.withLock { $0 == nil } }

    /// Adds this token to `bag`, which cancels it with the others.
    public func store(in bag: ObservationBag) { bag.insert(self) }

    deinit { cancel() }

    public static func == (lhs: ObservationToken, rhs: ObservationToken) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// Something of the engine's that a token cancels.
protocol Subscription: AnyObject, Sendable {
    func cancel()
}

/// Holds many subscriptions and cancels them together: on `cancelAll()` or when released.
public final class ObservationBag: Sendable {
    private let tokens = Mutex<[ObservationToken]>([])

    public init() {}

    /// Keeps `token` until the bag is cancelled or released.
    public func insert(_ token: ObservationToken) {
        tokens.withLock { $0.append(token) }
    }

    /// How many subscriptions the bag holds.
    public var count: Int { tokens.withLock { $0.count } }

    /// Cancels every subscription in the bag, in the order added, and empties it.
    public func cancelAll() {
        let all = tokens.withLock { tokens -> [ObservationToken] in
            defer { tokens = [] }
            return tokens
        }
        for token in all { token.cancel() }
    }

    deinit { cancelAll() }
}
