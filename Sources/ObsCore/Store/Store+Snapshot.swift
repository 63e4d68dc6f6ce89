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
            guard let key = view(name) else { continue }
            key.settle()
            let content = key.content
            guard content != .missing else { continue }
            items.append(KeyState(key: name, kind: key.kind, content: content, rev: key.rev))
        }
        return items
    }
}
