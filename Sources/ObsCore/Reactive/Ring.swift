/// A first-in, first-out queue whose operations are all O(1) (`append` amortised): a ring of slots
/// that doubles when full, with elements addressed by their offset from the first. A taken
/// element's slot is emptied at once, so the ring holds nothing it no longer lists.
/// For the queues a slow reader drains (`changes`, obsctl's events for `watch -- COMMAND`), where
/// an array's `removeFirst` would cost the length of the queue.
package struct Ring<Element> {
    private var slots: ContiguousArray<Element?> = []
    private var head = 0
    package private(set) var count = 0

    package init() {}

    package var isEmpty: Bool { count == 0 }

    package mutating func append(_ element: Element) {
        if count == slots.count { grow() }
        slots[slot(count)] = element
        count += 1
    }

    /// Removes and returns the first element; nil when empty.
    package mutating func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = slots[head].take()
        head = slot(1)
        count -= 1
        return element
    }

    /// Removes and returns the last element; nil when empty.
    package mutating func popLast() -> Element? {
        guard count > 0 else { return nil }
        count -= 1
        return slots[slot(count)].take()
    }

    /// The element `offset` places after the first.
    package subscript(offset: Int) -> Element {
        get {
            precondition(offset >= 0 && offset < count, "ring offset out of range")
            return slots[slot(offset)]!
        }
        set {
            precondition(offset >= 0 && offset < count, "ring offset out of range")
            slots[slot(offset)] = newValue
        }
    }

    /// The slot of the element `offset` places after the first (the capacity is a power of two).
    private func slot(_ offset: Int) -> Int { (head + offset) & (slots.count - 1) }

    private mutating func grow() {
        var grown = ContiguousArray<Element?>(repeating: nil, count: max(8, slots.count * 2))
        for offset in 0..<count { grown[offset] = slots[slot(offset)].take() }
        slots = grown
        head = 0
    }
}

extension Ring: Sendable where Element: Sendable {}
