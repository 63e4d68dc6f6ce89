/// A growable stack whose elements are moved in and out, never copied.
///
/// The parser keeps every unfinished container's children on such stacks; when a container closes,
/// its children move into their final, exactly sized storage without retain/release traffic.
/// Storage is allocated on the first push, so parsing a scalar allocates nothing.
struct MoveStack<Element>: ~Copyable {
    private var storage: UnsafeMutablePointer<Element>?
    private var capacity = 0
    private(set) var count = 0

    init() {}

    deinit {
        if let storage {
            storage.deinitialize(count: count)
            storage.deallocate()
        }
    }

    /// The top element, if any.
    var top: Element? { count == 0 ? nil : storage.unsafelyUnwrapped[count - 1] }

    mutating func push(_ element: consuming Element) {
        if count == capacity { grow() }
        (storage.unsafelyUnwrapped + count).initialize(to: element)
        count += 1
    }

    /// Removes the top element, which must exist.
    mutating func removeTop() {
        count -= 1
        (storage.unsafelyUnwrapped + count).deinitialize(count: 1)
    }

    /// Moves the elements from `start` to the top into an array, bottom first.
    mutating func popArray(from start: Int) -> [Element] {
        let n = count - start
        if n == 0 { return [] }
        let source = storage.unsafelyUnwrapped + start
        count = start
        return Array(unsafeUninitializedCapacity: n) { buffer, initialized in
            buffer.baseAddress.unsafelyUnwrapped.moveInitialize(from: source, count: n)
            initialized = n
        }
    }

    /// Removes the elements from `start` to the top and hands them to the caller, who must move
    /// out or deinitialize every one of them before the next push.
    mutating func popUnsafely(from start: Int) -> UnsafeMutablePointer<Element>? {
        count = start
        return storage.map { $0 + start }
    }

    private mutating func grow() {
        let newCapacity = Swift.max(16, capacity * 2)
        let newStorage = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        if let storage {
            newStorage.moveInitialize(from: storage, count: count)
            storage.deallocate()
        }
        storage = newStorage
        capacity = newCapacity
    }
}
