/// One watch of one session: its patterns, delivery mode and the per-key state that `latest`,
/// `throttle_ms` and `debounce_ms` keep (bounded by the number of matching keys).
final class Watch {
    enum Mode: String {
        case all
        case latest
    }

    let id: Int
    /// The session outlives its watches: `Session.close` (also run by its `deinit`) removes them
    /// from the store. So the reference costs no reference counting on the delivery path.
    unowned(unsafe) let session: Session
    let entries: [PatternEntry]
    let mode: Mode
    let throttle: Double?
    let debounce: Double?
    let progress: Double?
    let channels: Bool
    @exclusivity(unchecked) var active = true

    /// Events held back per key (latest, throttle, debounce), merged.
    var pending: [String: KeyEvent] = [:]
    /// throttle: end of each key's interval; debounce: each key's quiet deadline.
    var windows: [String: Double] = [:]
    /// Monotonic time of the last line sent (for progress).
    var lastSent: Double
    /// The deadline this watch is queued under in the store's timer heap.
    var scheduledAt: Double?

    /// The transaction being delivered and the indexes of its events this watch receives.
    // (Delivery state, touched for every event: the store is used by one thread at a time, so
    // no dynamic exclusivity checks.)
    @exclusivity(unchecked) var collectRev: UInt64 = 0
    @exclusivity(unchecked) var collected: [Int] = []
    @exclusivity(unchecked) var publishStamp: UInt64 = 0
    let heads: [[UInt8]]

    init(id: Int, session: Session, entries: [PatternEntry], mode: Mode, throttle: Double?, debounce: Double?,
         progress: Double?, channels: Bool, now: Double)
    {
        self.id = id
        self.session = session
        self.entries = entries
        self.mode = mode
        self.throttle = throttle
        self.debounce = debounce
        self.progress = progress
        self.channels = channels
        lastSent = now
        heads = ["change", "delete", "error"].map { LineEncoding.head($0, watch: id) }
    }

    func matches(_ key: String) -> Bool { entries.contains { $0.pattern.matches(key) } }

    func head(_ kind: KeyEvent.Kind) -> [UInt8] {
        switch kind {
        case .change: heads[0]
        case .delete: heads[1]
        case .error: heads[2]
        }
    }

    /// Whether events wait in `pending` instead of going out at once.
    var holdsEvents: Bool { mode == .latest || throttle != nil || debounce != nil }

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
