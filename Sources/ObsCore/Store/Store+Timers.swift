/// What happens as time passes: TTL expiry, re-evaluation of computeds that read the clock, and the
/// watch timers (throttle, debounce, latest, progress).
extension Store {
    /// Runs everything due now.
    public func tick() {
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
        return next
    }

    /// Whether a TTL heap entry still stands for its key's deadline (not set again, not deleted).
    func isLiveExpiry(_ deadline: Double, _ node: KeyNode) -> Bool {
        node.exists && node.expiresAt == deadline && nodes[node.name] === node
    }

    /// Each expired key is deleted in its own transaction, with reason "ttl".
    private func expireDueKeys() {
        let now = clock.now
        while let first = expiries.first, first.deadline <= now {
            _ = expiries.pop()
            let node = first.element
            guard isLiveExpiry(first.deadline, node) else { continue }
            _ = try? transact(reason: "ttl") { () throws(ObsError) in try delete(node.name) }
        }
    }

    private func refreshTimeComputeds() {
        guard !timeNodes.isEmpty, let due = nextTimeRefresh, due <= clock.monotonic else {
            if timeNodes.isEmpty { nextTimeRefresh = nil }
            return
        }
        nextTimeRefresh = clock.monotonic + configuration.timeRefreshInterval
        _ = try? transact { () throws(ObsError) in
            for node in timeNodes.values { markChanged(node) }
        }
    }

    /// Removes the ephemeral keys `owner` still owns, as one transaction with reason "ephemeral".
    func removeEphemeralKeys(_ names: Set<String>, owner: UInt64) {
        let owned = names.filter { existing($0)?.owner == owner }
        guard !owned.isEmpty else { return }
        _ = try? transact(reason: "ephemeral") { () throws(ObsError) in
            for name in owned { _ = try delete(name) }
        }
    }

    private func sweepPlaceholders() {
        guard placeholders.count > 64 else { return }
        let names = placeholders
        placeholders.removeAll()
        for name in names {
            guard let node = nodes[name], !node.exists else { continue }
            if node.hasSubscribers { placeholders.append(name) } else { nodes[name] = nil }
        }
        matchSources.removeAll { !$0.node.hasSubscribers }
    }
}
