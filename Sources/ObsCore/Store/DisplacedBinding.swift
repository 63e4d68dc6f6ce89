/// A stored binding that `Store.load` did not install. A binding is recorded under its `to` (a
/// two-way binding has one record, under its `to`), so two records over one key are damage, or
/// records an earlier version left: it kept a key's record when the key became the `from` of a
/// two-way binding.
public struct DisplacedBinding: Sendable, Equatable {
    public enum Why: Sendable, Equatable {
        /// `by`, written after it (a shared log's records, by revision), binds one of its keys.
        case later
        /// An earlier version left its record when its `to` became the `from` of the two-way
        /// binding `by`, which is loaded; the next local commit deletes the record.
        case leftOver
        /// `by`, loaded after it, binds one of its keys, and the records cannot tell which of the
        /// two was made last (a two-way binding turned round by an earlier version, or damage).
        case undecidable
    }

    public let binding: StoredBinding
    public let by: StoredBinding
    public let why: Why

    public init(binding: StoredBinding, by: StoredBinding, why: Why) {
        self.binding = binding
        self.by = by
        self.why = why
    }

    /// How `Store.load` installs a state's bindings: `order` is installed in turn, each displacing
    /// the ones already over its keys (`later` in a state whose records are in the order they were
    /// written, `undecidable` otherwise); `leftOver` are records not installed at all.
    ///
    /// A storage that keeps rows by name has no write order. There the records an earlier version
    /// left are found by what that version did: it kept a key's record only when the key became
    /// the `from` of a two-way binding, and any later change of that key's binding replaced or
    /// deleted the record. So a record named K is left over exactly when a live two-way record has
    /// `from` K, and a record is live when it is not left over: decided from the ends of each
    /// chain of two-way bindings. A cycle of them (a two-way binding turned round: `p <-> q`
    /// recorded under q, `q <-> p` under p) cannot be decided; its records are installed in name
    /// order, each displacing the last, and reported `undecidable`.
    static func plan(_ state: StoredState) -> (order: [StoredBinding], leftOver: [DisplacedBinding]) {
        guard !state.bindingsInWriteOrder else { return (state.bindings, []) }
        var twoWayFrom: [String: [StoredBinding]] = [:]
        for binding in state.bindings where binding.twoWay { twoWayFrom[binding.from, default: []].append(binding) }
        guard state.bindings.contains(where: { twoWayFrom[$0.to] != nil }) else { return (state.bindings, []) }

        enum Liveness { case live, leftOver(by: StoredBinding), undecided }
        var decided: [String: Liveness] = [:]
        var visiting: Set<String> = []
        // Iterative depth-first: a chain may be as long as the state has bindings.
        func liveness(of root: StoredBinding) -> Liveness {
            var stack: [StoredBinding] = [root]
            while let top = stack.last {
                if decided[top.to] != nil {
                    stack.removeLast()
                    continue
                }
                let over = twoWayFrom[top.to] ?? []
                if let pending = over.first(where: { decided[$0.to] == nil }) {
                    if visiting.contains(pending.to) {
                        // A cycle: every record on it is undecided.
                        for binding in stack { decided[binding.to] = .undecided }
                        stack.removeAll()
                        break
                    }
                    visiting.insert(top.to)
                    stack.append(pending)
                    continue
                }
                visiting.remove(top.to)
                stack.removeLast()
                var result = Liveness.live
                for binding in over {
                    switch decided[binding.to]! {
                    case .live: result = .leftOver(by: binding)
                    case .undecided: if case .live = result { result = .undecided }
                    case .leftOver: break
                    }
                    if case .leftOver = result { break }
                }
                decided[top.to] = result
            }
            return decided[root.to] ?? .undecided
        }
        var live: [StoredBinding] = [], undecided: [StoredBinding] = [], leftOver: [DisplacedBinding] = []
        for binding in state.bindings {
            switch liveness(of: binding) {
            case .live: live.append(binding)
            case .undecided: undecided.append(binding)
            case .leftOver(let by): leftOver.append(DisplacedBinding(binding: binding, by: by, why: .leftOver))
            }
        }
        return (live + undecided, leftOver)
    }
}
