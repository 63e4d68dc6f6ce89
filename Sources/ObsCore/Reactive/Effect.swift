/// A watcher that runs inside the transaction, under the lock: it re-runs, in the same transaction,
/// when a value it read changed, and its writes are part of that transaction (bindings are built on
/// it, so a binding's target changes with the same commit as its source).
final class EffectNode: ReactiveNode, @unchecked Sendable {
    private let body: () -> Void
    /// Bindings feeding each other through transforms that never settle (`a -> b` as +1, `b -> a`
    /// as +1) would run forever under the lock: an effect runs at most this many times in one
    /// transaction, then leaves its target as it is until the next (as the store's bindings do).
    static let maxRunsPerTransaction = 64
    /// The flush this effect last ran in (`Engine.flushSerial`), and how many times it ran there.
    private var runFlush: UInt64 = 0
    private var runs = 0

    init(_ body: @escaping () -> Void) {
        self.body = body
        super.init(flags: [.watcher, .effect])
    }

    /// Runs the body once, recording what it reads. Called inside the engine.
    func run() {
        // A failed `.value` read in a transform: the binding writes nothing, nothing to report.
        try? engine.track(self, body)
    }

    override func runWatcher() {
        if runFlush != engine.flushSerial {
            runFlush = engine.flushSerial
            runs = 0
        }
        runs += 1
        if runs <= EffectNode.maxRunsPerTransaction { run() }
    }

    func cancel() { dispose() }
}

extension ReactiveNode {
    /// Stops a watcher for good: it never runs again (if it is queued in the transaction under way,
    /// it stays alive until that settles) and its dependencies are unlinked. `alsoInside` runs in
    /// the same transaction, first.
    ///
    /// Cancelled from code the engine is running (a computed's closure, a binding's transform,
    /// which may let go of a token too), the watcher may be the one running, or on the stack of
    /// the dependency walk with its links: it stays alive and linked until the transaction has
    /// settled (`Engine.releaseDropped` unlinks it then).
    final func dispose(_ alsoInside: (Engine) -> Void = { _ in }) {
        engine.enter()
        alsoInside(engine)
        flags.insert(.disposed)
        if engine.evaluationDepth > 0 {
            engine.keepUntilSettled(self)
            engine.exit()
            return
        }
        if flags.contains(.queued) { engine.keepUntilSettled(self) }
        engine.exit()
        engine.detachDependencies(of: self)
    }
}
