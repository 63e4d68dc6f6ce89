/// A binary min-heap of deadlines.
///
/// Entries are not removed when what they stand for changes (a key set again with another TTL,
/// deleted; a watch rescheduled or removed): the owner skips stale ones as they come up. So that a
/// client repeating such changes cannot grow the heap without bound (a key set with a one-year TTL
/// a million times is a million entries for a year), `push` with `isLive` drops every stale entry
/// whenever the heap has doubled since it last did: the heap stays within twice its live entries,
/// for an amortized constant cost per push.
struct DeadlineHeap<Element> {
    private var items: [(deadline: Double, element: Element)] = []
    /// The size at which the next push looks for stale entries.
    private var compactAt = 1024

    var isEmpty: Bool { items.isEmpty }
    var count: Int { items.count }
    var first: (deadline: Double, element: Element)? { items.first }

    /// Adds an entry, first dropping the stale ones (`isLive` false) if the heap has grown enough.
    mutating func push(_ deadline: Double, _ element: Element, isLive: (Double, Element) -> Bool) {
        if items.count >= compactAt {
            items.removeAll { !isLive($0.deadline, $0.element) }
            for index in stride(from: items.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
            compactAt = max(1024, items.count * 2)
        }
        push(deadline, element)
    }

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
        siftDown(0)
        return top
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
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
    }
}
