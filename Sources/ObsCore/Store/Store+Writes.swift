/// The write operations. Each runs inside `transact` and throws without side effects on its own
/// (the transaction's rollback undoes what earlier operations of a batch did).
extension Store {
    /// Applies a value to a value key (client write or binding), keeping the transaction's record.
    func writeValue(_ node: KeyNode, _ value: JSONValue, always: Bool) {
        let new = KeyContent.value(value)
        if node.content == new && !always && node.kind == .value { return }
        touch(node)
        setKind(node, .value)
        if always { current?.forced.insert(ObjectIdentifier(node)) }
        node.write(new, always: always)
    }

    func checkValueSize(_ value: JSONValue) throws(ObsError) {
        // A value from a request line is encoded at most 5 times longer than it was written (an
        // exponent such as 1e18 becomes 19 digits; nothing else grows): a line that short needs no
        // encoding to know its value is within the limit.
        if let line = requestLineBytes, line <= configuration.maxValueBytes / 8 { return }
        // Encoded into the store's kept scratch memory (no allocation per write).
        scratch.removeAll(keepingCapacityUpTo: 1 << 16)
        value.encode(into: &scratch)
        let count = scratch.count
        if count > configuration.maxValueBytes {
            throw ObsError(.tooLarge, "value of \(count) bytes is over the limit of \(configuration.maxValueBytes)",
                           details: ["limit": "max_value_bytes"])
        }
    }

    func compile(_ source: String, allowValue: Bool = false) throws(ObsError) -> Expression {
        if source.utf8.count > configuration.maxExpressionBytes {
            throw ObsError(.tooLarge, "expression of \(source.utf8.count) bytes is over the limit of \(configuration.maxExpressionBytes)",
                           details: ["limit": "max_expression_bytes"])
        }
        return try Expression.compile(source, allowValue: allowValue)
    }

    /// `set`: whether it changed anything.
    func set(_ key: String, _ value: JSONValue, ifRev: UInt64? = nil, ttlMs: Int64? = nil, owner: UInt64? = nil,
             always: Bool = false) throws(ObsError) -> Bool
    {
        try KeyName.validate(key)
        try checkValueSize(value)
        let found = node(key, create: false)
        if found?.kind == .computed { throw ObsError(.readOnly, "'\(key)' is a computed key") }
        if let ifRev {
            let currentRev = found?.exists == true ? max(found!.rev, 1) : 0
            if currentRev != ifRev {
                throw ObsError(.conflict, "'\(key)' is at revision \(currentRev), not \(ifRev)", details: ["rev": .int(Int64(currentRev))])
            }
        }
        let node = found ?? node(key, create: true, placeholder: false)!
        let expiresAt = ttlMs.map { clock.now + Double($0) / 1000 }
        let metaChanged = node.expiresAt != expiresAt || node.owner != owner
        let valueChanged = node.content != .value(value) || always || !node.exists
        // Cluster mode: an answer that depends on the key's state (compare-and-set, or "unchanged"
        // from a view that may be behind) holds only if nobody changed it first.
        if ifRev != nil || !(valueChanged || metaChanged) { current?.depend(on: key) }
        guard valueChanged || metaChanged else { return false }
        touch(node)
        if metaChanged {
            current?.redefined.insert(ObjectIdentifier(node))
            node.expiresAt = expiresAt
            node.owner = owner
            if let expiresAt { expiries.push(expiresAt, node, isLive: isLiveExpiry) }
        }
        writeValue(node, value, always: always)
        return true
    }

    /// `delete`: whether the key existed.
    func delete(_ key: String) throws(ObsError) -> Bool {
        try KeyName.validate(key)
        guard let node = existing(key) else {
            current?.depend(on: key)
            return false
        }
        // An expiry or an ephemeral removal deletes the key as this host knows it, not a newer one.
        if current?.reason != nil { current?.depend(on: key) }
        remove(node)
        return true
    }

    /// Deletes a key inside the open transaction, whatever its kind.
    func remove(_ node: KeyNode) {
        touch(node)
        setExpression(node, nil)
        setKind(node, nil)
        node.expiresAt = nil
        node.owner = nil
        node.write(.missing, always: false)
    }

    /// `incr`: the new value.
    func incr(_ key: String, by: JSONValue) throws(ObsError) -> JSONValue {
        try KeyName.validate(key)
        let found = node(key, create: false)
        if found?.kind == .computed { throw ObsError(.readOnly, "'\(key)' is a computed key") }
        self.current?.depend(on: key)
        let current = found?.exists == true ? found!.content.value ?? .null : .int(0)
        let result: JSONValue
        switch (current, by) {
        case (.int(let a), .int(let b)):
            let (sum, overflow) = a.addingReportingOverflow(b)
            if overflow { throw ObsError(.badValue, "incr of '\(key)' overflows") }
            result = .int(sum)
        case (.int, .double), (.double, .int), (.double, .double):
            let sum = current.doubleValue! + by.doubleValue!
            guard sum.isFinite else { throw ObsError(.badValue, "incr of '\(key)' is not finite") }
            result = .double(sum)
        default:
            throw ObsError(.typeMismatch, "'\(key)' holds \(current.typeName), not a number")
        }
        writeValue(found ?? node(key, create: true, placeholder: false)!, result, always: false)
        return result
    }

    /// `define`: the keys read on the first evaluation.
    func define(_ key: String, _ source: String, replace: Bool) throws(ObsError) -> [String] {
        try KeyName.validate(key)
        let expression = try compile(source)
        current?.depend(on: key)
        if view(key)?.kind == .value && !replace {
            throw ObsError(.exists, "'\(key)' is a value key; define it with replace: true")
        }
        let node = node(key, create: true, placeholder: false)!
        if let binding = bindings[key] { uninstall(binding) }
        touch(node)
        current?.redefined.insert(ObjectIdentifier(node))
        node.expiresAt = nil
        node.owner = nil
        setKind(node, .computed)
        setExpression(node, expression)
        engine.invalidate(node)
        engine.refresh(node)
        let deps = node.dependencyNames
        for dep in deps {
            if let path = inputPath(from: dep, to: key) {
                let full = [key] + path
                throw ObsError(.cycle, "cycle: " + full.joined(separator: " -> "), details: ["path": .array(full.map { .string($0) })])
            }
        }
        return deps
    }

    /// `bind`: whether it replaced a binding into `to`.
    func bind(from: String, to: String, map: String?, twoWay: Bool, unmap: String?) throws(ObsError) -> Bool {
        try KeyName.validate(from)
        try KeyName.validate(to)
        if from == to {
            throw ObsError(.cycle, "cycle: \(to) -> \(to)", details: ["path": [.string(to), .string(to)]])
        }
        let mapExpression = try map.map { source throws(ObsError) in try compile(source, allowValue: true) }
        let unmapExpression = try unmap.map { source throws(ObsError) in try compile(source, allowValue: true) }
        for target in twoWay ? [to, from] : [to] where view(target)?.kind == .computed {
            throw ObsError(.readOnly, "'\(target)' is a computed key")
        }
        let ignored: Set<String> = twoWay ? [to, from] : [to]
        if let path = inputPath(from: from, to: to, ignoringBindingsInto: ignored) {
            let full = [to] + path
            throw ObsError(.cycle, "cycle: " + full.joined(separator: " -> "), details: ["path": .array(full.map { .string($0) })])
        }
        if twoWay, let path = inputPath(from: to, to: from, ignoringBindingsInto: ignored) {
            let full = [from] + path
            throw ObsError(.cycle, "cycle: " + full.joined(separator: " -> "), details: ["path": .array(full.map { .string($0) })])
        }
        var replaced = false
        for target in twoWay ? [to, from] : [to] {
            if let old = bindings[target] {
                uninstall(old)
                replaced = true
            }
        }
        install(KeyBinding(from: from, to: to, map: mapExpression, unmap: unmapExpression, twoWay: twoWay), initialWrite: true)
        return replaced
    }

    /// `unbind`: removes the binding into `to` (both directions of a two-way binding).
    func unbind(_ to: String) throws(ObsError) {
        try KeyName.validate(to)
        guard let binding = bindings[to] else { throw ObsError(.notFound, "no binding into '\(to)'") }
        uninstall(binding)
    }
}
