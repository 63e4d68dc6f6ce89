/// Delivering committed changes and channel messages to watches.
///
/// A transaction's events are written once, as `EventRecord`s, into `open` (`beginEvents`, then
/// `appendEvent` for each changed key, in the order the store met them), and `commitEvents` keeps
/// them in the history and hands each to every watch with a matching pattern: the same body to
/// every watch, after its own small head, the body written at the event's first delivery (an
/// event no watch gets has none). No event allocates: records and bodies go to buffers and a ring
/// that keep their memory.
extension WatchHub {
    /// Starts recording the events of the transaction that commits `rev`.
    func beginEvents(rev: UInt64) {
        open.removeAll(keepingCapacityUpTo: 1 << 20)
        bodies.removeAll(keepingCapacityUpTo: 1 << 20)
        openRev = rev
        openRevField.removeAll()
        openRevField.appendRevisionField(rev)
    }

    /// Records one event of the open transaction (see `ByteBuffer.appendEvent`).
    func appendEvent(_ kind: KeyEvent.Kind, key: UnsafeRawBufferPointer, created: Bool, old: EventValue? = nil,
                     new: EventValue? = nil, error: ObsError? = nil, reason: String? = nil) {
        open.appendEvent(kind, key: key, created: created, old: old, new: new, error: error, reason: reason)
    }

    /// Records the change of a key from one value to another, if `old` and `new` are both values
    /// (whether they were): the usual event, written without copying either out of its key.
    func appendChange(key: UnsafeRawBufferPointer, created: Bool, old: UnsafePointer<KeyContent>,
                      new: UnsafePointer<KeyContent>) -> Bool {
        guard old.pointee.isValue, new.pointee.isValue else { return false }
        let start = open.beginEventRecord(key: key)
        let oldLength = old.pointee.encodeValue(into: &open)
        let newLength = new.pointee.encodeValue(into: &open)
        open.endEventRecord(start: start, .change, created: created, keyLength: key.count, oldLength: UInt32(oldLength),
                            newLength: newLength, reasonLength: 0)
        return true
    }

    /// The body of `record`, an event of the transaction being committed: written on its first
    /// delivery, then the same bytes for every other watch that gets it. Valid until the next
    /// call (which may grow `bodies`).
    func body(of record: EventRecord) -> UnsafeRawBufferPointer {
        if let written = record.writtenBody { return UnsafeRawBufferPointer(start: bodies.base! + written.offset, count: written.length) }
        let start = bodies.count
        bodies.appendEventBody(record, revField: openRevField.bytes)
        record.noteBody(offset: start, length: bodies.count - start)
        return bodies.bytes(from: start)
    }

    /// The open transaction is committed: its events join the history and go to every watch with a
    /// matching pattern; each watch gets them contiguously, in key order, once each.
    func commitEvents() {
        rev = openRev
        let events = EventRecords(open.bytes)
        history.append(rev: rev, events: events.bytes)
        guard patterns.count > 0, !events.bytes.isEmpty, !muted else { return }
        // The number of the body at offset 0; the others are numbered by their offsets.
        let serial = bodySerial &+ 1
        bodySerial &+= UInt64(events.bytes.count) &+ 1
        let first = EventRecord(base: events.bytes.baseAddress!)
        if first.length == events.bytes.count {
            // One event, the usual transaction: each watch gets it as it is found.
            patterns.forEachEntry(matching: first.key) { entry in deliver(first, sharing: serial, toWatchesOf: entry) }
            return
        }
        deliverEach(events, serial: serial)
    }

    /// One event to each watch of `entry` that has not had it in this transaction (a watch whose
    /// patterns match the key twice gets it once).
    /// (The entry's list keeps its watches alive through the loop, even if a delivery stops one:
    /// the loop retains none, which for 1,000 watches cost more than their deliveries.)
    /// `sharing`: the record's body number, used when the entry has several watches.
    private func deliver(_ record: EventRecord, sharing: UInt64, toWatchesOf entry: WatchedPattern) {
        let sharing = entry.watches.count > 1 ? sharing : 0
        let body = body(of: record)
        entry.watches.forEachGuaranteed { watch in
            guard watch.active && watch.collectRev != rev && rev > watch.startsAfter else { return }
            watch.collectRev = rev
            deliver(record, body: body, to: watch, sharing: sharing)
            if watch.flushesWhenDrained { flushLatest(watch) }
        }
    }

    /// Several events. While every pattern entry met matches the same one event, as in most
    /// transactions of several events (a computed whose source nobody watches, a chain watched at
    /// its end), the entries are only noted, and that event goes as a single event does. From the
    /// first entry that matches a second event on, the events are collected per watch, so that
    /// each watch gets its events together, in key order, and an event that two of its patterns
    /// match once.
    private func deliverEach(_ events: EventRecords, serial: UInt64) {
        var entries = matching
        var touched = collecting
        matching = []
        collecting = []
        defer {
            entries.removeAll(keepingCapacity: entries.capacity <= 4096)
            matching = entries
            touched.removeAll(keepingCapacity: touched.capacity <= 4096)
            collecting = touched
        }
        let start = events.bytes.baseAddress!
        var only: Int?
        var perWatch = false
        func collect(_ offset: Int, _ entry: WatchedPattern) {
            entry.watches.forEachGuaranteed { watch in
                guard watch.active && rev > watch.startsAfter else { return }
                if watch.collectRev != rev {
                    watch.collectRev = rev
                    watch.collected.removeAll(keepingCapacity: true)
                    touched.append(watch)
                }
                if watch.collected.last != offset { watch.collected.append(offset) }
            }
        }
        patterns.forEachEntry(matchingEach: events, name: \.key) { record, entry in
            let offset = record.base - start
            if !perWatch {
                if only == nil || only == offset {
                    only = offset
                    entries.append(entry)
                    return
                }
                perWatch = true
                for earlier in entries { collect(only!, earlier) }
            }
            collect(offset, entry)
        }
        guard let only else { return }
        if !perWatch {
            let record = EventRecord(base: start + only)
            for entry in entries { deliver(record, sharing: serial &+ UInt64(only), toWatchesOf: entry) }
            return
        }
        let shared = touched.count > 1
        touched.forEachGuaranteed { watch in
            if watch.collected.count > 1 { sortByKey(&watch.collected, start) }
            for offset in watch.collected {
                let record = EventRecord(base: start + offset)
                deliver(record, body: body(of: record), to: watch, sharing: shared ? serial &+ UInt64(offset) : 0)
            }
            if watch.flushesWhenDrained { flushLatest(watch) }
        }
    }

    /// One event to one watch: sent (`body`: the record's, from `body(of:)`), or held by a watch
    /// that holds events.
    private func deliver(_ record: EventRecord, body: UnsafeRawBufferPointer, to watch: Watch, sharing: UInt64) {
        if watch.holdsEvents {
            hold(KeyEvent(record, rev: rev), in: watch, now: clock.monotonic)
            return
        }
        sendEvent(head: watch.heads.head(record.kind), body: body, needsSync: true, of: watch, rev: rev, sharing: sharing)
    }

    /// The events of `transaction`, given as values (tests, and callers without a store).
    func committed(_ events: [KeyEvent], rev: UInt64) {
        beginEvents(rev: rev)
        for event in events {
            var key = event.key
            key.withUTF8 { key in
                appendEvent(event.kind, key: UnsafeRawBufferPointer(key), created: event.created, old: event.old.map { .value($0) },
                            new: event.new.map { .value($0) }, error: event.error, reason: event.reason)
            }
        }
        commitEvents()
    }

    /// `publish`: the number of watches the message was queued for.
    func publish(_ channel: String, _ payload: JSONValue) -> Int {
        var channel = channel
        return channel.withUTF8 { channel in publish(UnsafeRawBufferPointer(channel), .value(payload)) }
    }

    /// `publish` of a channel given as its name's bytes, with a payload encoded or not.
    func publish(_ channel: UnsafeRawBufferPointer, _ payload: EventValue) -> Int {
        publishes &+= 1
        let stamp = publishes
        open.removeAll(keepingCapacityUpTo: 1 << 20)
        open.append(#","channel":"#)
        JSONValue.appendString(channel, to: &open)
        open.append(#","payload":"#)
        switch payload {
        case .encoded(let bytes): open.append(bytes)
        case .value(let value): value.encode(into: &open)
        }
        open.append("}\n")
        let body = open.bytes
        bodySerial &+= 1
        let serial = bodySerial
        var delivered = 0
        patterns.forEachEntry(matching: channel) { entry in
            let sharing = entry.watches.count > 1 ? serial : 0
            entry.watches.forEachGuaranteed { watch in
                guard watch.active && watch.channels && watch.publishStamp != stamp else { return }
                watch.publishStamp = stamp
                if sendEvent(head: watch.heads.publish, body: body, needsSync: false, of: watch, rev: rev, sharing: sharing) { delivered += 1 }
            }
        }
        return delivered
    }

    /// Sends one event now (a watch that holds events, when it lets one go).
    func send(_ event: KeyEvent, to watch: Watch) {
        sendEvent(EncodedLine(head: Array(watch.heads.head(event.kind)), body: LineEncoding.body(event), needsSync: true), of: watch,
                  rev: event.rev)
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
