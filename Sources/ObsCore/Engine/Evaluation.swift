/// The evaluation bracket: how every node type runs the code that decides its value (a computed's
/// closure, a computed key's expression, an effect's body), and the few operations other node
/// types use from inside one. Nothing outside the engine's folder touches `activeSub`, `depsTail`
/// or `evaluationDepth`: they go through `track`, `untracked` and the reads below.
extension Engine {
    /// Runs `body` as `node`'s evaluation and returns what it returned (Propagation.swift, step 6):
    /// every node it reads through `recordRead` (or an `ObservableValue` read) becomes a
    /// dependency of `node`, in reading order, and the dependencies it no longer read are dropped
    /// afterwards; `node` is `running` meanwhile, so reading it closes a cycle; writes made meanwhile
    /// are deferred (`mustDefer`).
    ///
    /// Throws what `body` threw, or the error of the first failed `.value` read inside it (which
    /// wins: `body` went on with a stale value), or `ReactiveError.nestedTooDeeply` without running
    /// `body` when the thread's stack has no room for another evaluation. Called inside the engine.
    @inline(__always)
    func track<Value>(_ node: ReactiveNode, _ body: () throws -> Value) throws -> Value {
        if evaluationDepth & 15 == 15, !stackGuard.hasRoom() {
            node.flags.remove([.dirty, .pending])
            throw ReactiveError.nestedTooDeeply
        }
        let outer = beginEvaluation(of: node)
        let result: Value
        do {
            result = try body()
        } catch {
            if endEvaluation(of: node, outer) { throw takePoison() }
            throw error
        }
        if endEvaluation(of: node, outer) { throw takePoison() }
        return result
    }

    /// Runs `body` without recording its reads as dependencies of the evaluation under way (a
    /// `peek`, an observer reading its target, a one-off `eval`). Called inside the engine.
    @inline(__always)
    func untracked<Value, Failure: Error>(_ body: () throws(Failure) -> Value) throws(Failure) -> Value {
        let reader = activeSub
        activeSub = nil
        defer { activeSub = reader }
        return try body()
    }

    /// Records that the evaluation under way, if any, read `node`.
    @inlinable
    func recordRead(of node: ReactiveNode) {
        if let reader = activeSub { link(node.ref, reader) }
    }

    /// Records the read of `node` if the evaluation under way read it at this point last time, or
    /// read it just before (the common case of a reader whose dependencies are stable), or is
    /// known to have linked it already in this run (its stamp, Tracking.swift); false if no
    /// evaluation is recording or the read is another one (then nothing is recorded: the caller
    /// reads the long way, through `recordRead`). Called inside the engine.
    @inlinable @inline(__always)
    func recordExpectedRead(of node: ReactiveNode) -> Bool {
        guard let reader = activeSub else { return false }
        let dep = node.ref
        if let tail = depsTail {
            if tail.dep === dep { return true }
            if let next = tail.nextDep, next.dep === dep {
                depsTail = next
                return true
            }
        } else if let first = reader.deps, first.dep === dep {
            depsTail = first
            return true
        }
        return evaluationEpoch != 0 && node.readEpoch == evaluationEpoch
    }

    /// Whether an evaluation is recording its reads now.
    var isTracking: Bool { activeSub != nil }

    /// Whether a `.value` read in the evaluation under way failed: what it computed since used a
    /// stale value, and will be thrown away (an effect checks before it writes).
    var evaluationFailed: Bool { poisoned }

    /// The node the evaluation under way read at this position last time, if any: a reader whose
    /// dependencies are stable reads the same nodes in the same order, so this is usually the node
    /// it is about to read (a hint that saves looking it up by name).
    /// (Unretained: the reader's link to it keeps it alive until the link goes.)
    @inline(__always)
    func expectedReadReference() -> Unmanaged<ReactiveNode>? {
        guard let reader = activeSub else { return nil }
        let tail = depsTail
        guard let next = tail != nil ? tail!.nextDep : reader.deps else { return nil }
        return next.dep
    }

    /// Makes `watcher` depend on `node` outside any evaluation: a watcher of exactly one node,
    /// whose dependency never changes.
    func attach(_ watcher: ReactiveNode, to node: ReactiveNode) {
        var last = watcher.deps
        while let next = last?.nextDep { last = next }
        appendLink(node.ref, watcher.ref, after: last, before: nil)
    }

    /// Makes a computed node recompute when it is next refreshed, whatever its dependencies did.
    func invalidate(_ node: ReactiveNode) {
        node.flags.insert(.dirty)
    }

    /// Brings a source node up to date before it is read: if it was written since its subscribers
    /// last looked, they are told now whether it really changed (Propagation.swift, step 2).
    @inline(__always)
    func settleSource(_ node: ReactiveNode) {
        if node.flags.contains(.dirty), node.update(), let subs = node.subs { shallowPropagate(subs) }
    }

    // MARK: The bracket's parts

    /// What an evaluation saves of the one it interrupts.
    struct OuterEvaluation {
        let reader: Unmanaged<ReactiveNode>?
        let depsTail: LinkRef?
        let poisoned: Bool
    }

    /// Starts running `node`'s code: its reads are recorded from its first dependency on.
    @inline(__always)
    private func beginEvaluation(of node: ReactiveNode) -> OuterEvaluation {
        let outer = OuterEvaluation(reader: activeSub, depsTail: depsTail, poisoned: poisoned)
        if poisoned {
            outerPoisons.append(poison!)
            poison = nil
            poisoned = false
        }
        activeSub = node.ref
        evaluationEpoch = 0
        depsTail = nil
        node.flags.remove([.dirty, .pending])
        node.flags.insert(.running)
        evaluationDepth += 1
        return outer
    }

    /// Ends it: drops the dependencies no longer read; true if a `.value` read failed (the error is
    /// then taken with `takePoison()`).
    @inline(__always)
    private func endEvaluation(of node: ReactiveNode, _ outer: OuterEvaluation) -> Bool {
        evaluationDepth -= 1
        node.flags.remove(.running)
        let failed = poisoned
        activeSub = outer.reader
        evaluationEpoch = 0
        if outer.poisoned {
            if failed { outerFailure = poison }
            poison = outerPoisons.removeLast()
            poisoned = true
        } else if failed {
            outerFailure = poison
            poison = nil
            poisoned = false
        }
        purgeDependencies(of: node, after: depsTail)
        depsTail = outer.depsTail
        return failed
    }

    /// The error that failed the evaluation just ended.
    private func takePoison() -> any Error {
        defer { outerFailure = nil }
        return outerFailure!
    }

    /// Records the first failed read of the running evaluation.
    @inline(__always)
    func poisonActiveEvaluation(with error: any Error) {
        if activeSub != nil, !poisoned {
            poison = error
            poisoned = true
        }
    }
}

extension ReactiveNode {
    /// Whether this node's evaluation is on the stack: reading it now closes a cycle.
    final var isEvaluating: Bool { flags.contains(.running) }

    /// Whether anything depends on this node.
    final var hasSubscribers: Bool { subs != nil }

    /// The nodes this node read on its last evaluation, in reading order.
    final func forEachDependency(_ body: (ReactiveNode) throws -> Void) rethrows {
        var link = deps
        while let current = link {
            try body(current.dep.takeUnretainedValue())
            link = current.nextDep
        }
    }

    /// The nodes that depend on this one, in the order they subscribed.
    final func forEachSubscriber(_ body: (ReactiveNode) throws -> Void) rethrows {
        var link = subs
        while let current = link {
            try body(current.sub.takeUnretainedValue())
            link = current.nextSub
        }
    }

    /// A source node's `update()`: its pending write has been compared.
    final func markChecked() {
        flags.remove(.dirty)
    }
}
