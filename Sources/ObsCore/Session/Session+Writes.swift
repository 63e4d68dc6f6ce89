/// The write operations of the table: each runs as one store transaction.
extension Session {
    typealias ResultBuilder = (UInt64) -> [(String, JSONValue)]

    func write(_ request: Request, batchable operation: String) throws(ObsError) -> Reply {
        let (build, result) = try store.transact { () throws(ObsError) in try apply(operation, request) }
        return Reply(fields: build(result.rev), needsSync: result.persisted)
    }

    func batch(_ request: Request) throws(ObsError) -> Reply {
        var requests: [(String, Request)] = []
        for (index, item) in request.array("ops")!.enumerated() {
            do throws(ObsError) {
                guard case .object(let object) = item else { throw ObsError(.badRequest, "field 'ops' must hold request objects") }
                guard case .string(let name)? = object["op"] else { throw ObsError(.badRequest, "missing field 'op'") }
                guard let operation = Operations.byName[name] else { throw ObsError(.unknownOp, "unknown op '\(name)'") }
                guard Operations.batchable.contains(name) else { throw ObsError(.badRequest, "op '\(name)' cannot be part of a batch") }
                requests.append((name, try Request(object, fields: operation.fields)))
            } catch {
                throw error.at(index: index)
            }
        }
        let (builders, result) = try store.transact { () throws(ObsError) in
            var builders: [ResultBuilder] = []
            for (index, (name, request)) in requests.enumerated() {
                do throws(ObsError) {
                    builders.append(try apply(name, request))
                } catch {
                    throw error.at(index: index)
                }
            }
            return builders
        }
        var results: [UInt8] = [UInt8(ascii: "[")]
        for (index, build) in builders.enumerated() {
            if index > 0 { results.append(UInt8(ascii: ",")) }
            results.append(contentsOf: LineEncoding.orderedObject(build(result.rev)))
        }
        results.append(UInt8(ascii: "]"))
        return Reply(fields: [("rev", .int(Int64(result.rev)))], raw: [("results", results)], needsSync: result.persisted)
    }

    /// Applies one write inside the open transaction; the result's fields, given the revision.
    private func apply(_ operation: String, _ request: Request) throws(ObsError) -> ResultBuilder {
        switch operation {
        case "set":
            let key = request.string("key")!
            let ephemeral = request.bool("ephemeral") ?? false
            let ttl = request.uint("ttl_ms").map { Int64($0) }
            let changed = try store.set(key, request["value"]!, ifRev: request.uint("if_rev"), ttlMs: ttl,
                                        owner: ephemeral ? id : nil, always: request.bool("always") ?? false)
            if ephemeral { ephemeralKeys.insert(key) }
            return { [("rev", .int(Int64($0))), ("changed", .bool(changed))] }
        case "delete":
            let deleted = try store.delete(request.string("key")!)
            return { [("rev", .int(Int64($0))), ("deleted", .bool(deleted))] }
        case "incr":
            let value = try store.incr(request.string("key")!, by: request["by"] ?? .int(1))
            return { [("value", value), ("rev", .int(Int64($0)))] }
        case "define":
            let deps = try store.define(request.string("key")!, request.string("expr")!, replace: request.bool("replace") ?? false)
            return { [("rev", .int(Int64($0))), ("deps", .array(deps.map { .string($0) }))] }
        case "bind":
            let replaced = try store.bind(from: request.string("from")!, to: request.string("to")!, map: request.string("map"),
                                          twoWay: request.bool("two_way") ?? false, unmap: request.string("unmap"))
            return { [("rev", .int(Int64($0))), ("replaced", .bool(replaced))] }
        case "unbind":
            try store.unbind(request.string("to")!)
            return { [("rev", .int(Int64($0)))] }
        default:
            throw ObsError(.internal, "no write handler for '\(operation)'")
        }
    }

    func publish(_ request: Request) throws(ObsError) -> Reply {
        let delivered = try store.publish(request.string("channel")!, request["payload"] ?? .null)
        return Reply(fields: [("delivered", .int(Int64(delivered)))])
    }

    func restore(_ request: Request) throws(ObsError) -> Reply {
        let keys = request.array("keys")!
        let bindings = request.array("bindings") ?? []
        let replace = request.bool("replace") ?? false
        let (_, result) = try store.transact { () throws(ObsError) in
            try store.restore(keys: keys, bindings: bindings, replace: replace)
        }
        return Reply(fields: [("rev", .int(Int64(result.rev)))], needsSync: result.persisted)
    }
}

extension ObsError {
    /// The error of the batch operation at `index`.
    func at(index: Int) -> ObsError {
        var error = self
        error.details["index"] = .int(Int64(index))
        return error
    }
}
