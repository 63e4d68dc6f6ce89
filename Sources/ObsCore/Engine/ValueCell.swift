/// Where a typed node keeps its value: in the node itself, in 16 bytes of the node's first cache
/// line (`ReactiveNode.valueCellOffset`), for every type that fits (`Int`, `Double`, `Bool`,
/// `String`, most small structs and enums, any class reference); for a larger type, in an
/// allocation of its own whose address the cell holds.
///
/// Swift's generic classes cannot hold a value they have no initial value for (a computed before
/// its first run) other than as an `Optional`, whose metadata generic code looks up at run time,
/// and cannot be allocated with room at their end; a value held this way is read through a
/// pointer that specialised code computes as the node's address plus a constant, so that a read
/// of an up-to-date node touches one line of memory (its flags, its engine and its value) instead
/// of the node and a separate allocation.
///
/// Nothing reads or writes the cell's stored property after `ReactiveNode.init`: only these
/// pointers do (and `ReactiveNode.init` is not inlined, so that no function mixes the two kinds of
/// access, which the optimizer could assume to be unrelated because their types differ).
@usableFromInline
enum ValueCell<Value> {
    /// Whether values of this type live in the node itself.
    @inlinable static var isInline: Bool {
        MemoryLayout<Value>.size <= ReactiveNode.valueCellSize
            && MemoryLayout<Value>.alignment <= ReactiveNode.valueCellAlignment
    }

    /// The address of `node`'s value (initialised or not: its owner knows).
    @inlinable @inline(__always)
    static func address(in node: ReactiveNode) -> UnsafeMutablePointer<Value> {
        let cell = UnsafeMutableRawPointer(Unmanaged.passUnretained(node).toOpaque()) + ReactiveNode.valueCellOffset
        if isInline { return cell.assumingMemoryBound(to: Value.self) }
        return cell.load(as: UnsafeMutablePointer<Value>.self)
    }

    /// Makes `node`'s cell ready to hold a value (uninitialised): binds the inline memory to the
    /// type, or allocates the memory of a larger value. Called once, by the typed node's init.
    static func prepare(in node: ReactiveNode) {
        let cell = UnsafeMutableRawPointer(Unmanaged.passUnretained(node).toOpaque()) + ReactiveNode.valueCellOffset
        if isInline {
            cell.bindMemory(to: Value.self, capacity: 1)
        } else {
            cell.storeBytes(of: UnsafeMutablePointer<Value>.allocate(capacity: 1), as: UnsafeMutablePointer<Value>.self)
        }
    }

    /// Gives back what `prepare` took (the value must be deinitialised already). Called by the
    /// typed node's deinit.
    static func release(in node: ReactiveNode) {
        if !isInline { address(in: node).deallocate() }
    }
}
