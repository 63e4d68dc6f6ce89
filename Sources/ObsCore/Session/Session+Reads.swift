import Foundation

/// The read operations of the table.
extension Session {
    func hello(_ request: Request) throws(ObsError) -> Reply {
        if let version = request.uint("protocol"), version != 1 {
            throw ObsError(.badRequest, "field 'protocol' must be 1 (the only version)")
        }
        return Reply(fields: [("server", "obsd"), ("version", .string(store.configuration.serverVersion)), ("protocol", 1),
                              ("rev", .int(Int64(store.rev))), ("pid", .int(Int64(ProcessInfo.processInfo.processIdentifier))),
                              ("max_line_bytes", .int(Int64(store.configuration.maxLineBytes))),
                              ("max_restore_bytes", .int(Int64(store.configuration.maxRestoreBytes)))]
                     // The run a watch names with `since` when it resumes (RunLineage); a cluster's
                     // history is etcd's, the same whatever host or run.
                     + (store.sharedLog == nil ? [("run", .string(RunLineage.text(store.watches.lineage.run)))] : []))
    }

    func ping(_ request: Request) -> Reply {
        Reply(fields: [("rev", .int(Int64(store.rev)))])
    }

    func get(_ request: Request) throws(ObsError) -> Reply {
        engine.enter()
        defer { engine.exit() }
        if let key = request.string("key") {
            try KeyName.validate(key)
            guard let found = store.view(key) else { throw ObsError(.notFound, "no key '\(key)'") }
            found.settle()
            switch found.content {
            case .value(let value):
                return Reply(fields: [("key", .string(key)), ("value", value), ("kind", .string(found.kind.rawValue)),
                                      ("rev", .int(Int64(found.rev))), ("version", .int(Int64(found.version)))])
            case .error(let error):
                throw ObsError(.evalError, error.message)
            case .missing:
                throw ObsError(.notFound, "no key '\(key)'")
            }
        }
        guard let pattern = request.string("pattern") else { throw ObsError(.badRequest, "missing field 'key' or 'pattern'") }
        let parsed = try KeyPattern(pattern)
        var items: [JSONValue] = []
        for name in store.keyNames(matching: parsed) {
            let found = store.view(name)!
            found.settle()
            var item: [String: JSONValue] = ["key": .string(name), "kind": .string(found.kind.rawValue),
                                             "rev": .int(Int64(found.rev)), "version": .int(Int64(found.version))]
            switch found.content {
            case .value(let value): item["value"] = value
            case .error(let error): item["error"] = .object(["code": .string(error.code.rawValue), "message": .string(error.message)])
            case .missing: continue
            }
            items.append(.object(item))
        }
        return Reply(fields: [("items", .array(items)), ("rev", .int(Int64(store.rev)))])
    }

    /// A key's kind as list, graph and describe show it: "missing" for a binding's key that does
    /// not exist (yet).
    private func shownKind(_ name: String) -> JSONValue {
        .string(store.view(name)?.kind.rawValue ?? "missing")
    }

    func list(_ request: Request) throws(ObsError) -> Reply {
        let pattern = try KeyPattern(request.string("pattern") ?? "**")
        let keys = store.shownKeyNames(matching: pattern).map { name -> JSONValue in
            .object(["key": .string(name), "kind": shownKind(name)])
        }
        return Reply(fields: [("keys", .array(keys))])
    }

    func describe(_ request: Request) throws(ObsError) -> Reply {
        let key = request.string("key")!
        try KeyName.validate(key)
        let found = store.view(key)
        let node = found?.node
        let targets = store.boundTargets(of: key)
        guard found != nil || store.bindings[key] != nil || !targets.isEmpty else { throw ObsError(.notFound, "no key '\(key)'") }
        engine.enter()
        defer { engine.exit() }
        found?.settle()
        var fields: [(String, JSONValue)] = [("key", .string(key)), ("kind", shownKind(key))]
        switch found?.content {
        case .value(let value): fields.append(("value", value))
        case .error(let error): fields.append(("error", .object(["code": .string(error.code.rawValue), "message": .string(error.message)])))
        case .missing, nil: break
        }
        if let expression = node?.expression { fields.append(("expr", .string(expression.source))) }
        fields.append(("deps", .array((node?.dependencyNames ?? []).map { .string($0) })))
        fields.append(("dependents", .array((node?.dependentNames ?? []).sorted(by: JSONValue.utf8Precedes).map { .string($0) })))
        if let binding = store.bindings[key] {
            var inbound: [String: JSONValue] = ["from": .string(binding.source(of: key)), "two_way": .bool(binding.twoWay)]
            if let map = key == binding.to ? binding.map : binding.unmap { inbound["map"] = .string(map.source) }
            fields.append(("binding", .object(inbound)))
        }
        if !targets.isEmpty { fields.append(("bound_to", .array(targets.map { .string($0) }))) }
        fields.append(("rev", .int(Int64(found?.rev ?? 0))))
        fields.append(("created_rev", .int(Int64(found?.createdRev ?? 0))))
        fields.append(("version", .int(Int64(found?.version ?? 0))))
        if let expiresAt = node?.expiresAt {
            // A deadline past what milliseconds count in an Int64 (a TTL near the largest one, or a
            // record put in etcd by hand) shows as the most there is.
            let left = ((expiresAt - store.clock.now) * 1000).rounded()
            fields.append(("ttl_ms", .int(left < 0 ? 0 : left < 0x1p63 ? Int64(left) : .max)))
        }
        if node?.owner != nil { fields.append(("ephemeral", true)) }
        return Reply(fields: fields)
    }

    func graph(_ request: Request) throws(ObsError) -> Reply {
        let pattern = try KeyPattern(request.string("pattern") ?? "**")
        let names = store.shownKeyNames(matching: pattern)
        var nodes: [JSONValue] = []
        var edges: [JSONValue] = []
        for name in names {
            nodes.append(.object(["key": .string(name), "kind": shownKind(name)]))
            for dep in store.view(name)?.node?.dependencyNames ?? [] {
                edges.append(.object(["from": .string(dep), "to": .string(name), "type": "dep"]))
            }
            if let binding = store.bindings[name] {
                edges.append(.object(["from": .string(binding.source(of: name)), "to": .string(name), "type": "bind"]))
            }
        }
        return Reply(fields: [("nodes", .array(nodes)), ("edges", .array(edges))])
    }

    func eval(_ request: Request) throws(ObsError) -> Reply {
        Reply(fields: [("value", try store.evaluateOnce(request.string("expr")!))])
    }

    func statsReply(_ request: Request) -> Reply {
        let stats = store.watches.stats
        let lag = store.storage.writeLag(now: store.clock.monotonic)
        return Reply(fields: [
            ("rev", .int(Int64(store.rev))), ("keys", .int(Int64(store.keyCount))), ("computed", .int(Int64(store.computedCount))),
            ("bindings", .int(Int64(store.bindingCount))), ("connections", .int(Int64(stats.clients))),
            ("watches", .int(Int64(stats.watches))), ("uptime_s", .double((store.clock.monotonic - store.startedAt).rounded())),
            ("events_sent", .int(Int64(stats.eventsSent))), ("overflows", .int(Int64(stats.overflows))),
            ("durability", .string(store.configuration.durability)), ("version", .string(store.configuration.serverVersion)),
        ] + store.requestCounters.fields + [
            ("unwritten_revisions", .int(Int64(lag.revisions))), ("unwritten_age_s", .double((lag.seconds * 1000).rounded() / 1000)),
            ("unwritten_bytes", .int(Int64(lag.bytes))), ("write_failing", .bool(lag.failing)),
        ] + (store.sharedLog.map { [("cluster", .object(Dictionary($0.stats, uniquingKeysWith: { first, _ in first })))] } ?? []))
    }

    func dump(_ request: Request) -> Reply {
        Reply(fields: store.dump())
    }
}
