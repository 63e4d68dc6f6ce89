/// What happens as time passes: TTL expiry, re-evaluation of computeds that read the clock, and the
/// watch timers (throttle, debounce, latest, progress).
extension Store {
    /// Runs everything due now.
    public func tick() {
        runRetries()
        expireDueKeys()
        refreshTimeComputeds()
        watches.tick()
        sweepPlaceholders()
    }

    /// Monotonic seconds of the next due timer, if any.
    public var nextDeadline: Double? {
        var next: Double?
        func consider(_ time: Double?) {
            guard let time else { return }
            next = next.map { min($0, time) } ?? time
        }
        if let first = expiries.first { consider(clock.monotonic + (first.deadline - clock.now)) }
        if !timeNodes.isEmpty { consider(nextTimeRefresh) }
        consider(watches.nextDeadline)
        consider(retries.first?.deadline)
        return next
    }

    /// Whether a TTL heap entry still stands for its key's deadline (not set again, not deleted).
    func isLiveExpiry(_ deadline: Double, _ node: KeyNode) -> Bool {
        node.exists && node.expiresAt == deadline && isCurrent(node)
    }

    /// Each expired key is deleted in its own transaction, with reason "ttl".
    private func expireDueKeys() {
        let now = clock.now
        while let first = expiries.first, first.deadline <= now {
            _ = expiries.pop()
            let node = first.element
            guard isLiveExpiry(first.deadline, node) else { continue }
            write(reason: "ttl") { [self] () throws(ObsError) in
                // Run again after a lost race: only if that same deadline still holds.
                guard isLiveExpiry(first.deadline, node) else { return }
                _ = try delete(node.name)
            }
        }
    }

    /// A write no client waits for (expiry, ephemeral removal, a binding's repair): committed at once on one host; in
    /// cluster mode proposed to the shared log, and tried again a second later while the log
    /// cannot take it (every host proposes its expiries: the first wins, the others find the
    /// key gone). Nothing else would ever make it again: whatever failure the log answered that
    /// may pass (`Store.mayPass`), it is tried again. After `internal` (an answer the host could
    /// not take, which may come again), each pause doubles, up to a minute: `failures` counts them,
    /// and an `unavailable` in between does not start them again.
    func write(reason: String?, failures: Int = 0, _ body: @escaping () throws(ObsError) -> Void) {
        guard sharedLog != nil else {
            _ = try? transact(reason: reason, body)
            return
        }
        submit(reason: reason, body) { [self] outcome in
            guard case .failure(let error) = outcome, Self.mayPass(error) else { return }
            let failures = error.code == .internal ? failures + 1 : failures
            let pause = configuration.timeRefreshInterval * Double(1 << min(max(failures - 1, 0), 6))
            retries.push(clock.monotonic + pause) { [self] in write(reason: reason, failures: failures, body) }
        }
    }

    /// Whether a failure of the shared log may pass, so that a write no client waits for is tried
    /// again: etcd out of reach or refusing for now (`unavailable`), or answering what the host
    /// could not take (`internal`: an answer it could not read, an error it does not know). A
    /// write refused as too large, or one whose own checks failed, would fail again.
    static func mayPass(_ error: ObsError) -> Bool {
        error.code == .unavailable || error.code == .internal
    }

    private func runRetries() {
        let now = clock.monotonic
        while let first = retries.first, first.deadline <= now {
            _ = retries.pop()
            first.element()
        }
    }

    private func refreshTimeComputeds() {
        guard !timeNodes.isEmpty, let due = nextTimeRefresh, due <= clock.monotonic else {
            if timeNodes.isEmpty { nextTimeRefresh = nil }
            return
        }
        nextTimeRefresh = clock.monotonic + configuration.timeRefreshInterval
        let refresh = { [self] () throws(ObsError) in
            for node in timeNodes.values { markChanged(node) }
        }
        guard sharedLog != nil else {
            _ = try? transact(refresh)
            return
        }
        // Cluster mode: the log never sees computed values, so a refresh that changes nothing
        // else commits here with the applied revision; one that makes a binding write goes to the
        // log like any write.
        guard let (_, proposal) = try? propose(reason: nil, refresh) else { return }
        if proposal.isEmpty {
            _ = try? transact(mode: .unlogged, refresh)
        } else {
            submit(refresh) { _ in }
        }
    }

    /// Removes the ephemeral keys `owner` still owns, as one transaction with reason "ephemeral".
    func removeEphemeralKeys(_ names: Set<String>, owner: UInt64) {
        guard names.contains(where: { view($0)?.owner == owner }) else { return }
        write(reason: "ephemeral") { [self] () throws(ObsError) in
            // Those it still owns when it runs (again, after a lost race, the keys may have a
            // new owner).
            for name in names where view(name)?.owner == owner { _ = try delete(name) }
        }
    }

    private func sweepPlaceholders() {
        guard placeholders.count > 64 else { return }
        let names = placeholders
        placeholders.removeAll()
        for name in names where isPlaceholder(name) {
            if !forgetIfUnread(name) { placeholders.append(name) }
        }
        matchSources.removeAll { !$0.node.hasSubscribers }
    }
}
