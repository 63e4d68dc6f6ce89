/// A growable stack of trivial elements (unmanaged references) for the engine's queues and walk
/// stacks. `ContiguousArray` would do, but its shared generic entry points (removeAll, ...) look up
/// type metadata at run time on every call; this one is inlined whole, and never frees its memory:
/// the engine keeps its stacks for the life of the process.
struct PointerStack<Element> {
    private var base: UnsafeMutablePointer<Element>
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int = 64) {
        base = .allocate(capacity: capacity)
        self.capacity = capacity
    }

    @inline(__always) var isEmpty: Bool { count == 0 }

    @inline(__always)
    subscript(index: Int) -> Element { base[index] }

    @inline(__always)
    mutating func append(_ element: Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    @inline(__always)
    mutating func removeLast() -> Element {
        count -= 1
        return (base + count).move()
    }

    @inline(__always)
    mutating func popLast() -> Element? {
        count == 0 ? nil : removeLast()
    }

    /// Removes the element at `index`, putting the last one in its place.
    @inline(__always)
    mutating func swapRemove(at index: Int) {
        count -= 1
        base[index] = base[count]
    }

    /// Forgets the elements from `count` on.
    @inline(__always)
    mutating func truncate(to count: Int) {
        self.count = count
    }

    /// Forgets every element (they are trivial: nothing to release).
    @inline(__always)
    mutating func removeAll() {
        count = 0
    }

    @inline(never)
    private mutating func grow() {
        let grown = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
        grown.moveInitialize(from: base, count: count)
        base.deallocate()
        base = grown
        capacity *= 2
    }
}
