import Foundation

/// The extras of an observer whose handler runs on an asynchronous scheduler: the scheduler, and
/// the handler calls waiting on it, at most `ChangeBuffer.limit` (the limit `changes` has).
///
/// Each change is scheduled as a call of its own until `limit - 1` calls wait. The next one is
/// kept here, in the merge slot, and one call is scheduled that takes the slot when it runs;
/// changes that arrive while the slot is not taken yet are merged into it: it keeps the `old` of
/// the first and takes the `new` of the latest, so each change the handler gets starts from the
/// value the one before it ended on, and the last ends on the latest value. A merge that ends on
/// the value it started from is no change (for `Equatable` values) and empties the slot.
///
/// Errors (`onError`): the slot holds the latest outcome. An error arriving while it merges is
/// kept after the merged change and replaces an earlier error there; a change arriving after it
/// drops it (the handler gets the value the error gave way to, not the error). So the slot
/// delivers at most a change and then an error.
///
/// One thread at a time delivers an observer's changes (the engine's delivering thread, handed
/// over under the engine lock), so the calls are scheduled in order; the lock is for the
/// scheduler's threads, which start the calls. (A pthread mutex rather than Synchronization's
/// Mutex, whose contended hand-over ThreadSanitizer does not see: EngineLock.swift.)
final class ScheduledDelivery<Value: Sendable>: ObserverExtras, @unchecked Sendable {
    let scheduler: any EventScheduler
    private let isEqual: @Sendable (Value, Value) -> Bool
    private let lock = NSLock()
    /// Calls scheduled and not started yet.
    private var waiting = 0
    /// Whether the last call scheduled takes the slot, and has not started yet.
    private var merging = false
    private var mergedChange: (old: Value, new: Value)?
    private var mergedError: (any Error)?

    init(scheduler: any EventScheduler, isEqual: @escaping @Sendable (Value, Value) -> Bool,
         errorHandler: (@Sendable (any Error) -> Void)?) {
        self.scheduler = scheduler
        self.isEqual = isEqual
        super.init(errorHandler: errorHandler)
    }

    /// Schedules the call of `observer`'s handler with a change, or merges the change into the
    /// slot. Called by the delivering thread.
    func schedule(_ old: Value, _ new: Value, isInitial: Bool, for observer: ObserverNode<Value>) {
        guard let ownCall = lock.withLock({ () -> Bool? in
            if merging {
                mergedError = nil
                if let start = mergedChange?.old {
                    mergedChange = isEqual(start, new) ? nil : (start, new)
                } else {
                    mergedChange = (old, new)
                }
                return nil
            }
            waiting += 1
            if waiting < ChangeBuffer<Value>.limit { return true }
            // The initial call is an observer's first: it never finds calls waiting.
            assert(!isInitial)
            merging = true
            mergedChange = (old, new)
            return false
        }) else { return }
        if ownCall {
            scheduler.schedule {
                self.started()
                observer.call(old, new, isInitial)
            }
        } else {
            scheduler.schedule { self.takeSlot(for: observer) }
        }
    }

    /// Schedules the call of `observer`'s error handler, or keeps the error in the slot. Called by
    /// the delivering thread.
    func schedule(_ error: any Error, for observer: ObserverNode<Value>) {
        guard let ownCall = lock.withLock({ () -> Bool? in
            if merging {
                mergedError = error
                return nil
            }
            waiting += 1
            if waiting < ChangeBuffer<Value>.limit { return true }
            merging = true
            mergedError = error
            return false
        }) else { return }
        if ownCall {
            scheduler.schedule {
                self.started()
                observer.callError(error)
            }
        } else {
            scheduler.schedule { self.takeSlot(for: observer) }
        }
    }

    private func started() {
        lock.withLock { waiting -= 1 }
    }

    /// The call that takes the slot: it delivers what was merged until it started.
    private func takeSlot(for observer: ObserverNode<Value>) {
        let (change, error) = lock.withLock { () -> ((old: Value, new: Value)?, (any Error)?) in
            waiting -= 1
            merging = false
            defer {
                mergedChange = nil
                mergedError = nil
            }
            return (mergedChange, mergedError)
        }
        if let change { observer.call(change.old, change.new, false) }
        if let error { observer.callError(error) }
    }
}
