/// Dependency tracking: linking a read into the reader's dependency list, dropping dependencies no
/// longer read, the link pool, and deferred releases (Propagation.swift, step 6).
///
/// Ownership: a link is retained once when made and lives in the pool after use; a link holds one
/// retain on its `dep`, given back (after the transaction) when the link is removed.
extension Engine {
    /// Records that `sub` (running now) read `dep`.
    @inline(__always)
    func link(_ dep: Unmanaged<ReactiveNode>, _ sub: Unmanaged<ReactiveNode>) {
        let prevDep = sub.depsTail
        if let prevDep, prevDep.dep === dep { return }
        let nextDep = prevDep != nil ? prevDep!.nextDep : sub.deps
        if let nextDep, nextDep.dep === dep {
            sub.depsTail = nextDep
            return
        }
        insertLink(dep, sub, after: prevDep, before: nextDep)
    }

    @inline(never)
    private func insertLink(_ dep: Unmanaged<ReactiveNode>, _ sub: Unmanaged<ReactiveNode>,
                            after prevDep: Unmanaged<Link>?, before nextDep: Unmanaged<Link>?) {
        // A node read twice in one run, not consecutively, is linked once.
        if let last = dep.subsTail, last.sub === sub, isTracked(last, by: sub) { return }
        let link = makeLink(dep, sub)
        link.prevDep = prevDep
        link.nextDep = nextDep
        if let nextDep { nextDep.prevDep = link }
        if let prevDep { prevDep.nextDep = link } else { sub.deps = link }
        sub.depsTail = link
        link.prevSub = dep.subsTail
        link.nextSub = nil
        if let tail = dep.subsTail { tail.nextSub = link } else { dep.subs = link }
        dep.subsTail = link
    }

    /// Whether `link` is among the dependencies `sub` has read so far in this run.
    private func isTracked(_ link: Unmanaged<Link>, by sub: Unmanaged<ReactiveNode>) -> Bool {
        guard let tail = sub.depsTail else { return false }
        var next = sub.deps
        while let current = next {
            if current === link { return true }
            if current === tail { return false }
            next = current.nextDep
        }
        return false
    }

    /// Unlinks every dependency of `sub` after its `depsTail`: those its last run did not read.
    @inline(__always)
    func purgeStaleDependencies(of sub: ReactiveNode) {
        if let tail = sub.depsTail {
            guard let stale = tail.nextDep else { return }
            tail.nextDep = nil
            purge(from: stale)
        } else if let stale = sub.deps {
            sub.deps = nil
            purge(from: stale)
        }
    }

    private func purge(from first: Unmanaged<Link>) {
        var next: Unmanaged<Link>? = first
        while let link = next {
            next = link.nextDep
            removeFromSubscribers(link)
            recycle(link)
        }
    }

    /// Removes every dependency of a node that is going away or being cancelled.
    func detachDependencies(of sub: ReactiveNode) {
        enter()
        sub.depsTail = nil
        purgeStaleDependencies(of: sub)
        exit()
    }

    private func removeFromSubscribers(_ link: Unmanaged<Link>) {
        let dep = link.dep
        if let prev = link.prevSub { prev.nextSub = link.nextSub } else { dep.subs = link.nextSub }
        if let next = link.nextSub { next.prevSub = link.prevSub } else { dep.subsTail = link.prevSub }
        pendingReleases.append(dep)
    }

    private func makeLink(_ dep: Unmanaged<ReactiveNode>, _ sub: Unmanaged<ReactiveNode>) -> Unmanaged<Link> {
        _ = dep.retain()
        let subIsWatcher = sub.flags.contains(.watcher)
        if let link = freeLinks {
            freeLinks = link.nextDep
            freeLinkCount -= 1
            link._withUnsafeGuaranteedRef {
                $0.dep = dep
                $0.sub = sub
                $0.subIsWatcher = subIsWatcher
            }
            return link
        }
        return Unmanaged.passRetained(Link(dep: dep, sub: sub, subIsWatcher: subIsWatcher))
    }

    /// The pool keeps links for reuse up to a bound; past it they are freed. Small: it only has to
    /// absorb the churn of dynamic dependencies; recycling a whole torn-down graph's links would
    /// scatter the next graph's edges over old memory (measured: cellx5000 15% slower at 1 << 16).
    private static let maxFreeLinks = 1 << 10

    private func recycle(_ link: Unmanaged<Link>) {
        link.prevDep = nil
        link.prevSub = nil
        link.nextSub = nil
        if freeLinkCount < Engine.maxFreeLinks {
            link.nextDep = freeLinks
            freeLinks = link
            freeLinkCount += 1
        } else {
            link.nextDep = nil
            link.release()
        }
    }

    /// Keeps a node alive until the current transaction has settled (a watcher cancelled while it
    /// sits in the queue, which does not retain it).
    func keepUntilSettled(_ node: ReactiveNode) {
        pendingReleases.append(Unmanaged.passRetained(node))
    }
}
