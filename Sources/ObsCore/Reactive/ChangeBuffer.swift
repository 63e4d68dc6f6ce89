import Foundation

/// The changes `changes` has not handed to its reader yet: at most `limit` of them. A change that
/// arrives when the buffer is full is merged into the last one waiting (its `oldValue`, the new
/// `newValue`), so a reader that falls behind still gets the latest value, and every change it
/// gets starts from the value the one before it ended on; a merge that ends where it started (an
/// equal value, for `Equatable` values) leaves nothing to deliver and is dropped.
final class ChangeBuffer<Value: Sendable>: @unchecked Sendable {
    // @unchecked: the state is guarded by `lock`, a pthread mutex rather than Synchronization's
    // Mutex, whose contended hand-over ThreadSanitizer does not see (EngineLock.swift).
    /// How many changes `changes` keeps for a reader that is behind (docs/library.md).
    static var limit: Int { 1024 }

    private let lock = NSLock()
    private var waiting = Ring<Change<Value>>()
    /// The reader, suspended until a change arrives (only while none waits).
    private var reader: CheckedContinuation<Change<Value>?, Never>?
    /// The reader's task was cancelled: nothing more is handed out.
    private var ended = false
    private let limit: Int
    private let isEqual: @Sendable (Value, Value) -> Bool

    init(limit: Int, isEqual: @escaping @Sendable (Value, Value) -> Bool) {
        self.limit = limit
        self.isEqual = isEqual
    }

    /// Hands `change` to the waiting reader, or keeps it for the next `next()`.
    func push(_ change: Change<Value>) {
        let waitingReader = lock.withLock { () -> CheckedContinuation<Change<Value>?, Never>? in
            if ended { return nil }
            if let reader {
                self.reader = nil
                return reader
            }
            if waiting.count < limit {
                waiting.append(change)
            } else if let last = waiting.popLast(), !isEqual(last.oldValue, change.newValue) {
                waiting.append(Change(oldValue: last.oldValue, newValue: change.newValue))
            }
            return nil
        }
        waitingReader?.resume(returning: change)
    }

    /// The next change, waiting for one; nil once the reading task is cancelled.
    func next() async -> Change<Value>? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Change<Value>?, Never>) in
                let ready = lock.withLock { () -> Change<Value>?? in
                    if ended { return .some(nil) }
                    if let change = waiting.popFirst() { return change }
                    reader = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waitingReader = lock.withLock { () -> CheckedContinuation<Change<Value>?, Never>? in
                ended = true
                defer { reader = nil }
                return reader
            }
            waitingReader?.resume(returning: nil)
        }
    }
}
