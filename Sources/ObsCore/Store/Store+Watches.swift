/// Delivering committed changes and channel messages to watches, and the watch timers.
extension Store {
    /// Sends one transaction's events (sorted by key) to every watch with a matching pattern: each
    /// watch gets them contiguously, in key order, once each. Each event is encoded once.
    func deliver(_ events: [KeyEvent], rev: UInt64) {
        guard patterns.count > 0, !events.isEmpty else { return }
        var touched: [Watch] = []
        for index in events.indices {
            patterns.forEachEntry(matching: events[index].key) { entry in
                for watch in entry.watches where watch.active {
                    if watch.collectRev != rev {
                        watch.collectRev = rev
                        watch.collected.removeAll(keepingCapacity: true)
                        touched.append(watch)
                    }
                    if watch.collected.last != index { watch.collected.append(index) }
                }
            }
        }
        guard !touched.isEmpty else { return }
        var bodies = [[UInt8]?](repeating: nil, count: events.count)
        let now = clock.monotonic
        for watch in touched {
            if watch.holdsEvents {
                for index in watch.collected { hold(events[index], in: watch, now: now) }
                if watch.mode == .latest, watch.throttle == nil, watch.debounce == nil { flushLatest(watch) }
                continue
            }
            for index in watch.collected {
                let body: [UInt8]
                if let cached = bodies[index] {
                    body = cached
                } else {
                    body = LineEncoding.body(events[index])
                    bodies[index] = body
                }
                watch.session.sendEvent(EncodedLine(head: watch.head(events[index].kind), body: body, needsSync: true), watch: watch, rev: rev)
            }
        }
    }

    private func hold(_ event: KeyEvent, in watch: Watch, now: Double) {
        if let throttle = watch.throttle {
            if let end = watch.windows[event.key], end > now {
                merge(event, into: watch)
            } else {
                watch.windows[event.key] = now + throttle
                schedule(watch, at: now + throttle)
                send(event, to: watch)
            }
        } else if let debounce = watch.debounce {
            merge(event, into: watch)
            watch.windows[event.key] = now + debounce
            schedule(watch, at: now + debounce)
        } else {
            merge(event, into: watch)
        }
    }

    private func merge(_ event: KeyEvent, into watch: Watch) {
        let key = event.key
        if watch.pending.index(forKey: key) == nil {
            watch.pending[key] = event
        } else if let merged = Watch.merge(watch.pending[key], event) {
            watch.pending[key] = merged
        } else {
            watch.pending[key] = nil
        }
    }

    private func send(_ event: KeyEvent, to watch: Watch) {
        watch.session.sendEvent(EncodedLine(head: watch.head(event.kind), body: LineEncoding.body(event), needsSync: true), watch: watch, rev: event.rev)
    }

    /// Sends held events in revision then key order.
    private func sendHeld(_ events: [KeyEvent], to watch: Watch) {
        let ordered = events.sorted { $0.rev != $1.rev ? $0.rev < $1.rev : JSONValue.utf8Precedes($0.key, $1.key) }
        for event in ordered { send(event, to: watch) }
    }

    /// `latest`: held events go out when the connection has nothing unsent.
    func flushLatest(_ watch: Watch) {
        guard !watch.pending.isEmpty else { return }
        if watch.session.output.pendingBytes > 0 {
            schedule(watch, at: clock.monotonic + 0.05)
            return
        }
        let events = Array(watch.pending.values)
        watch.pending.removeAll()
        sendHeld(events, to: watch)
    }

    func schedule(_ watch: Watch, at requested: Double) {
        // Never at or before the tick running now: a timer that reschedules itself must wait.
        let deadline = max(requested, clock.monotonic + 0.000_001)
        if let scheduled = watch.scheduledAt, scheduled <= deadline { return }
        watch.scheduledAt = deadline
        watchTimers.push(deadline, watch)
    }

    func scheduleProgress(_ watch: Watch) {
        if let progress = watch.progress { schedule(watch, at: watch.lastSent + progress) }
    }

    func runWatchTimers() {
        let now = clock.monotonic
        while let first = watchTimers.first, first.deadline <= now {
            _ = watchTimers.pop()
            let watch = first.element
            guard watch.active, watch.scheduledAt == first.deadline else { continue }
            watch.scheduledAt = nil
            fire(watch, now: now)
        }
    }

    private func fire(_ watch: Watch, now: Double) {
        if watch.throttle != nil || watch.debounce != nil {
            var due: [KeyEvent] = []
            var next: Double?
            for (key, deadline) in watch.windows {
                if deadline <= now {
                    if let event = watch.pending.removeValue(forKey: key) {
                        due.append(event)
                        if let throttle = watch.throttle {
                            watch.windows[key] = now + throttle
                            next = min(next ?? .infinity, now + throttle)
                            continue
                        }
                    }
                    watch.windows[key] = nil
                } else {
                    next = min(next ?? .infinity, deadline)
                }
            }
            sendHeld(due, to: watch)
            if let next { schedule(watch, at: next) }
        } else if watch.mode == .latest {
            flushLatest(watch)
        }
        if let progress = watch.progress {
            if watch.lastSent + progress <= now, !watch.session.overflowed {
                watch.session.sendEvent(
                    EncodedLine(head: LineEncoding.head("progress", watch: watch.id), body: LineEncoding.body([("rev", .int(Int64(rev)))])),
                    watch: watch, rev: rev)
            }
            scheduleProgress(watch)
        }
    }

    /// `publish`: the number of watches the message was queued for.
    func publish(_ channel: String, _ payload: JSONValue) throws(ObsError) -> Int {
        try KeyName.validate(channel, "channel")
        try checkValueSize(payload)
        stats.publishes &+= 1
        let stamp = stats.publishes
        let body = LineEncoding.body([("channel", .string(channel)), ("payload", payload)])
        var delivered = 0
        patterns.forEachEntry(matching: channel) { entry in
            for watch in entry.watches where watch.active && watch.channels && watch.publishStamp != stamp {
                watch.publishStamp = stamp
                let line = EncodedLine(head: LineEncoding.head("publish", watch: watch.id), body: body)
                if watch.session.sendEvent(line, watch: watch, rev: rev) { delivered += 1 }
            }
        }
        return delivered
    }

    /// The snapshot of a watch: an `initial` event per matching key, sorted, then `synced`.
    func sendSnapshot(_ watch: Watch) {
        var names = Set<String>()
        for entry in watch.entries { names.formUnion(keyNames(matching: entry.pattern)) }
        for name in names.sorted(by: JSONValue.utf8Precedes) {
            guard let node = existing(name) else { continue }
            node.settle()
            var fields: [(String, JSONValue)] = [("key", .string(name)), ("kind", .string(node.kind!.rawValue))]
            switch node.content {
            case .value(let value): fields.append(("value", value))
            case .error(let error): fields.append(("error", .object(["code": .string(error.code.rawValue), "message": .string(error.message)])))
            case .missing: continue
            }
            fields.append(("rev", .int(Int64(node.rev))))
            watch.session.sendControl(watch, "initial", fields)
        }
        watch.session.sendControl(watch, "synced", [("rev", .int(Int64(rev)))])
    }

    /// Replays history after `since` to a new watch, or (when too old) `compacted` and a snapshot.
    func sendReplay(_ watch: Watch, since: UInt64) {
        guard let transactions = history.transactions(after: since) else {
            watch.session.sendControl(watch, "compacted", [("compact_rev", .int(Int64(history.start)))])
            sendSnapshot(watch)
            return
        }
        for transaction in transactions {
            for event in transaction.events where watch.matches(event.key) {
                watch.session.sendEvent(EncodedLine(head: watch.head(event.kind), body: LineEncoding.body(event), needsSync: true), watch: watch, rev: event.rev)
            }
        }
        watch.session.sendControl(watch, "synced", [("rev", .int(Int64(rev)))])
    }

    /// The daemon drained `session`'s output: held `latest` events go out, and a session that
    /// overflowed gets, per watch, `overflow` with the missed revisions and a fresh snapshot.
    public func sessionDrained(_ session: Session) {
        if session.overflowed {
            guard session.output.pendingBytes <= configuration.maxOutputBytes else { return }
            session.overflowed = false
            for watch in session.orderedWatches {
                watch.pending.removeAll()
                watch.windows.removeAll()
                session.sendControl(watch, "overflow", [("from_rev", .int(Int64(session.overflowFrom))), ("to_rev", .int(Int64(rev)))])
                sendSnapshot(watch)
            }
            return
        }
        for watch in session.orderedWatches where watch.mode == .latest && watch.throttle == nil && watch.debounce == nil {
            flushLatest(watch)
        }
    }
}
