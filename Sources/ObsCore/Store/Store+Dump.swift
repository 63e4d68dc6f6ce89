/// `dump` and `restore`: the whole persisted state as one JSON object, and back.
extension Store {
    /// Value keys (ephemeral ones excluded, as they are not persisted), computed definitions and
    /// bindings, sorted by key.
    func dump() -> [(String, JSONValue)] {
        var keys: [JSONValue] = []
        for name in allNames().sorted(by: JSONValue.utf8Precedes) {
            guard let key = view(name) else { continue }
            var item: [String: JSONValue] = ["key": .string(name), "kind": .string(key.kind.rawValue),
                                             "rev": .int(Int64(key.rev)), "created_rev": .int(Int64(key.createdRev)),
                                             "version": .int(Int64(key.version))]
            if key.kind == .computed {
                guard let expression = key.node?.expression else { continue }
                item["expr"] = .string(expression.source)
            } else {
                guard key.owner == nil, let value = key.content.value else { continue }
                item["value"] = value
                if let expiresAt = key.expiresAt { item["expires_at"] = .double(expiresAt) }
            }
            keys.append(.object(item))
        }
        var seen = Set<ObjectIdentifier>()
        var list: [JSONValue] = []
        for target in bindings.keys.sorted(by: JSONValue.utf8Precedes) {
            let binding = bindings[target]!
            guard seen.insert(ObjectIdentifier(binding)).inserted else { continue }
            var item: [String: JSONValue] = ["from": .string(binding.from), "to": .string(binding.to), "two_way": .bool(binding.twoWay)]
            if let map = binding.map { item["map"] = .string(map.source) }
            if let unmap = binding.unmap { item["unmap"] = .string(unmap.source) }
            list.append(.object(item))
        }
        return [("rev", .int(Int64(rev))), ("keys", .array(keys)), ("bindings", .array(list))]
    }

    /// `restore`: makes the store hold what `dump` returned (with `replace`, nothing else), as one
    /// transaction. Revisions continue from this store's counter.
    func restore(keys: [JSONValue], bindings restoredBindings: [JSONValue], replace: Bool) throws(ObsError) {
        func field(_ item: [String: JSONValue], _ name: String) throws(ObsError) -> String {
            guard let value = item[name]?.stringValue else {
                throw ObsError(.badRequest, "restore: each item needs a string field '\(name)'")
            }
            return value
        }
        var values: [(String, JSONValue, Double?)] = []
        var definitions: [(String, String)] = []
        for key in keys {
            guard let item = key.objectValue else { throw ObsError(.badRequest, "restore: field 'keys' must hold objects") }
            let name = try field(item, "key")
            try KeyName.validate(name)
            if let expr = item["expr"]?.stringValue {
                definitions.append((name, expr))
            } else {
                guard let value = item["value"] else { throw ObsError(.badRequest, "restore: key '\(name)' needs 'value' or 'expr'") }
                values.append((name, value, item["expires_at"]?.doubleValue))
            }
        }
        var links: [(String, String, String?, Bool, String?)] = []
        for binding in restoredBindings {
            guard let item = binding.objectValue else { throw ObsError(.badRequest, "restore: field 'bindings' must hold objects") }
            links.append((try field(item, "from"), try field(item, "to"), item["map"]?.stringValue,
                          item["two_way"]?.boolValue ?? false, item["unmap"]?.stringValue))
        }
        if replace {
            for target in Set(bindings.values.map(\.to)) { try unbind(target) }
            let keep = Set(values.map(\.0) + definitions.map(\.0))
            for name in allNames().sorted() where !keep.contains(name) { _ = try delete(name) }
        }
        for (name, value, expiresAt) in values {
            if view(name)?.kind == .computed { _ = try delete(name) }
            _ = try set(name, value)
            if let expiresAt, let node = existing(name) {
                node.expiresAt = expiresAt
                current?.redefined.insert(ObjectIdentifier(node))
                expiries.push(expiresAt, node, isLive: isLiveExpiry)
            }
        }
        for (name, expr) in definitions {
            _ = try define(name, expr, replace: true)
        }
        for (from, to, map, twoWay, unmap) in links {
            _ = try bind(from: from, to: to, map: map, twoWay: twoWay, unmap: unmap)
        }
    }
}
