/// The watch unit: every client's watches, the index of their patterns, the history `since`
/// replays, and delivery in every mode (overflow and its snapshot, `latest`, throttle, debounce,
/// progress). The store hands it each committed transaction's events (`committed`); it writes
/// lines to each client's `WatchSink`. It knows nothing of sessions or connections, and the store
/// knows nothing of clients: data flows one way, store -> watch unit -> sink.
///
/// Single-threaded, like the store that owns it.
final class WatchHub {
    let configuration: StoreConfiguration
    let clock: any StoreClock
    /// What snapshots read; set by the store once it exists.
    @exclusivity(unchecked) unowned(unsafe) var state: (any WatchedState)!
    /// The revision of the last committed transaction handed over.
    @exclusivity(unchecked) var rev: UInt64
    /// Cluster mode: a `since` past `rev` was taken on a host ahead of this one, whose revisions
    /// are this one's too: the watch sends nothing up to it. (On one host it replays nothing and
    /// goes on from `rev`, as documented.)
    @exclusivity(unchecked) var sinceAheadStartsThere = false
    /// Set while the store takes a whole state read again (`Store.applySnapshot`): what that
    /// transaction changes is no change any write made at its revision, and goes to no watch;
    /// each gets `compacted` and a snapshot after it.
    @exclusivity(unchecked) var muted = false
    /// This run's identity and the run it continues (set by the store at start): which `since` of
    /// another run may resume (`run` in `watch`). Ignored in cluster mode (`sinceAheadStartsThere`).
    @exclusivity(unchecked) var lineage: RunLineage
    /// (Read for every event delivered, by the one thread: no dynamic exclusivity checks.)
    @exclusivity(unchecked) var patterns = PatternIndex<WatchedPattern>()
    @exclusivity(unchecked) var history: History
    /// The events of the transaction being committed, as `EventRecord`s (also the body of a
    /// `publish` being sent).
    @exclusivity(unchecked) var open = ByteBuffer()
    /// The bodies of the open transaction's events delivered so far (`body(of:)`).
    @exclusivity(unchecked) var bodies = ByteBuffer()
    /// A body `since` replays, written from its record.
    @exclusivity(unchecked) var replayBody = ByteBuffer()
    @exclusivity(unchecked) var openRev: UInt64 = 0
    /// `,"rev":N` of the transaction being committed, encoded once for all its events.
    @exclusivity(unchecked) var openRevField = ByteBuffer()
    /// The watches a transaction of several events reaches (kept from one transaction to the next,
    /// empty in between).
    @exclusivity(unchecked) var collecting: [Watch] = []
    /// The pattern entries that match the one event of a transaction of several events that any
    /// entry matches (kept from one transaction to the next, empty in between).
    @exclusivity(unchecked) var matching: [WatchedPattern] = []
    /// Where a watch's events are sorted by key (`sortByKey`), kept from one transaction to the next.
    @exclusivity(unchecked) var sortKeys: [(prefix: UInt64, offset: Int)] = []
    @exclusivity(unchecked) var sortSpare: [(prefix: UInt64, offset: Int)] = []
    /// Watches with a due timer (throttle, debounce, progress, latest), by monotonic deadline.
    @exclusivity(unchecked) var timers = DeadlineHeap<Watch>()
    @exclusivity(unchecked) var stats = WatchStats()
    private var registered: [ObjectIdentifier: WatchClient] = [:]
    private var clientSerial: UInt64 = 0
    /// `publish` calls: each delivery is stamped so that a watch gets a message once.
    @exclusivity(unchecked) var publishes: UInt64 = 0
    /// Numbers the bodies of events delivered to several watches (`sharing`), one per byte of
    /// each transaction's records and one per publish, so that no two bodies get the same number.
    @exclusivity(unchecked) var bodySerial: UInt64 = 0

    init(configuration: StoreConfiguration, clock: any StoreClock, rev: UInt64, lineage: RunLineage? = nil) {
        self.configuration = configuration
        self.clock = clock
        self.rev = rev
        self.lineage = lineage ?? RunLineage(run: .random(in: 1...UInt64.max), previous: nil, loadedRev: rev)
        history = History(capacity: configuration.historyRevisions, maxBytes: configuration.historyBytes, start: rev)
    }

    // MARK: Clients and watches

    /// A new client whose lines go to `sink`.
    func register(_ sink: any WatchSink) -> WatchClient {
        stats.clients += 1
        clientSerial += 1
        let client = WatchClient(sink: sink, serial: clientSerial)
        registered[ObjectIdentifier(client)] = client
        return client
    }

    /// The client is gone: its watches stop.
    func remove(_ client: WatchClient) {
        for watch in client.watches.values { stop(watch) }
        client.watches.removeAll()
        registered[ObjectIdentifier(client)] = nil
        stats.clients -= 1
    }

    /// Every client, in the order they came.
    var clients: [WatchClient] { registered.values.sorted { $0.serial < $1.serial } }

    /// Starts a watch and sends what `options.start` asks for; the watch's id on its client.
    func watch(_ client: WatchClient, _ options: Watch.Options) throws(ObsError) -> Int {
        if client.watches.count >= configuration.maxWatchesPerConnection {
            throw ObsError(.limit, "this connection already has \(client.watches.count) watches (the limit)")
        }
        var seen = Set<String>()
        let entries = options.patterns.filter { seen.insert($0.text).inserted }.map { pattern in
            patterns.entry(for: pattern) { WatchedPattern(pattern: pattern) }
        }
        let watch = Watch(id: client.nextWatchID, client: client, entries: entries, options: options, now: clock.monotonic)
        client.nextWatchID += 1
        client.watches[watch.id] = watch
        for entry in entries { entry.watches.append(watch) }
        stats.watches += 1
        switch options.start {
        case .snapshot: sendSnapshot(watch)
        case .since(let since): sendReplay(watch, since: since, run: options.run)
        case .nothing: sendControl(watch, .synced, [("rev", .int(Int64(rev)))])
        }
        scheduleProgress(watch)
        return watch.id
    }

    /// Stops the watch `id` of `client`; once this returns, it sends nothing more.
    func unwatch(_ client: WatchClient, _ id: Int) throws(ObsError) {
        guard let watch = client.watches.removeValue(forKey: id) else { throw ObsError(.notFound, "no watch \(id) on this connection") }
        stop(watch)
    }

    private func stop(_ watch: Watch) {
        watch.active = false
        if watch.overflowFrom != nil {
            watch.overflowFrom = nil
            watch.client.overflowedWatches -= 1
        }
        watch.pending.removeAll()
        for entry in watch.entries {
            entry.watches.removeAll { $0 === watch }
            if entry.watches.isEmpty { patterns.remove(entry) }
        }
        stats.watches -= 1
    }

    // MARK: Sending

    /// Sends a change event of `watch`, unless its client's output is over the limit: then the
    /// watch overflows and sends no events until its resync (`drained`). Whether it was sent.
    /// While a snapshot the client has not read yet is queued, only the events queued after it
    /// count against the limit: a snapshot larger than the limit would otherwise overflow the
    /// watch again at its next event, and a client reading steadily but slower than it gets
    /// snapshot after snapshot would never reach live events. The output stays within the limit,
    /// the snapshot and the limit again.
    @discardableResult
    func sendEvent(_ line: EncodedLine, of watch: Watch, rev: UInt64) -> Bool {
        line.head.withUnsafeBytes { head in
            line.body.withUnsafeBytes { body in sendEvent(head: head, body: body, needsSync: line.needsSync, of: watch, rev: rev) }
        }
    }

    /// `sendEvent` of the line made of `head` and `body`, copied by the sink.
    /// `sharing` (nonzero) says that other watches get the same body in this delivery
    /// (`SessionOutput.write(head:body:needsSync:sharing:)`).
    @discardableResult
    func sendEvent(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool, of watch: Watch, rev: UInt64,
                   sharing: UInt64 = 0) -> Bool {
        guard watch.active, watch.overflowFrom == nil else { return false }
        let sent = watch.clientReference._withUnsafeGuaranteedRef { client in
            var queued = client.sink.unsentBytes
            if let since = client.queuedSinceSnapshot {
                if queued > since { queued = since } else { client.queuedSinceSnapshot = nil }
            }
            if queued > configuration.maxOutputBytes {
                if !client.overflowed { stats.overflows += 1 }
                client.overflowedWatches += 1
                watch.overflowFrom = rev
                return false
            }
            client.sink.send(head: head, body: body, needsSync: needsSync, sharing: sharing)
            if let since = client.queuedSinceSnapshot { client.queuedSinceSnapshot = since + head.count + body.count }
            return true
        }
        guard sent else { return false }
        stats.eventsSent += 1
        if watch.progress != nil {
            watch.lastSent = clock.monotonic
            scheduleProgress(watch)
        }
        return true
    }

    /// Sends a control event (initial, synced, overflow, compacted), never dropped.
    func sendControl(_ watch: Watch, _ event: EventName, _ fields: [(String, JSONValue)]) {
        watch.client.sink.send(EncodedLine(head: LineEncoding.head(event, watch: watch.id), body: LineEncoding.body(fields)))
        stats.eventsSent += 1
        watch.lastSent = clock.monotonic
    }
}
