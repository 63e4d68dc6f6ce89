/// The state bits of a node. See Propagation.swift for how they move.
struct NodeFlags: OptionSet, Sendable {
    var rawValue: UInt16

    /// Recomputable: a computed value.
    static let computed = NodeFlags(rawValue: 1 << 0)
    /// An observer or effect: queued, not recomputed, when a transaction reaches it.
    static let watcher = NodeFlags(rawValue: 1 << 1)
    /// A watcher that runs inside the transaction, under the lock (bindings).
    static let effect = NodeFlags(rawValue: 1 << 2)
    /// A direct dependency changed: must recompute.
    static let dirty = NodeFlags(rawValue: 1 << 3)
    /// Some transitive dependency may have changed: check the dependencies first.
    static let pending = NodeFlags(rawValue: 1 << 4)
    /// Its compute closure is on the stack: reading it now closes a cycle.
    static let running = NodeFlags(rawValue: 1 << 5)
    /// On the current dependency walk's path: meeting it again means a cycle.
    static let checking = NodeFlags(rawValue: 1 << 6)
    /// In the engine's queue of watchers for this transaction.
    static let queued = NodeFlags(rawValue: 1 << 7)
    /// A cancelled watcher: never runs again.
    static let disposed = NodeFlags(rawValue: 1 << 8)
}

/// A node of the reactive graph: an observable, a computed value, or an observer.
///
/// Every ObsCore type that takes part in dependency tracking is one. It cannot be subclassed
/// outside ObsCore; it has no API of its own.
public class ReactiveNode: @unchecked Sendable {
    // The graph's edges. A node's dependencies are a doubly linked list of links in the order they
    // were read; its subscribers are another list threaded through the same links. The links are
    // owned by the engine's pool, so these references are unowned(unsafe): no reference counting
    // while the graph is walked.
    unowned(unsafe) final var deps: Link?
    unowned(unsafe) final var depsTail: Link?
    unowned(unsafe) final var subs: Link?
    unowned(unsafe) final var subsTail: Link?
    final var flags: NodeFlags

    init(flags: NodeFlags) {
        self.flags = flags
    }

    /// Recomputes a computed node; true when its value or error changed. Called under the lock.
    func update() -> Bool { false }

    /// Runs a watcher that a transaction reached and whose dependencies changed. Called under the lock.
    func runWatcher() {}

    deinit {
        if deps != nil { engine.detachDependencies(of: self) }
    }
}

/// One edge: `sub` read `dep`. It sits in two lists at once: `sub`'s dependencies and `dep`'s
/// subscribers. A link retains its `dep` (a node is kept alive by whatever reads it) but not its
/// `sub` (a node unlinks itself when it goes away).
final class Link {
    unowned(unsafe) var dep: ReactiveNode
    unowned(unsafe) var sub: ReactiveNode
    unowned(unsafe) var prevDep: Link?
    unowned(unsafe) var nextDep: Link?
    unowned(unsafe) var prevSub: Link?
    unowned(unsafe) var nextSub: Link?

    init(dep: ReactiveNode, sub: ReactiveNode) {
        self.dep = dep
        self.sub = sub
    }
}
