/// The state bits of a node. See Propagation.swift for how they move.
/// (Computed static properties: a `static let` would be a lazily initialised global, paid for on
/// every access in the hot loops.)
@usableFromInline
struct NodeFlags: OptionSet, Sendable {
    @usableFromInline var rawValue: UInt16

    @inlinable init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Recomputable: a computed value.
    @inlinable static var computed: NodeFlags { NodeFlags(rawValue: 1 << 0) }
    /// An observer or effect: queued, not recomputed, when a transaction reaches it.
    @inlinable static var watcher: NodeFlags { NodeFlags(rawValue: 1 << 1) }
    /// A watcher that runs inside the transaction, under the lock (bindings).
    @inlinable static var effect: NodeFlags { NodeFlags(rawValue: 1 << 2) }
    /// A direct dependency changed: must recompute.
    @inlinable static var dirty: NodeFlags { NodeFlags(rawValue: 1 << 3) }
    /// Some transitive dependency may have changed: check the dependencies first.
    @inlinable static var pending: NodeFlags { NodeFlags(rawValue: 1 << 4) }
    /// Its compute closure is on the stack: reading it now closes a cycle.
    @inlinable static var running: NodeFlags { NodeFlags(rawValue: 1 << 5) }
    /// On the current dependency walk's path: meeting it again means a cycle.
    @inlinable static var checking: NodeFlags { NodeFlags(rawValue: 1 << 6) }
    /// In the engine's queue of watchers for this transaction.
    @inlinable static var queued: NodeFlags { NodeFlags(rawValue: 1 << 7) }
    /// A cancelled watcher: never runs again.
    @inlinable static var disposed: NodeFlags { NodeFlags(rawValue: 1 << 8) }
    /// A computed whose last run failed: its error is its state. (A flag, so that a read checks one
    /// word of the node's first line to know it can take the value as it is.)
    @inlinable static var failed: NodeFlags { NodeFlags(rawValue: 1 << 9) }
    /// A computed that has a good value (its value cell is initialised).
    @inlinable static var hasValue: NodeFlags { NodeFlags(rawValue: 1 << 10) }
    /// An observable written with a change forced (not compared) since its subscribers last looked.
    @inlinable static var forcedChange: NodeFlags { NodeFlags(rawValue: 1 << 11) }
    /// A computed brought up to date at the end of every transaction that reaches it, as if an
    /// observer read it, with no observer: no object, link or queue entry of its own (the store's
    /// computed keys, whose every change history and watches need).
    @inlinable static var eager: NodeFlags { NodeFlags(rawValue: 1 << 12) }
}

/// A node of the reactive graph: an observable, a computed value, or an observer.
///
/// Every ObsCore type that takes part in dependency tracking is one. It cannot be subclassed
/// outside ObsCore; it has no API of its own.
public class ReactiveNode: @unchecked Sendable {
    // The flags and the subscriber list come first, together in the 16 bytes after the object's
    // header: all the marking walk reads of a node, in one cache line whatever the object's
    // alignment (`prefetchHead`). The value cell and the engine follow, so that a read of an
    // up-to-date node finds all it needs within the node's first 56 bytes.
    @usableFromInline @exclusivity(unchecked) final var flags: NodeFlags
    // The graph's edges. A node's dependencies are a singly linked list of links in the order they
    // were read; its subscribers are a doubly linked list threaded through the same links. Links and the
    // nodes they join are kept alive by explicit retains (Tracking.swift), so the edges are
    // `Unmanaged`: walking the graph costs no reference counting.
    @usableFromInline @exclusivity(unchecked) final var subs: LinkRef?
    /// The typed node's value (ValueCell.swift), read and written only through `ValueCell`.
    private final var valueCell: (UInt64, UInt64) = (0, 0)
    /// The engine, reachable without touching the lazily initialised global on every call:
    /// `withEngine` is how the per-read and per-run paths get it.
    @usableFromInline final let engineRef = Unmanaged.passUnretained(engine)
    @usableFromInline @exclusivity(unchecked) final var deps: LinkRef?
    @usableFromInline @exclusivity(unchecked) final var subsTail: LinkRef?
    /// The evaluation that last linked this node as a dependency (Tracking.swift): a node read
    /// again in the same evaluation is found linked without a search.
    @usableFromInline @exclusivity(unchecked) final var readEpoch: UInt64 = 0

    /// Where `valueCell` is, from the start of the object: after the header (two words), the flags
    /// (padded to a word) and `subs`. A test checks it against the field's address.
    @inlinable static var valueCellOffset: Int { 4 * MemoryLayout<UnsafeRawPointer>.size }
    @inlinable static var valueCellSize: Int { 16 }
    /// The cell is word-aligned (objects are allocated at least that aligned).
    @inlinable static var valueCellAlignment: Int { MemoryLayout<UInt64>.alignment }

    /// The address of the value cell, as the field itself gives it (for the test of the offset).
    final var valueCellAddress: UnsafeRawPointer {
        withUnsafeMutablePointer(to: &valueCell) { UnsafeRawPointer($0) }
    }

    // Not inlined: the only typed access to `valueCell` is here (ValueCell.swift).
    @inline(never)
    init(flags: NodeFlags) {
        self.flags = flags
    }

    /// What a node of a type outside the engine's own is to the engine.
    enum Role {
        /// Read by others; `update()` compares its pending write, or (a node that is sometimes
        /// computed) recomputes it.
        case source
        /// Queued when a transaction reaches it, run by the flush (`runWatcher()`).
        case observer
        /// An observer that runs inside the transaction, under the lock, and may write.
        case effect
    }

    @inline(never)
    init(role: Role) {
        switch role {
        case .source: flags = []
        case .observer: flags = [.watcher]
        case .effect: flags = [.watcher, .effect]
        }
    }

    /// Runs `body` with the engine, at the cost of a field load.
    @inlinable
    final func withEngine<R>(_ body: (Engine) throws -> R) rethrows -> R {
        try engineRef._withUnsafeGuaranteedRef(body)
    }

    /// This node as an edge end.
    @inlinable
    final var ref: Unmanaged<ReactiveNode> { Unmanaged.passUnretained(self) }

    /// Recomputes a computed node; true when its value or error changed. Called under the lock.
    func update() -> Bool { false }

    /// Runs a watcher that a transaction reached and whose dependencies changed. Called under the lock.
    func runWatcher() {}

    /// Prefetches what running or updating this node will read next beyond the node itself.
    func prefetchWork() {}

    /// Stops this node as the subscription of an `ObservationToken` (an observer, a binding's
    /// effect): it never runs again and its dependencies are unlinked.
    func cancelSubscription() { dispose() }

    /// Prefetches the first dependency link: what checking this node reads first.
    func prefetchDependencies() {
        deps?.prefetch()
    }

    deinit {
        if deps != nil { engine.detachDependencies(of: self) }
    }
}

extension Unmanaged where Instance == ReactiveNode {
    @inlinable var flags: NodeFlags {
        get { _withUnsafeGuaranteedRef { $0.flags } }
        nonmutating set { _withUnsafeGuaranteedRef { $0.flags = newValue } }
    }
    @inlinable var deps: LinkRef? {
        get { _withUnsafeGuaranteedRef { $0.deps } }
        nonmutating set { _withUnsafeGuaranteedRef { $0.deps = newValue } }
    }
    @inlinable var subs: LinkRef? {
        get { _withUnsafeGuaranteedRef { $0.subs } }
        nonmutating set { _withUnsafeGuaranteedRef { $0.subs = newValue } }
    }
    var readEpoch: UInt64 {
        get { _withUnsafeGuaranteedRef { $0.readEpoch } }
        nonmutating set { _withUnsafeGuaranteedRef { $0.readEpoch = newValue } }
    }
    @inlinable var subsTail: LinkRef? {
        get { _withUnsafeGuaranteedRef { $0.subsTail } }
        nonmutating set { _withUnsafeGuaranteedRef { $0.subsTail = newValue } }
    }
    @inline(__always) func update() -> Bool { _withUnsafeGuaranteedRef { $0.update() } }
    @inlinable static func === (a: Self, b: Self) -> Bool { a.toOpaque() == b.toOpaque() }
}

