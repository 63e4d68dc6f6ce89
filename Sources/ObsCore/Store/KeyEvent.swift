/// One key's change in one committed transaction: what watches and history carry.
struct KeyEvent {
    enum Kind {
        case change
        case delete
        case error
    }

    var kind: Kind
    var key: String
    /// change: the value before (nil when created or recovering with no good value); delete: the
    /// value removed.
    var old: JSONValue?
    /// change: the new value.
    var new: JSONValue?
    var error: ObsError?
    var rev: UInt64
    var created: Bool
    /// delete: "ttl" or "ephemeral" when not a client's delete.
    var reason: String?
}

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

/// A binary min-heap of deadlines.
struct DeadlineHeap<Element> {
    private var items: [(deadline: Double, element: Element)] = []

    var isEmpty: Bool { items.isEmpty }
    var first: (deadline: Double, element: Element)? { items.first }

    mutating func push(_ deadline: Double, _ element: Element) {
        items.append((deadline, element))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].deadline < items[parent].deadline else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (deadline: Double, element: Element)? {
        guard !items.isEmpty else { return nil }
        items.swapAt(0, items.count - 1)
        let top = items.removeLast()
        var parent = 0
        while true {
            let left = parent * 2 + 1
            let right = left + 1
            var smallest = parent
            if left < items.count, items[left].deadline < items[smallest].deadline { smallest = left }
            if right < items.count, items[right].deadline < items[smallest].deadline { smallest = right }
            if smallest == parent { break }
            items.swapAt(parent, smallest)
            parent = smallest
        }
        return top
    }
}
