import Foundation

/// Writes on a thread of its own what a command hands it, in order, with at most `capacity`
/// writes waiting. While it is full, `enqueue` calls its `whileFull` closure instead of blocking
/// in write(2): `get` takes the daemon's answers meanwhile, so that a slow reader of obsctl's
/// stdout (`obsctl get ... | less`, left on its first page) does not leave them waiting unread in
/// the daemon, which would stop reading the connection and drop it after its `client_timeout`.
final class LinePrinter: @unchecked Sendable {
    // @unchecked: every field is used under `condition`.
    private let condition = NSCondition()
    private var waiting: [@Sendable () -> Void] = []
    private var writing = false
    private var finished = false
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        Thread.detachNewThread { [self] in run() }
    }

    /// Queues `write`. While `capacity` writes wait, calls `whileFull` (which should not wait)
    /// at once and then every `interval` seconds, until there is room.
    func enqueue(_ write: @escaping @Sendable () -> Void, interval: Double = 0.05, whileFull: () -> Void) {
        condition.lock()
        while waiting.count >= capacity {
            condition.unlock()
            whileFull()
            condition.lock()
            if waiting.count >= capacity { _ = condition.wait(until: Date(timeIntervalSinceNow: interval)) }
        }
        waiting.append(write)
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until every queued write is done.
    func finish() {
        condition.lock()
        finished = true
        condition.broadcast()
        while !waiting.isEmpty || writing { condition.wait() }
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while waiting.isEmpty, !finished { condition.wait() }
            if waiting.isEmpty {
                condition.unlock()
                return
            }
            let write = waiting.removeFirst()
            writing = true
            condition.unlock()
            write()
            condition.lock()
            writing = false
            condition.broadcast()
            condition.unlock()
        }
    }
}
