import Synchronization

/// The changes `changes` has not handed to its reader yet: at most `limit` of them. A change that
/// arrives when the buffer is full is merged into the last one waiting (its `oldValue`, the new
/// `newValue`), so a reader that falls behind still gets the latest value, and every change it
/// gets starts from the value the one before it ended on; a merge that ends where it started (an
/// equal value, for `Equatable` values) leaves nothing to deliver and is dropped.
final class ChangeBuffer<Value: Sendable>: Sendable {
    /// How many changes `changes` keeps for a reader that is behind (docs/library.md).
    static var limit: Int { 1024 }

    private struct State: Sendable {
        var waiting = Ring<Change<Value>>()
        /// The reader, suspended until a change arrives (only while none waits).
        var reader: CheckedContinuation<Change<Value>?, Never>?
        /// The reader's task was cancelled: nothing more is handed out.
        var ended = false
    }

    private let state = Mutex(State())
    private let limit: Int
    private let isEqual: @Sendable (Value, Value) -> Bool

    init(limit: Int, isEqual: @escaping @Sendable (Value, Value) -> Bool) {
        self.limit = limit
        self.isEqual = isEqual
    }

    /// Hands `change` to the waiting reader, or keeps it for the next `next()`.
    func push(_ change: Change<Value>) {
        let reader = state.withLock { state -> CheckedContinuation<Change<Value>?, Never>? in
            if state.ended { return nil }
            if let reader = state.reader {
                state.reader = nil
                return reader
            }
            if state.waiting.count < limit {
                state.waiting.append(change)
            } else if let last = state.waiting.popLast(), !isEqual(last.oldValue, change.newValue) {
                state.waiting.append(Change(oldValue: last.oldValue, newValue: change.newValue))
            }
            return nil
        }
        reader?.resume(returning: change)
    }

    /// The next change, waiting for one; nil once the reading task is cancelled.
    func next() async -> Change<Value>? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (reader: CheckedContinuation<Change<Value>?, Never>) in
                let ready = state.withLock { state -> Change<Value>?? in
                    if state.ended { return .some(nil) }
                    if let change = state.waiting.popFirst() { return change }
                    state.reader = reader
                    return nil
                }
                if let ready { reader.resume(returning: ready) }
            }
        } onCancel: {
            let reader = state.withLock { state in
                state.ended = true
                defer { state.reader = nil }
                return state.reader
            }
            reader?.resume(returning: nil)
        }
    }
}
