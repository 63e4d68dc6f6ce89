/// Start-up: the stored state becomes nodes again, and every computed is evaluated from it.
extension Store {
    func load(_ state: StoredState) throws(ObsError) {
        engine.enter()
        defer { engine.exit() }
        for key in state.keys {
            // A key with a deadline or an owner (cluster mode: another host's ephemeral key, which
            // `dump` leaves out as its own host does) is a node; a record holds neither.
            guard key.expiresAt != nil || key.owner != nil else {
                loadPlain(key)
                continue
            }
            let node = node(key.key, create: true, placeholder: false)!
            setKind(node, .value)
            node.content = .value(key.value)
            node.committed = node.content
            node.lastGood = key.value
            node.rev = key.rev
            node.createdRev = key.createdRev
            node.version = key.version
            node.expiresAt = key.expiresAt
            node.owner = key.owner
            if let expiresAt = key.expiresAt { expiries.push(expiresAt, node) }
        }
        for definition in state.definitions {
            let node = node(definition.key, create: true)!
            setKind(node, .computed)
            node.rev = definition.createdRev
            node.createdRev = definition.createdRev
            node.version = 1
            let expression: Expression
            do {
                expression = try Expression.compile(definition.expr)
            } catch {
                node.expression = nil
                node.content = .error(ObsError(.evalError, "stored definition does not parse: \(error.message)"))
                continue
            }
            setExpression(node, expression)
            engine.invalidate(node)
        }
        // Records of two bindings over one key are damage, or were left by an earlier version
        // (`DisplacedBinding.plan`). The others in order, as a transaction that puts them applies
        // them (`applyChanges`): a binding displaces those its keys are bound by already, so that
        // none is left half installed.
        let plan = DisplacedBinding.plan(state)
        displacedAtLoad = plan.leftOver
        staleBindingRecords = Set(plan.leftOver.map(\.binding.to))
        defer {
            for displaced in displacedAtLoad where displaced.why == .later && bindings[displaced.binding.to]?.to != displaced.binding.to {
                unloadedBindingRecords.insert(displaced.binding.to)
            }
        }
        for stored in plan.order {
            for target in stored.twoWay ? [stored.to, stored.from] : [stored.to] {
                guard let old = bindings[target] else { continue }
                uninstall(old)
                displacedAtLoad.append(DisplacedBinding(binding: old.stored, by: stored, why: state.bindingsInWriteOrder ? .later : .undecidable))
            }
            let map = stored.map.flatMap { try? Expression.compile($0, allowValue: true) }
            let unmap = stored.unmap.flatMap { try? Expression.compile($0, allowValue: true) }
            install(KeyBinding(from: stored.from, to: stored.to, map: map, unmap: unmap, twoWay: stored.twoWay), initialWrite: false)
        }
        for name in evaluationOrder(state.definitions) {
            if let node = view(name)?.node, node.isComputed { engine.refresh(node) }
        }
    }

    /// The restored computeds, each after the computeds its expression names (`$key`, as far as
    /// cycles allow): evaluated in this order, none has to evaluate another inside its own
    /// evaluation, so a chain of any length restores without deep nesting. (Dependencies through
    /// `match()` are not named; the engine evaluates those on demand.)
    private func evaluationOrder(_ definitions: [StoredDefinition]) -> [String] {
        var names: [String: Set<String>] = [:]
        for definition in definitions {
            names[definition.key] = view(definition.key)?.node?.expression?.referencedKeys ?? []
        }
        var visited = Set<String>()
        var order: [String] = []
        order.reserveCapacity(definitions.count)
        for definition in definitions where !visited.contains(definition.key) {
            // Depth first with an explicit stack: a name is placed after everything it names.
            var stack: [(name: String, pending: [String])] = [(definition.key, Array(names[definition.key] ?? []))]
            visited.insert(definition.key)
            while let top = stack.last {
                if let next = top.pending.last {
                    stack[stack.count - 1].pending.removeLast()
                    if names[next] != nil, !visited.contains(next) {
                        visited.insert(next)
                        stack.append((next, Array(names[next] ?? [])))
                    }
                } else {
                    order.append(top.name)
                    stack.removeLast()
                }
            }
        }
        return order
    }
}
