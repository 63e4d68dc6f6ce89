/// A stored binding that `Store.load` did not install: another stored binding over one of its keys
/// displaced it. A binding is recorded under its `to` (a two-way binding has one record, under its
/// `to`), so two records over one key are damage, or records an earlier version left: it kept a
/// key's record when the key became the `from` of a two-way binding.
public struct DisplacedBinding: Sendable, Equatable {
    public let binding: StoredBinding
    public let by: StoredBinding

    /// Both bind the same two keys both ways (a two-way binding turned round by an earlier
    /// version, which kept the first one's record): records kept by name cannot tell which of
    /// the two was made last.
    public var undecidable: Bool {
        binding.twoWay && by.twoWay && Set([binding.from, binding.to]) == Set([by.from, by.to])
    }

    /// The order `Store.load` installs a state's bindings in, each displacing the ones over its
    /// keys, so that the later of two displaces the earlier: the order they were written in, when
    /// the state has it (a shared log's records, by revision). A storage that keeps rows by name
    /// has no such order; there, of a record named K and a two-way binding whose `from` is K, the
    /// two-way binding is the later: the earlier version deleted a binding's record whenever the
    /// binding went, except when its key became such a `from`. Those records go first.
    static func loadOrder(_ state: StoredState) -> [StoredBinding] {
        guard !state.bindingsInWriteOrder else { return state.bindings }
        let twoWayFroms = Set(state.bindings.lazy.filter(\.twoWay).map(\.from))
        guard state.bindings.contains(where: { twoWayFroms.contains($0.to) }) else { return state.bindings }
        return state.bindings.filter { twoWayFroms.contains($0.to) } + state.bindings.filter { !twoWayFroms.contains($0.to) }
    }
}
