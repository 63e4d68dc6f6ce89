/// A list of key nodes in the order added, for the store's transactions: the keys a transaction
/// touched or promoted (`retaining`: each kept alive by the list until it is emptied, as an array
/// of them would), and the keys it changed (not retaining: they are among the touched ones).
///
/// Not an array: for the 50 keys of a chain, an array's shared generic entry points (each append
/// went through `makeUniqueAndReserveCapacity` and `appendElementAssumeUniqueAndCapacity`, each
/// emptying through `swift_arrayDestroy` and a value-witness call per element) cost more than the
/// retains themselves. Not copyable: a copy would share the memory and the references.
struct NodeList: ~Copyable {
    private var base: UnsafeMutablePointer<Unmanaged<KeyNode>>
    private var capacity: Int
    private(set) var count = 0
    private let retaining: Bool

    private static let initialCapacity = 16
    /// Emptying a list grown past this many gives its memory back (after a transaction over many
    /// keys, such as a restore), as the arrays did.
    private static let keptCapacity = 4096

    init(retaining: Bool) {
        self.retaining = retaining
        capacity = Self.initialCapacity
        base = .allocate(capacity: capacity)
    }

    deinit {
        releaseAll()
        base.deallocate()
    }

    var isEmpty: Bool { count == 0 }

    subscript(index: Int) -> KeyNode {
        precondition(index >= 0 && index < count, "node list index out of range")
        return base[index].takeUnretainedValue()
    }

    @inline(__always)
    mutating func append(_ node: KeyNode) {
        if count == capacity { grow() }
        (base + count).initialize(to: retaining ? .passRetained(node) : .passUnretained(node))
        count += 1
    }

    /// Calls `body` with each node, in order, retaining none (the list, or the list they were
    /// taken from, keeps them alive). `body` must not change the list.
    @inline(__always)
    func forEachGuaranteed(_ body: (KeyNode) -> Void) {
        for index in 0..<count { base[index]._withUnsafeGuaranteedRef(body) }
    }

    /// Empties the list (releasing its nodes if it retains them), keeping its memory unless it
    /// grew past `keptCapacity`.
    mutating func removeAll() {
        releaseAll()
        count = 0
        if capacity > Self.keptCapacity {
            base.deallocate()
            capacity = Self.initialCapacity
            base = .allocate(capacity: capacity)
        }
    }

    private func releaseAll() {
        guard retaining else { return }
        for index in 0..<count { base[index].release() }
    }

    @inline(never)
    private mutating func grow() {
        let grown = UnsafeMutablePointer<Unmanaged<KeyNode>>.allocate(capacity: capacity * 2)
        grown.moveInitialize(from: base, count: count)
        base.deallocate()
        base = grown
        capacity *= 2
    }
}
