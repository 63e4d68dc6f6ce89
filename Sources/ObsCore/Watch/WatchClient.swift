/// One client's watches as the watch unit keeps them: where its lines go, its watches by id, and
/// whether its events are being dropped because its output is full.
final class WatchClient {
    let sink: any WatchSink
    // Read for every event and every drained output, by the daemon's one thread: no dynamic
    // exclusivity checks.
    @exclusivity(unchecked) var watches: [Int: Watch] = [:]
    @exclusivity(unchecked) var nextWatchID = 1
    /// Its watches whose events stopped at the output limit (`Watch.overflowFrom`), waiting for
    /// their `overflow` and fresh snapshot.
    @exclusivity(unchecked) var overflowedWatches = 0
    /// Whether some of its watches wait for their resync.
    var overflowed: Bool { overflowedWatches > 0 }
    /// Bytes of events queued since its last snapshot was queued, while that snapshot (or what
    /// was queued before it) is still unsent; nil once the client has read past it. Only these
    /// count against the output limit meanwhile (`WatchHub.sendEvent`).
    @exclusivity(unchecked) var queuedSinceSnapshot: Int?

    /// Orders the clients (`WatchHub.clients`).
    let serial: UInt64

    init(sink: any WatchSink, serial: UInt64) {
        self.sink = sink
        self.serial = serial
    }

    /// Its watches in the order they were made.
    var orderedWatches: [Watch] { watches.keys.sorted().map { watches[$0]! } }
}

/// The counters of the watch unit that `stats` reports.
struct WatchStats {
    var clients = 0
    var watches = 0
    var eventsSent = 0
    var overflows = 0
}
