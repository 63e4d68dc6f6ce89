/// The one reactive engine of the process: every Observable, Computed and observer, and the daemon's
/// named keys, are nodes of it. It owns the graph; all mutation happens under its lock, on one
/// thread at a time (Propagation.swift explains the algorithm).
let engine = Engine()

/// The engine's state. Everything here is guarded by `lock`, except what the delivering thread
/// alone touches (`delivering`, `handlerDepth`), as noted.
@usableFromInline
final class Engine: @unchecked Sendable {
    @usableFromInline let lock = EngineLock()
    /// How many times the lock's owner has entered; the transaction ends when it returns to 0.
    @usableFromInline @exclusivity(unchecked) var depth = 0
    /// The computed or effect whose reads are being recorded, if any.
    @usableFromInline @exclusivity(unchecked) var activeSub: Unmanaged<ReactiveNode>?
    /// The last dependency `activeSub` has read so far in its run (nil: none yet): where its next
    /// read is expected, and after which the dependencies it did not read are cut off. (The
    /// evaluation's, not the node's: a node needs it only while it runs.)
    @usableFromInline @exclusivity(unchecked) var depsTail: LinkRef?
    /// A number for the evaluation under way (`activeSub`'s run), given when it first needs one
    /// (0: none yet), never given twice (`lastEpoch`); Tracking.swift says what it is for. Every
    /// evaluation that begins or ends sets it back to 0, so that the run interrupted by a nested one
    /// goes on with a new number.
    @usableFromInline @exclusivity(unchecked) var evaluationEpoch: UInt64 = 0
    @exclusivity(unchecked) var lastEpoch: UInt64 = 0
    /// The first error met by a `.value` read during the current evaluation: it fails the reader.
    @exclusivity(unchecked) var poison: (any Error)?
    /// Whether `poison` is set (a flag, so the hot path never touches the existential).
    @exclusivity(unchecked) var poisoned = false
    /// The poisons of interrupted evaluations, restored when they resume.
    @exclusivity(unchecked) var outerPoisons = ContiguousArray<any Error>()
    /// The error that failed the evaluation that just ended, until taken.
    @exclusivity(unchecked) var outerFailure: (any Error)?
    /// Closures of computeds and binding transforms on the stack: writes now are deferred.
    @exclusivity(unchecked) var evaluationDepth = 0
    /// Refuses evaluations nested deeper than the stack allows (used under the lock).
    @exclusivity(unchecked) var stackGuard = StackGuard()

    /// The number of the flush under way (or the last one): effects count their runs in one.
    @exclusivity(unchecked) var flushSerial: UInt64 = 0
    /// Watchers reached in this transaction, in the order reached.
    @exclusivity(unchecked) var pendingEffects = PointerStack<Unmanaged<ReactiveNode>>()
    @exclusivity(unchecked) var pendingObservers = PointerStack<Unmanaged<ReactiveNode>>()
    /// Reusable stacks for the graph walks, so that they allocate nothing once warmed up.
    @exclusivity(unchecked) var linkStack = PointerStack<LinkRef>()
    @exclusivity(unchecked) var checkStack = PointerStack<LinkRef>()
    /// Subscribers reached by the marking walk, marked a few steps later (Propagation.swift).
    let markRing = UnsafeMutablePointer<Unmanaged<ReactiveNode>>.allocate(capacity: Engine.markRingCapacity)
    /// Nodes whose last link went away, released after the transaction (never recursively).
    @exclusivity(unchecked) var pendingReleases = PointerStack<Unmanaged<ReactiveNode>>()
    /// The memory of the graph's links.
    @exclusivity(unchecked) var links = LinkPages()

    /// Changes to deliver, in commit order, with their values (DeliveryQueue.swift).
    @exclusivity(unchecked) var deliveryQueue = DeliveryQueue()
    /// The number of the batch `deliveryQueue` fills (it goes up by one with each batch taken for
    /// delivery), and the last batch delivered whole. An entry does not retain its observer: an
    /// observer cancelled while a batch it has entries in is undelivered (`queuedBatch` above
    /// `deliveredBatch`) is kept alive in `retired` until that batch is delivered.
    @exclusivity(unchecked) var deliveryBatch: UInt64 = 1
    @exclusivity(unchecked) var deliveredBatch: UInt64 = 0
    @exclusivity(unchecked) var retired = PointerStack<Unmanaged<DeliveringObserver>>()
    /// Retired observers whose entries are all delivered, released by the delivering thread (and
    /// touched by it alone, before it stops delivering) once it has let go of the lock: releasing
    /// one may run any code.
    @exclusivity(unchecked) var releasable = PointerStack<Unmanaged<DeliveringObserver>>()
    /// The memory of delivery queues, kept for reuse.
    @exclusivity(unchecked) var deliverySegments = DeliverySegments()
    /// Entries in `deliveryQueue`.
    @exclusivity(unchecked) var deliveryCount = 0
    /// The thread delivering changes now (0: none).
    @exclusivity(unchecked) var deliveringThread: UInt = 0
    /// The batch being delivered: touched by the delivering thread alone.
    @exclusivity(unchecked) var delivering = DeliveryQueue()
    /// Handlers on the delivering thread's stack: touched by that thread alone.
    @exclusivity(unchecked) var handlerDepth = 0
    /// Writes deferred until after the current transaction, one group per transaction, FIFO.
    @exclusivity(unchecked) var deferredWrites = ContiguousArray<ContiguousArray<() -> Void>>()
    @exclusivity(unchecked) var deferredHead = 0
    /// Open `batch` scopes that are collecting deferred writes into one group.
    @exclusivity(unchecked) var deferredGroupDepth = 0

    // MARK: Transactions

    /// Enters the engine: takes the lock, or re-enters it on the thread that holds it.
    @inlinable
    func enter() {
        let thread = currentThreadID()
        if lock.isHeld(by: thread) {
            depth += 1
        } else {
            lock.lock(as: thread)
            depth = 1
        }
    }

    /// Leaves the engine; the outermost exit ends the transaction.
    @inlinable
    func exit() {
        if depth > 1 {
            depth -= 1
        } else {
            endTransaction()
        }
    }

    /// Ends the outermost transaction: flushes watchers, releases dropped nodes, unlocks, and
    /// delivers the changes unless another thread is already delivering (it will deliver ours, in
    /// order).
    @usableFromInline @inline(never)
    func endTransaction() {
        settle()
        let deliver = deliveringThread == 0 && (!deliveryQueue.isEmpty || deferredHead < deferredWrites.count)
        if deliver { deliveringThread = currentThreadID() }
        depth = 0
        lock.unlock()
        if deliver { deliverAll() }
    }

    /// Runs the queued watchers and releases nodes that lost their last reader.
    private func settle() {
        if !pendingEffects.isEmpty || !pendingObservers.isEmpty { flush() }
        if !pendingReleases.isEmpty { releaseDropped() }
    }

    /// Releases the nodes that lost their last reader. A release may run any deinit (of what a
    /// computed's closure captured, say), and a deinit may write: the watchers such a write
    /// reached run in this transaction too (they used to wait for some later transaction).
    @inline(never)
    private func releaseDropped() {
        repeat {
            while let node = pendingReleases.popLast() {
                // A watcher cancelled by code the engine ran (ReactiveNode.dispose) is unlinked now.
                if node.flags.contains(.disposed), node.deps != nil {
                    purgeDependencies(of: node.takeUnretainedValue(), after: nil)
                }
                // The queues do not retain: a watcher a deinit's write queued again since the
                // flush is run (a disposed one only unqueued) before it can go.
                if node.flags.contains(.queued) { flush() }
                node.release()
            }
            if !pendingEffects.isEmpty || !pendingObservers.isEmpty { flush() }
        } while !pendingReleases.isEmpty
    }

    /// Step 3 of Propagation.swift: effects (which may write, in this transaction), then observers.
    private func flush() {
        flushSerial &+= 1
        var index = 0
        while index < pendingEffects.count {
            let effect = pendingEffects[index]
            index += 1
            runIfChanged(effect)
        }
        pendingEffects.removeAll()
        index = 0
        let count = pendingObservers.count
        // A long queue is run with its memory requested ahead, in three steps: the observer 16
        // places ahead, what it will read 8 ahead (its target, its pending values), the target's
        // first dependency 4 ahead. A short one is in the caches already (the prefetching would
        // only cost: about 5% in the kairo shapes).
        let ahead = count > Engine.prefetchThreshold ? count : 0
        while index < count {
            if index + 16 < ahead { pendingObservers[index + 16].prefetch() }
            if index + 8 < ahead { pendingObservers[index + 8]._withUnsafeGuaranteedRef { $0.prefetchWork() } }
            if index + 4 < ahead { pendingObservers[index + 4]._withUnsafeGuaranteedRef { $0.prefetchDependencies() } }
            let observer = pendingObservers[index]
            index += 1
            runIfChanged(observer)
        }
        pendingObservers.removeAll()
    }

    /// The queue length from which the flush and delivery prefetch.
    static var prefetchThreshold: Int { 256 }

    @inline(__always)
    private func runIfChanged(_ watcher: Unmanaged<ReactiveNode>) {
        let flags = watcher.flags.subtracting(.queued)
        watcher.flags = flags
        if !flags.contains(.watcher) {
            // An eager computed, brought up to date as a read would. One that stopped being eager
            // since it was queued is left as it is, to be brought up to date when next read.
            if flags.contains(.eager) { watcher._withUnsafeGuaranteedRef { refresh($0) } }
            return
        }
        if flags.contains(.disposed) {
            watcher.flags = flags.subtracting([.dirty, .pending])
            return
        }
        // The walk runs closures, which may cancel this watcher: it is then kept, but must not run.
        if flags.contains(.dirty) || (flags.contains(.pending) && checkDirty(watcher) && !watcher.flags.contains(.disposed)) {
            watcher.flags.remove([.dirty, .pending])
            watcher._withUnsafeGuaranteedRef { $0.runWatcher() }
        } else {
            watcher.flags.remove(.pending)
        }
    }

    // MARK: Deferred writes

    /// Whether a write now must wait for the current transaction: it comes from a computed's
    /// closure, or from a handler being delivered on this thread.
    @inline(__always)
    var mustDefer: Bool {
        evaluationDepth > 0 || (deliveringThread == currentThreadID() && handlerDepth > 0)
    }

    /// Whether this thread entered the engine from a handler it is delivering, and from nowhere
    /// else: once it leaves, it holds no lock and is still the delivering thread. (`handlerDepth`
    /// is the delivering thread's own: read only once this thread is known to be that one.)
    var isInsideHandlerOnly: Bool {
        depth == 1 && deliveringThread == currentThreadID() && handlerDepth > 0
    }

    /// Queues a write to be applied after the current transaction. Called inside the engine.
    func deferWrite(_ write: @escaping () -> Void) {
        if deferredGroupDepth > 0 {
            deferredWrites[deferredWrites.count - 1].append(write)
        } else {
            deferredWrites.append([write])
        }
    }

    /// Starts collecting deferred writes into one group (a `batch` made while writes are deferred).
    func openDeferredGroup() {
        if deferredGroupDepth == 0 { deferredWrites.append([]) }
        deferredGroupDepth += 1
    }

    func closeDeferredGroup() {
        deferredGroupDepth -= 1
    }

    // MARK: Delivery

    /// Delivers queued changes and applies deferred writes until both queues are empty.
    /// Runs on the thread recorded in `deliveringThread`, without the lock while handlers run.
    private func deliverAll() {
        lock.lock()
        while true {
            if !deliveryQueue.isEmpty {
                swap(&deliveryQueue, &delivering)
                let batch = deliveryBatch
                deliveryBatch &+= 1
                let ahead = deliveryCount > Engine.prefetchThreshold ? 16 : 0
                deliveryCount = 0
                lock.unlock()
                releaseDelivered()
                handlerDepth += 1
                // A long batch is delivered with each observer requested 16 entries ahead (a short
                // one is in the caches already).
                delivering.drain(lookahead: ahead, { $0.prefetch() }) { header, entry in
                    header.observer._withUnsafeGuaranteedRef { $0.deliver(header.kind, entry: entry) }
                }
                handlerDepth -= 1
                lock.lock()
                delivering.recycle(into: &deliverySegments)
                deliveredBatch = batch
                if !retired.isEmpty { collectDelivered() }
                continue
            }
            if deferredHead < deferredWrites.count {
                let group = deferredWrites[deferredHead]
                deferredWrites[deferredHead] = []
                deferredHead += 1
                if deferredHead == deferredWrites.count {
                    deferredWrites.removeAll(keepingCapacity: true)
                    deferredHead = 0
                }
                depth = 1
                for write in group { write() }
                settle()
                depth = 0
                continue
            }
            if !releasable.isEmpty {
                // Released while this thread is still the one delivering (`releasable` is its
                // alone), then the queues are looked at again.
                lock.unlock()
                releaseDelivered()
                lock.lock()
                continue
            }
            deliveringThread = 0
            lock.unlock()
            return
        }
    }

    /// Keeps a cancelled observer alive until the entries it has in the delivery queues are
    /// delivered (or dropped: it is cancelled). Called inside the engine.
    func retireAfterDelivery(_ observer: DeliveringObserver) {
        if observer.queuedBatch > deliveredBatch {
            retired.append(Unmanaged.passRetained(observer))
        }
    }

    /// Moves the retired observers whose batches are all delivered to `releasable`. Called by the
    /// delivering thread, under the lock.
    private func collectDelivered() {
        var index = 0
        while index < retired.count {
            let observer = retired[index]
            if observer._withUnsafeGuaranteedRef({ $0.queuedBatch }) <= deliveredBatch {
                releasable.append(observer)
                retired.swapRemove(at: index)
            } else {
                index += 1
            }
        }
    }

    /// Releases what `collectDelivered` found, without the lock.
    private func releaseDelivered() {
        while let observer = releasable.popLast() {
            observer.release()
        }
    }
}

/// An observer whose changes the engine delivers after the transaction. (A class, not a protocol:
/// queues of a concrete element type cost no runtime type lookups.)
class DeliveringObserver: ReactiveNode, @unchecked Sendable {
    /// The last delivery batch this observer queued an entry in (under the lock).
    @exclusivity(unchecked) final var queuedBatch: UInt64 = 0

    /// Delivers the change queued in `entry` (moving its payload out), or drops it if the observer
    /// was cancelled. Called on the delivering thread, without the lock.
    func deliver(_ kind: DeliveryKind, entry: UnsafeMutableRawPointer) {}

    /// Queues a delivery and returns where its payload goes; called inside the engine.
    @inline(__always)
    final func queueDelivery(_ kind: DeliveryKind, bytes: Int, alignment: Int) -> UnsafeMutableRawPointer {
        withEngine { engine in
            engine.deliveryCount += 1
            queuedBatch = engine.deliveryBatch
            return engine.deliveryQueue.append(self, kind, bytes: bytes, alignment: alignment, pool: &engine.deliverySegments)
        }
    }
}
