/// Delivering committed changes and channel messages to watches.
extension WatchHub {
    /// One committed transaction: its events (sorted by key) join the history and go to every
    /// watch with a matching pattern; each watch gets them contiguously, in key order, once each.
    /// Each event is encoded once, whatever the number of watches.
    func committed(_ events: [KeyEvent], rev: UInt64) {
        self.rev = rev
        history.append(rev: rev, events: events)
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
                if watch.flushesWhenDrained { flushLatest(watch) }
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
                watch.head(events[index].kind).withUnsafeBytes { head in
                    body.withUnsafeBytes { body in sendEvent(head: head, body: body, needsSync: true, of: watch, rev: rev) }
                }
            }
        }
    }

    /// `publish`: the number of watches the message was queued for.
    func publish(_ channel: String, _ payload: JSONValue) -> Int {
        publishes &+= 1
        let stamp = publishes
        let body = LineEncoding.body([("channel", .string(channel)), ("payload", payload)])
        var delivered = 0
        patterns.forEachEntry(matching: channel) { entry in
            for watch in entry.watches where watch.active && watch.channels && watch.publishStamp != stamp {
                watch.publishStamp = stamp
                let line = EncodedLine(head: LineEncoding.head(.publish, watch: watch.id), body: body)
                if sendEvent(line, of: watch, rev: rev) { delivered += 1 }
            }
        }
        return delivered
    }

    /// Sends one event now (a watch that holds events, when it lets one go).
    func send(_ event: KeyEvent, to watch: Watch) {
        sendEvent(EncodedLine(head: watch.head(event.kind), body: LineEncoding.body(event), needsSync: true), of: watch, rev: event.rev)
    }

    // MARK: Held events (latest, throttle, debounce)

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

    /// Sends held events in revision then key order.
    func sendHeld(_ events: [KeyEvent], to watch: Watch) {
        let ordered = events.sorted { $0.rev != $1.rev ? $0.rev < $1.rev : JSONValue.utf8Precedes($0.key, $1.key) }
        for event in ordered { send(event, to: watch) }
    }

    /// `latest`: held events go out when the client's output has nothing unsent.
    func flushLatest(_ watch: Watch) {
        guard !watch.pending.isEmpty else { return }
        if watch.client.sink.unsentBytes > 0 {
            schedule(watch, at: clock.monotonic + 0.05)
            return
        }
        let events = Array(watch.pending.values)
        watch.pending.removeAll()
        sendHeld(events, to: watch)
    }
}
