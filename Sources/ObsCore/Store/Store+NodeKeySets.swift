/// The hot `set` and `incr` of a key that is a node of the engine (a value key that a computed, a
/// binding or a `match()` reads, or a missing key something reads): the general path's own
/// transaction, entered without the request's dictionary, `Request` or encoded reply, so that a
/// write that drives computeds allocates no more than the transaction does. Called outside any
/// transaction, on one host (`sharedLog == nil`).
extension Store {
    /// The node a `set` or `incr` of `name` writes, when it can be made this way; nil for a key
    /// that is a record or missing (Store+PlainKeys.swift takes those), a computed key (the
    /// general path's `read_only`) or an invalid name (its error).
    func writableNode(_ name: UnsafeRawBufferPointer) -> KeyNode? {
        guard KeyName.isValid(name), let slot = keys.find(name, hash: KeyTable.hash(name)), case .node(let node) = keys.entry(at: slot),
              node.kind != .computed else { return nil }
        return node
    }

    /// `set` of `node`'s key to `value` as one transaction, as a `set` request without options
    /// makes it: whether it changed anything, and the commit.
    func set(_ node: KeyNode, _ value: JSONValue) throws(ObsError) -> (changed: Bool, commit: CommitResult) {
        precondition(current == nil && sharedLog == nil, "a hot write runs alone, on one host")
        return try transact { () throws(ObsError) in try set(node.name, value) }
    }

    /// `incr` of `node`'s key by `by` as one transaction: the new value, and the commit.
    func incr(_ node: KeyNode, by: Int64) throws(ObsError) -> (value: JSONValue, commit: CommitResult) {
        precondition(current == nil && sharedLog == nil, "a hot write runs alone, on one host")
        return try transact { () throws(ObsError) in try incr(node.name, by: .int(by)) }
    }
}
