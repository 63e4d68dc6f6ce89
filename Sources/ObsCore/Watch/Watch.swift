/// One watch of one client: its patterns, delivery mode and the per-key state that `latest`,
/// `throttle_ms` and `debounce_ms` keep (bounded by the number of matching keys).
final class Watch {
    enum Mode: String {
        case all
        case latest
    }

    /// What a `watch` request asks for.
    struct Options {
        var patterns: [KeyPattern]
        var mode = Mode.all
        var throttle: Double?
        var debounce: Double?
        var progress: Double?
        var channels = true
        var start = Start.snapshot
        /// With `since`: the run the client saw that revision in (RunLineage).
        var run = RunClaim.unnamed

        /// What the watch sends before live events.
        enum Start {
            /// The current value of every matching key, then `synced`.
            case snapshot
            /// Every change after a revision, from history, then `synced` (or, when that is no
            /// longer kept, `compacted` and a snapshot).
            case since(UInt64)
            /// Only `synced`.
            case nothing
        }

        enum RunClaim {
            /// No run named: `since` is taken on trust.
            case unnamed
            /// The run named, nil when the text names none this store could have given out.
            case named(UInt64?)
        }
    }

    let id: Int
    /// The client outlives its watches: `WatchHub.remove` takes them out of the index when the
    /// client goes. So the reference costs no reference counting on the delivery path, which
    /// reaches the client through `clientReference` (read unowned, the client's sink can be
    /// called with no retain of it either).
    let clientReference: Unmanaged<WatchClient>
    var client: WatchClient { clientReference.takeUnretainedValue() }
    let entries: [WatchedPattern]
    let mode: Mode
    let throttle: Double?
    let debounce: Double?
    let progress: Double?
    let channels: Bool
    /// Whether events wait in `pending` instead of going out at once.
    let holdsEvents: Bool
    /// Whether held events go out as soon as the client's output is empty (`latest` alone).
    let flushesWhenDrained: Bool
    @exclusivity(unchecked) var active = true
    /// The revision of the first event dropped at its client's output limit: from then on the
    /// watch sends no events until its `overflow` and fresh snapshot (`WatchHub.drained`).
    @exclusivity(unchecked) var overflowFrom: UInt64?

    /// Events held back per key (latest, throttle, debounce), merged.
    var pending: [String: KeyEvent] = [:]
    /// throttle: end of each key's interval; debounce: each key's quiet deadline.
    var windows: [String: Double] = [:]
    /// Monotonic time of the last line sent (for progress).
    var lastSent: Double
    /// The deadline this watch is queued under in the hub's timer heap.
    var scheduledAt: Double?

    /// The transaction being delivered and the indexes of its events this watch receives.
    // (Delivery state, touched for every event: the hub is used by one thread at a time, so no
    // dynamic exclusivity checks.)
    @exclusivity(unchecked) var collectRev: UInt64 = 0
    /// Events of revisions up to this one are not sent (cluster mode: a `since` taken on a host
    /// ahead of this one, WatchHub.sendReplay).
    @exclusivity(unchecked) var startsAfter: UInt64 = 0
    /// Where in the transaction's records each of its events is.
    @exclusivity(unchecked) var collected: [Int] = []
    @exclusivity(unchecked) var publishStamp: UInt64 = 0
    let heads: WatchHeads

    init(id: Int, client: WatchClient, entries: [WatchedPattern], options: Options, now: Double) {
        self.id = id
        clientReference = .passUnretained(client)
        self.entries = entries
        mode = options.mode
        throttle = options.throttle
        debounce = options.debounce
        progress = options.progress
        channels = options.channels
        // Stored, not computed: both are read for every event delivered.
        holdsEvents = options.mode == .latest || options.throttle != nil || options.debounce != nil
        flushesWhenDrained = options.mode == .latest && options.throttle == nil && options.debounce == nil
        lastSent = now
        heads = WatchHeads(watch: id)
    }

    deinit { heads.deallocate() }

    func matches(_ key: String) -> Bool { entries.contains { $0.pattern.matches(key) } }
    func matches(_ key: UnsafeRawBufferPointer) -> Bool { entries.contains { $0.pattern.matches(key) } }

    var patterns: [KeyPattern] { entries.map(\.pattern) }

    /// Combines a held event with a newer one for the same key: the result goes from the state the
    /// client last saw to the newest; nil when they are the same (nothing to send).
    static func merge(_ first: KeyEvent?, _ next: KeyEvent) -> KeyEvent? {
        guard let first else { return next }
        if first.kind == .error || next.kind == .error { return next }
        let existedBefore = first.kind == .delete || !first.created
        let before = first.old
        var merged = next
        switch next.kind {
        case .change:
            merged.old = existedBefore ? before : nil
            merged.created = !existedBefore
            if existedBefore, before == next.new { return nil }
        case .delete:
            if !existedBefore { return nil }
            merged.old = before
        case .error:
            break
        }
        return merged
    }
}

/// The per-watch part of a watch's event lines (`{"event":"change","watch":N`, and the same for
/// `delete`, `error` and `publish`), encoded once when the watch starts, in memory of its own that
/// its watch frees: a plain value, so the delivery of an event reads them with no reference
/// counting.
struct WatchHeads {
    private let bytes: UnsafeMutableRawBufferPointer
    private let ends: (Int, Int, Int, Int)

    init(watch: Int) {
        var all: [UInt8] = []
        var ends: [Int] = []
        for event in [EventName.change, .delete, .error, .publish] {
            all += LineEncoding.head(event, watch: watch)
            ends.append(all.count)
        }
        bytes = .allocate(byteCount: all.count, alignment: 8)
        bytes.copyBytes(from: all)
        self.ends = (ends[0], ends[1], ends[2], ends[3])
    }

    /// Frees the heads' memory (their watch's `deinit`).
    func deallocate() { bytes.deallocate() }

    func head(_ kind: KeyEvent.Kind) -> UnsafeRawBufferPointer {
        switch kind {
        case .change: UnsafeRawBufferPointer(rebasing: bytes[0..<ends.0])
        case .delete: UnsafeRawBufferPointer(rebasing: bytes[ends.0..<ends.1])
        case .error: UnsafeRawBufferPointer(rebasing: bytes[ends.1..<ends.2])
        }
    }

    var publish: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: bytes[ends.2..<ends.3]) }
}

/// Every watch listing one pattern.
final class WatchedPattern: PatternKeyed {
    let pattern: KeyPattern
    var watches: [Watch] = []

    init(pattern: KeyPattern) { self.pattern = pattern }
}
