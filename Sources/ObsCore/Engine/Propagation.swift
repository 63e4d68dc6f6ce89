/// How a change travels through the graph.
///
/// Nodes are sources (`Observable`), computeds (`Computed`) and watchers (observers, which call
/// user handlers after the transaction, and effects, which run inside it: bindings). Edges are
/// `Link`s, kept in two orders: each node's dependencies in the order it read them, and each node's
/// subscribers in the order they subscribed. State is a few flags per node (`NodeFlags`):
/// `dirty` (a direct dependency changed), `pending` (something further up may have changed),
/// `running`, `checking`, `queued`, `disposed`.
///
/// 1. A transaction (one write, or a `batch`) takes the engine lock; nested writes and reads by the
///    same thread re-enter it. Writes are applied at once; nothing is recomputed yet.
/// 2. Marking (push). A source whose value changed (its equality check failed) becomes `dirty`
///    and marks every node below it `pending`, breadth first in subscription order, with an
///    explicit queue (no recursion). A node already marked stops the walk, so marking is proportional to
///    the nodes not yet marked in this transaction, and terminates on any graph. Watchers reached
///    are queued once each (`queued`), and so are `eager` computeds, which are marked like any
///    other computed besides. The source keeps the value its subscribers last saw: the
///    first check after the writes compares the two, so writing a value and then the old value
///    back in one transaction recomputes nothing.
/// 3. When the outermost transaction ends, the queue is flushed: effects first (they may write,
///    which marks more nodes, in the same transaction), then observers. A queued watcher runs only if
///    it is `dirty`, or `pending` and a walk of its dependencies (step 4) finds a real change; a
///    queued eager computed is brought up to date as a read would.
/// 4. Checking (pull). `checkDirty` walks a node's dependencies in the order they were last read,
///    descending into `pending` computeds with an explicit stack. A `dirty` node met on the way
///    is updated (a computed recomputed, a source compared with what its subscribers last saw);
///    if its value changed, its own subscribers become `dirty`
///    (`shallowPropagate`) and the walk stops looking at further dependencies of that level: the
///    node above must recompute anyway, and its closure decides what it still reads. Coming back up,
///    a node whose dependency changed is recomputed; one whose dependencies did not change just loses
///    `pending`. So a computed is evaluated at most once per transaction, only after every write,
///    only when a dependency it actually read changed, and dependencies it no longer reads are
///    never evaluated (a lazy branch stays lazy).
/// 5. Equality cut-off. A recomputation that yields a value equal to the old one (per the type's
///    `==`) reports "unchanged": nodes above it are not recomputed because of it, and observers see
///    nothing.
/// 6. Dynamic dependencies. While a computed runs, the engine keeps a cursor in its dependency list
///    (`depsTail`, the last dependency read so far). A read of the node after the cursor moves the
///    cursor on and reuses that link: a computed whose dependencies did not change re-tracks them at
///    the cost of a comparison per read, with no call (the read is inlined into the closure) and no
///    allocation. A read out of that order links the node after the cursor, unless it was already
///    linked in this run (a node read again between other reads), which the run's number stamped on
///    the node tells without a search (Tracking.swift). Links left over after the run are
///    dependencies no longer read: they are unlinked and their records freed (Link.swift), and the
///    nodes they kept alive are released after the transaction.
/// 7. Laziness. A computed is only evaluated when read, or when a watcher needs it. Nobody reading
///    it means nobody evaluating it; marking it costs a flag.
/// 8. Cycles. A computed whose closure reads, directly or through others, the computed being
///    evaluated gets `ReactiveError.cycle` (`running` is set while its closure runs). The dependency
///    walk marks the nodes on its path `checking` and treats meeting one again as a change that
///    needs recomputation, so it cannot loop; the recomputation then finds the cycle.
/// 9. Errors. A computed whose closure throws keeps the error as its state, cached like a value
///    until a dependency changes; readers through `try get()` rethrow it, readers through `.value`
///    fail with it. An equal error again is not a change; a value after an error always is.
/// 10. Delivery. Observers compute their `Change` under the lock, then the lock is released and the
///    changes are delivered in commit order by one thread at a time (the first writer to find nobody
///    delivering). A write made by a handler while it is being delivered is queued and applied
///    after the current transaction, in FIFO order, never recursively.
extension Engine {
    /// Step 2 for a source that changed: it becomes `dirty` (its subscribers will compare its
    /// value with the one they last saw) and everything below it `pending`. Further writes to a
    /// source already dirty in this transaction mark nothing. An eager computed made to recompute
    /// this way is queued for the flush (even if already dirty: it may have become eager since).
    @inline(__always)
    func propagate(from source: ReactiveNode) {
        let flags = source.flags
        if !flags.contains(.dirty) { source.flags = flags.union(.dirty) }
        // After the flags are written: `enqueue` adds `queued` to them.
        if flags.contains(.eager) { enqueue(source.ref, flags) }
        if flags.contains(.dirty) { return }
        if let subs = source.subs { markPending(from: subs) }
    }

    /// Marks everything below `first` pending, breadth first: every subscriber list met is queued
    /// and walked in turn, so watchers are queued nearest first (for a layered graph, layer by
    /// layer). Checking them in that order finds their dependencies already settled, and sweeps
    /// memory roughly in the order the graph was built (measured against depth first: cellx1000
    /// 9.6 -> 8.2 ms, cellx5000 about 1.4x faster, the kairo shapes unchanged).
    ///
    /// A graph larger than the caches would cost a cache miss per hop, one after the other: the
    /// link names the subscriber, the subscriber's flags decide, its list names the next links. So
    /// the walk reads no subscriber when it meets it: it prefetches it and puts it in a small ring,
    /// and marks it `markLag` subscribers later, in the same order, when its memory has arrived
    /// (the ring is a FIFO, so the walk stays breadth first and watchers are queued in the same
    /// order). The misses of a layer's subscribers then overlap instead of queueing up. Each list
    /// is prefetched when queued, each next link as the current one is read, and the walk runs
    /// ahead in the link pages (`LinkRef.runAhead`), so that the nodes a layered graph's next
    /// layers are made of are loaded by the time the walk reaches them.
    ///
    /// All this costs instructions, for nothing where the caches hold the graph anyway (diamond
    /// +7%, triangle +5%; 10-13% of the marking of the dynamic benchmark's 100 x 15 and 1000 x 5
    /// graphs): a walk starts out marking each subscriber as it meets it, and turns to the ring
    /// and the running ahead only once it has met `markLagAfter` subscribers, in a graph whose links
    /// fill `prefetchingPages` pages or more. The order is the same either way (the ring is empty
    /// when it turns).
    private func markPending(from first: LinkRef) {
        let base = linkStack.count
        var head = base
        let ring = markRing
        let mask = Engine.markRingCapacity - 1
        var ringHead = 0
        var ringTail = 0
        var untilLarge = links.pageCount >= Engine.prefetchingPages ? Engine.markLagAfter : Int.max
        linkStack.append(first)
        while true {
            if head < linkStack.count {
                var next: LinkRef? = linkStack[head]
                head += 1
                while let link = next {
                    next = link.nextSub
                    next?.prefetch()
                    let sub = link.sub
                    if untilLarge > 0 {
                        untilLarge -= 1
                        mark(sub)
                        continue
                    }
                    link.runAhead()
                    sub.prefetchHead()
                    if ringTail - ringHead == Engine.markLag {
                        mark(ring[ringHead & mask])
                        ringHead += 1
                    }
                    ring[ringTail & mask] = sub
                    ringTail += 1
                }
            } else if ringHead < ringTail {
                mark(ring[ringHead & mask])
                ringHead += 1
            } else {
                break
            }
        }
        linkStack.truncate(to: base)
    }

    /// How many subscribers the marking walk has prefetched but not yet marked, and the size of
    /// its ring (a power of two above it).
    static var markLag: Int { 16 }
    static var markRingCapacity: Int { 32 }
    /// How many subscribers a marking walk meets before it starts prefetching ahead, and how many
    /// link pages a graph must fill for that (64: 1 MiB of links, a graph of about 2 MiB, beyond
    /// what a core's own cache holds beside everything else: cellx at 5,000 layers, the dynamic
    /// benchmark's 1000-wide graphs; not cellx at 2,500 or the 100 x 15 graph).
    static var markLagAfter: Int { 256 }
    static var prefetchingPages: Int { 64 }

    /// Marks one subscriber the walk reached: a computed is marked `pending` and its subscribers
    /// queued for the walk (an eager one is queued for the flush too), a watcher is marked and
    /// queued for the flush; one already marked in this transaction stops the walk there.
    @inline(__always)
    private func mark(_ node: Unmanaged<ReactiveNode>) {
        let flags = node.flags
        guard flags.isDisjoint(with: [.dirty, .pending]) else { return }
        node.flags = flags.union(.pending)
        if flags.contains(.watcher) {
            enqueue(node, flags)
        } else {
            if flags.contains(.eager) { enqueue(node, flags) }
            if let below = node.subs {
                below.prefetch()
                linkStack.append(below)
            }
        }
    }

    /// Queues a watcher or an eager computed, once per transaction. The queue does not retain it:
    /// a watcher that is cancelled while queued is kept alive until the flush by
    /// `keepUntilSettled`; an eager computed's owner keeps it (the store its keys).
    @inline(__always)
    func enqueue(_ watcher: Unmanaged<ReactiveNode>, _ flags: NodeFlags) {
        if flags.contains(.queued) { return }
        watcher.flags.insert(.queued)
        if flags.contains(.effect) {
            pendingEffects.append(watcher)
        } else {
            pendingObservers.append(watcher)
        }
    }

    /// After `first.dep` was updated and changed: its pending subscribers become dirty.
    @inline(__always)
    func shallowPropagate(_ first: LinkRef) {
        var next: LinkRef? = first
        while let link = next {
            let sub = link.sub
            let flags = sub.flags
            if flags.intersection([.pending, .dirty]) == .pending {
                sub.flags = flags.union(.dirty)
            }
            next = link.nextSub
        }
    }

    /// Brings a computed up to date before it is read.
    @inline(__always)
    func refresh(_ node: ReactiveNode) {
        let flags = node.flags
        if flags.contains(.dirty) {
            recompute(node.ref)
        } else if flags.contains(.pending) {
            if checkDirty(node.ref) {
                recompute(node.ref)
            } else {
                node.flags.remove(.pending)
            }
        }
    }

    @inline(__always)
    private func recompute(_ node: Unmanaged<ReactiveNode>) {
        if node.update(), let subs = node.subs {
            shallowPropagate(subs)
        }
    }

    /// Step 4: whether any dependency of `root` really changed, recomputing what is needed to know.
    func checkDirty(_ root: Unmanaged<ReactiveNode>) -> Bool {
        guard var link = root.deps else { return false }
        var sub = root
        let base = checkStack.count
        walk: while true {
            let dep = link.dep
            let depFlags = dep.flags
            var dirty = false
            if sub.flags.contains(.dirty) {
                dirty = true
            } else if depFlags.contains(.dirty) {
                if dep.update() {
                    if let subs = dep.subs, subs.nextSub != nil { shallowPropagate(subs) }
                    dirty = true
                }
            } else if depFlags.contains(.pending) {
                if depFlags.contains(.checking) || dep.deps == nil {
                    dirty = true
                } else {
                    dep.flags = depFlags.union(.checking)
                    checkStack.append(link)
                    link = dep.deps!
                    sub = dep
                    continue walk
                }
            } else if depFlags.contains(.running) {
                dirty = true
            }
            if !dirty, let next = link.nextDep {
                link = next
                continue walk
            }
            while checkStack.count > base {
                let up = checkStack.removeLast()
                sub.flags.remove(.checking)
                if dirty {
                    if sub.update() {
                        if let subs = sub.subs, subs.nextSub != nil { shallowPropagate(subs) }
                        sub = up.sub
                        continue
                    }
                } else {
                    sub.flags.remove(.pending)
                }
                sub = up.sub
                if let next = up.nextDep {
                    link = next
                    continue walk
                }
                dirty = false
            }
            return dirty
        }
    }
}
