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
        let taken = action.exchange(0, ordering: .acquiringAndReleasing)
        guard let address = UnsafeRawPointer(bitPattern: taken & ~1) else { return }
        if taken & 1 != 0 {
            Unmanaged<CancelAction>.fromOpaque(address).takeRetainedValue().run()
        } else {
            Unmanaged<ReactiveNode>.fromOpaque(address).takeRetainedValue().cancelSubscription()
        }
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
