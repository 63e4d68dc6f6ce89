/// The keys matching one pattern that a computed reads with `match()`: a source node of the engine,
/// bumped when a matching key is created or deleted, so that such a computed re-evaluates when the
/// set of keys changes (and, through its reads of them, when one of their values does).
final class MatchSource: PatternKeyed {
    let pattern: KeyPattern
    let node = MatchNode()
    /// The existing keys matching the pattern.
    var names: Set<String>

    init(pattern: KeyPattern, names: Set<String>) {
        self.pattern = pattern
        self.names = names
    }
}

/// The source node of a `MatchSource`.
final class MatchNode: ReactiveNode, @unchecked Sendable {
    private var changed = false

    init() { super.init(role: .source) }

    func bump() {
        guard hasSubscribers else { return }
        changed = true
        engine.propagate(from: self)
    }

    override func update() -> Bool {
        markChecked()
        defer { changed = false }
        return changed
    }
}
