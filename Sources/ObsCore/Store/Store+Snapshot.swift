/// What the watch unit reads of the store.
extension Store: WatchedState {
    func snapshot(matching patterns: [KeyPattern]) -> [KeyState] {
        var names = Set<String>()
        for pattern in patterns { names.formUnion(keyNames(matching: pattern)) }
        engine.enter()
        defer { engine.exit() }
        var items: [KeyState] = []
        items.reserveCapacity(names.count)
        for name in names.sorted(by: JSONValue.utf8Precedes) {
            guard let node = existing(name) else { continue }
            node.settle()
            guard let kind = node.kind, node.content != .missing else { continue }
            items.append(KeyState(key: name, kind: kind, content: node.content, rev: node.rev))
        }
        return items
    }
}
