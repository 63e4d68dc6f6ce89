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
