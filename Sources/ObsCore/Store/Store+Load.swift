/// Start-up: the stored state becomes nodes again, and every computed is evaluated from it.
extension Store {
    func load(_ state: StoredState) throws(ObsError) {
        engine.enter()
        defer { engine.exit() }
        for key in state.keys {
            let node = node(key.key, create: true)!
            setKind(node, .value)
            node.content = .value(key.value)
            node.committed = node.content
            node.lastGood = key.value
            node.rev = key.rev
            node.createdRev = key.createdRev
            node.version = key.version
            node.expiresAt = key.expiresAt
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
            node.flags.insert(.dirty)
        }
        for stored in state.bindings {
            let map = stored.map.flatMap { try? Expression.compile($0, allowValue: true) }
            let unmap = stored.unmap.flatMap { try? Expression.compile($0, allowValue: true) }
            install(KeyBinding(from: stored.from, to: stored.to, map: map, unmap: unmap, twoWay: stored.twoWay), initialWrite: false)
        }
        for definition in state.definitions {
            if let node = nodes[definition.key], node.expression != nil { engine.refresh(node) }
        }
    }
}
