/// Dependency tracking: linking a read into the reader's dependency list, dropping dependencies no
/// longer read, and deferred releases (Propagation.swift, step 6).
///
/// Ownership: a link's record lives in the engine's link pages (Link.swift) from when it is made
/// until it is removed; a link holds one retain on its `dep`, given back (after the transaction)
/// when the link is removed.
extension Engine {
    /// Records that `sub`, the evaluation under way, read `dep`. A reader whose dependencies are
    /// stable reads them in the same order as last time: each read finds its link as the one after
    /// the last read (`depsTail`), and moves on to it, at the cost of a comparison.
    @inlinable
    func link(_ dep: Unmanaged<ReactiveNode>, _ sub: Unmanaged<ReactiveNode>) {
        let prevDep = depsTail
        if let prevDep, prevDep.dep === dep { return }
        let nextDep = prevDep != nil ? prevDep!.nextDep : sub.deps
        if let nextDep, nextDep.dep === dep {
            depsTail = nextDep
            return
        }
        insertLink(dep, sub, after: prevDep, before: nextDep)
    }

    /// A read out of last run's order: a node read again in this run (not right after itself) is
    /// linked once; anything else gets a new link. A node found or linked here is stamped with the
    /// run's number (`readEpoch`, `evaluationEpoch`), so that reading it again in this run (a
    /// computed that reads a source between each of its other reads) needs no search. A nested
    /// run gives the one it interrupted a new number; then the search is made again.
    @usableFromInline @inline(never)
    func insertLink(_ dep: Unmanaged<ReactiveNode>, _ sub: Unmanaged<ReactiveNode>,
                    after prevDep: LinkRef?, before nextDep: LinkRef?) {
        if evaluationEpoch == 0 {
            lastEpoch &+= 1
            evaluationEpoch = lastEpoch
        } else if dep.readEpoch == evaluationEpoch {
            return
        }
        dep.readEpoch = evaluationEpoch
        if let last = dep.subsTail, last.sub === sub, isTracked(last, by: sub) { return }
        depsTail = appendLink(dep, sub, after: prevDep, before: nextDep)
    }

    /// Links `sub` to `dep`: after `prevDep` in `sub`'s dependencies, last in `dep`'s subscribers.
    @discardableResult
    func appendLink(_ dep: Unmanaged<ReactiveNode>, _ sub: Unmanaged<ReactiveNode>,
                    after prevDep: LinkRef?, before nextDep: LinkRef?) -> LinkRef {
        let link = makeLink(dep, sub)
        link.nextDep = nextDep
        if let prevDep { prevDep.nextDep = link } else { sub.deps = link }
        link.prevSub = dep.subsTail
        link.nextSub = nil
        if let tail = dep.subsTail { tail.nextSub = link } else { dep.subs = link }
        dep.subsTail = link
        return link
    }

    /// Whether `link` is among the dependencies `sub` has read so far in this run.
    private func isTracked(_ link: LinkRef, by sub: Unmanaged<ReactiveNode>) -> Bool {
        guard let tail = depsTail else { return false }
        var next = sub.deps
        while let current = next {
            if current === link { return true }
            if current === tail { return false }
            next = current.nextDep
        }
        return false
    }

    /// Unlinks every dependency of `sub` after `tail`, the last one its run read (nil: it read
    /// none): those it did not read.
    @inline(__always)
    func purgeDependencies(of sub: ReactiveNode, after tail: LinkRef?) {
        if let tail {
            guard let stale = tail.nextDep else { return }
            tail.nextDep = nil
            purge(from: stale)
        } else if let stale = sub.deps {
            sub.deps = nil
            purge(from: stale)
        }
    }

    private func purge(from first: LinkRef) {
        var next: LinkRef? = first
        while let link = next {
            next = link.nextDep
            removeFromSubscribers(link)
            recycle(link)
        }
    }

    /// Removes every dependency of a node that is going away or being cancelled.
    func detachDependencies(of sub: ReactiveNode) {
        enter()
        purgeDependencies(of: sub, after: nil)
        exit()
    }

    private func removeFromSubscribers(_ link: LinkRef) {
        let dep = link.dep
        if let prev = link.prevSub { prev.nextSub = link.nextSub } else { dep.subs = link.nextSub }
        if let next = link.nextSub { next.prevSub = link.prevSub } else { dep.subsTail = link.prevSub }
        pendingReleases.append(dep)
    }

    private func makeLink(_ dep: Unmanaged<ReactiveNode>, _ sub: Unmanaged<ReactiveNode>) -> LinkRef {
        _ = dep.retain()
        let record = links.allocate()
        record.initialize(to: LinkRecord(dep: dep, sub: sub, nextDep: nil, prevSub: nil, nextSub: nil))
        return LinkRef(record: record)
    }

    private func recycle(_ link: LinkRef) {
        links.deallocate(link.record)
    }

    /// Keeps a node alive until the current transaction has settled (a watcher cancelled while it
    /// sits in the queue, which does not retain it).
    func keepUntilSettled(_ node: ReactiveNode) {
        pendingReleases.append(Unmanaged.passRetained(node))
    }
}
