/// The write operations of the table. Each `apply` function is one write applied inside the open
/// transaction; `perform` runs it in a transaction of its own, `batch` several in one. On one host
/// the store commits at once; in cluster mode (`Store.sharedLog`) the shared log decides, and the
/// answer comes later.
extension Session {
    /// Runs an operation of the table on a checked request.
    func perform(_ operation: Operation, _ request: Request) throws(ObsError) -> Answer {
        switch operation.body {
        case .answer(let answer):
            return try answer(self, request)
        case .write(let apply):
            if store.sharedLog == nil {
                let (result, commit) = try store.transact { () throws(ObsError) in try apply(self, request) }
                return .now(Reply(fields: result(commit.rev), needsSync: commit.persisted))
            }
            return submit(id: request.id, { [self] () throws(ObsError) in try apply(self, request) }) { result, rev in
                Reply(fields: result(rev))
            }
        }
    }

    /// Cluster mode: proposes a write to the shared log; its answer, built by `reply` from what
    /// the write returned and the revision that committed it, comes once the log decided.
    ///
    /// The write holds the session (`body` and the answer) until it is decided, whether or not its
    /// client is still there: a write that lost a race runs again, as this session's. An ephemeral
    /// key it makes that the log brings after the session closed is removed then, as at the close
    /// (`Store.removeOrphanedEphemeralKeys`).
    func submit<T>(id: JSONValue, _ body: @escaping () throws(ObsError) -> T, reply: @escaping (T, UInt64) -> Reply) -> Answer {
        store.submit(body) { [self] outcome in
            answerLater(id: id, outcome.map { reply($0.0, $0.1) })
        }
        return .later
    }

    func batch(_ request: Request) throws(ObsError) -> Answer {
        var writes: [(apply: @Sendable (Session, Request) throws(ObsError) -> WriteResult, request: Request)] = []
        for (index, item) in request.array("ops")!.enumerated() {
            do throws(ObsError) {
                guard case .object(let object) = item else { throw ObsError(.badRequest, "field 'ops' must hold request objects") }
                guard case .string(let name)? = object["op"] else { throw ObsError(.badRequest, "missing field 'op'") }
                guard let operation = Operations.byName[name] else { throw ObsError(.unknownOp, "unknown op '\(name)'") }
                guard case .write(let apply) = operation.body else { throw ObsError(.badRequest, "op '\(name)' cannot be part of a batch") }
                writes.append((apply, try Request(object, fields: operation.fields)))
            } catch {
                throw error.at(index: index)
            }
        }
        let body = { [self] () throws(ObsError) -> [WriteResult] in
            var results: [WriteResult] = []
            for (index, write) in writes.enumerated() {
                do throws(ObsError) {
                    results.append(try write.apply(self, write.request))
                } catch {
                    throw error.at(index: index)
                }
            }
            return results
        }
        func reply(_ results: [WriteResult], _ rev: UInt64, needsSync: Bool) -> Reply {
            var encoded: [UInt8] = [UInt8(ascii: "[")]
            for (index, result) in results.enumerated() {
                if index > 0 { encoded.append(UInt8(ascii: ",")) }
                encoded.append(contentsOf: LineEncoding.orderedObject(result(rev)))
            }
            encoded.append(UInt8(ascii: "]"))
            return Reply(fields: [("rev", .int(Int64(rev)))], raw: [("results", encoded)], needsSync: needsSync)
        }
        guard store.sharedLog == nil else {
            return submit(id: request.id, body) { reply($0, $1, needsSync: false) }
        }
        let (results, commit) = try store.transact(body)
        return .now(reply(results, commit.rev, needsSync: commit.persisted))
    }

    func applySet(_ request: Request) throws(ObsError) -> WriteResult {
        let key = request.string("key")!
        let ephemeral = request.bool("ephemeral") ?? false
        let ttl = request.uint("ttl_ms").map { Int64($0) }
        let changed = try store.set(key, request["value"]!, ifRev: request.uint("if_rev"), ttlMs: ttl,
                                    owner: ephemeral ? id : nil, always: request.bool("always") ?? false)
        if ephemeral { rememberEphemeral(key) }
        return { [("rev", .int(Int64($0))), ("changed", .bool(changed))] }
    }

    /// Notes a key this session set ephemeral. The names of keys it no longer owns (deleted, set
    /// by others) are forgotten whenever the set has doubled, or a client setting and deleting
    /// ephemeral keys under ever new names would grow it without bound.
    private func rememberEphemeral(_ key: String) {
        ephemeralKeys.insert(key)
        guard ephemeralKeys.count >= ephemeralPruneAt else { return }
        ephemeralKeys = ephemeralKeys.filter { store.existing($0)?.owner == id }
        ephemeralPruneAt = max(1024, ephemeralKeys.count * 2)
    }

    func applyDelete(_ request: Request) throws(ObsError) -> WriteResult {
        let deleted = try store.delete(request.string("key")!)
        return { [("rev", .int(Int64($0))), ("deleted", .bool(deleted))] }
    }

    func applyIncr(_ request: Request) throws(ObsError) -> WriteResult {
        let value = try store.incr(request.string("key")!, by: request["by"] ?? .int(1))
        return { [("value", value), ("rev", .int(Int64($0)))] }
    }

    func applyDefine(_ request: Request) throws(ObsError) -> WriteResult {
        let deps = try store.define(request.string("key")!, request.string("expr")!, replace: request.bool("replace") ?? false)
        return { [("rev", .int(Int64($0))), ("deps", .array(deps.map { .string($0) }))] }
    }

    func applyBind(_ request: Request) throws(ObsError) -> WriteResult {
        let replaced = try store.bind(from: request.string("from")!, to: request.string("to")!, map: request.string("map"),
                                      twoWay: request.bool("two_way") ?? false, unmap: request.string("unmap"))
        return { [("rev", .int(Int64($0))), ("replaced", .bool(replaced))] }
    }

    func applyUnbind(_ request: Request) throws(ObsError) -> WriteResult {
        try store.unbind(request.string("to")!)
        return { [("rev", .int(Int64($0)))] }
    }

    func publish(_ request: Request) throws(ObsError) -> Answer {
        let channel = request.string("channel")!
        let payload = request["payload"] ?? .null
        try KeyName.validate(channel, "channel")
        try store.checkValueSize(payload)
        guard let sharedLog = store.sharedLog else {
            return .now(Reply(fields: [("delivered", .int(Int64(store.watches.publish(channel, payload))))]))
        }
        // Cluster mode: through the log, to the watches of every host; the count is this host's.
        let id = request.id
        sharedLog.publish(channel: channel, payload: payload) { [weak self] outcome in
            self?.answerLater(id: id, outcome.map { Reply(fields: [("delivered", .int(Int64($0)))]) })
        }
        return .later
    }

    /// `restore`; with `more: true` a part, kept until the last part (without `more`) restores
    /// every part as one transaction.
    func restore(_ request: Request) throws(ObsError) -> Answer {
        var keys = request.array("keys")!
        var bindings = request.array("bindings") ?? []
        if request.bool("more") == true {
            try restoreParts.add(keys: keys, bindings: bindings, size: store.requestLineBytes ?? encodedSize(keys, bindings),
                                 held: &store.restorePartsBytes, limit: store.configuration.maxRestoreBytes)
            return .now(Reply(fields: [("parts", .int(Int64(restoreParts.count))), ("items", .int(Int64(restoreParts.items)))]))
        }
        if restoreParts.count > 0 {
            keys = restoreParts.keys + keys
            bindings = restoreParts.bindings + bindings
            restoreParts.drop(from: &store.restorePartsBytes)
        }
        let replace = request.bool("replace") ?? false
        let body = { [store] () throws(ObsError) in try store.restore(keys: keys, bindings: bindings, replace: replace) }
        guard store.sharedLog == nil else {
            return submit(id: request.id, body) { Reply(fields: [("rev", .int(Int64($1)))]) }
        }
        let (_, commit) = try store.transact(body)
        return .now(Reply(fields: [("rev", .int(Int64(commit.rev)))], needsSync: commit.persisted))
    }
}

/// The encoded size of a `restore` part given as values (a request that came with no line).
private func encodedSize(_ keys: [JSONValue], _ bindings: [JSONValue]) -> Int {
    var buffer = ByteBuffer()
    JSONValue.array(keys).encode(into: &buffer)
    JSONValue.array(bindings).encode(into: &buffer)
    return buffer.count
}

extension ObsError {
    /// The error of the batch operation at `index`.
    func at(index: Int) -> ObsError {
        var error = self
        error.details["index"] = .int(Int64(index))
        return error
    }
}
