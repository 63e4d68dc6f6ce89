/// The changes of the last revisions, oldest first, for `since`. Bounded twice: at most `capacity`
/// revisions, and at most `maxBytes` of events (their keys and values, as `KeyEvent.estimatedBytes`
/// counts them), so that a client overwriting a key with 1 MiB values cannot make obsd keep
/// gigabytes of old values. The oldest revisions go first; a `since` older than what is kept gets
/// `compacted` and a snapshot.
struct History {
    private(set) var entries: [(rev: UInt64, events: [KeyEvent], bytes: Int)] = []
    private var head = 0
    /// Every revision after this one is in the history.
    private(set) var start: UInt64
    let capacity: Int
    let maxBytes: Int
    /// The events kept, in estimated bytes.
    private(set) var bytes = 0

    init(capacity: Int, maxBytes: Int = .max, start: UInt64) {
        self.capacity = capacity
        self.maxBytes = maxBytes
        self.start = start
    }

    var count: Int { entries.count - head }

    mutating func append(rev: UInt64, events: [KeyEvent]) {
        var size = 0
        for event in events { size += event.estimatedBytes }
        entries.append((rev, events, size))
        bytes += size
        while count > capacity || (bytes > maxBytes && count > 0) {
            start = entries[head].rev
            bytes -= entries[head].bytes
            entries[head].events = []
            head += 1
        }
        if head > 1024 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// The transactions after `rev`, or nil when some of them are no longer kept.
    func transactions(after rev: UInt64) -> ArraySlice<(rev: UInt64, events: [KeyEvent], bytes: Int)>? {
        guard rev >= start else { return nil }
        var low = head
        var high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].rev <= rev { low = mid + 1 } else { high = mid }
        }
        return entries[low...]
    }
}
