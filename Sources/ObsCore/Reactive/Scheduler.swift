import Dispatch

/// Where observers and event handlers run.
public protocol EventScheduler: Sendable {
    /// Runs `action`, now or later; actions scheduled in order run in order.
    func schedule(_ action: @escaping @Sendable () -> Void)
}

/// Runs handlers synchronously, on the thread delivering the change (the default).
public struct ImmediateScheduler: EventScheduler {
    public init() {}
    public func schedule(_ action: @escaping @Sendable () -> Void) { action() }
}

/// Runs handlers asynchronously on a dispatch queue; on a serial queue, in order.
public struct QueueScheduler: EventScheduler {
    public let queue: DispatchQueue
    public init(_ queue: DispatchQueue) { self.queue = queue }
    public func schedule(_ action: @escaping @Sendable () -> Void) { queue.async(execute: action) }
}

/// Runs handlers asynchronously on the main queue, in order (always asynchronously, so that a
/// change delivered from the main thread never overtakes one scheduled before it).
public struct MainScheduler: EventScheduler {
    public init() {}
    public func schedule(_ action: @escaping @Sendable () -> Void) { DispatchQueue.main.async(execute: action) }
}
