/// The changes of the last revisions, oldest first, for `since`.
struct History {
    private(set) var entries: [(rev: UInt64, events: [KeyEvent])] = []
    private var head = 0
    /// Every revision after this one is in the history.
    private(set) var start: UInt64
    let capacity: Int

    init(capacity: Int, start: UInt64) {
        self.capacity = capacity
        self.start = start
    }

    var count: Int { entries.count - head }

    mutating func append(rev: UInt64, events: [KeyEvent]) {
        entries.append((rev, events))
        while count > capacity {
            start = entries[head].rev
            entries[head].events = []
            head += 1
        }
        if head > 1024 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// The transactions after `rev`, or nil when some of them are no longer kept.
    func transactions(after rev: UInt64) -> ArraySlice<(rev: UInt64, events: [KeyEvent])>? {
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
