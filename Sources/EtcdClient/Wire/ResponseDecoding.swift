// Answers as etcd's JSON gateway sends them. The gateway leaves out every field at its default
// (no `kvs` when none, no `succeeded` when false, no `count` when 0), sends 64-bit integers as
// strings and bytes as base64, and names some fields in camelCase (`dbSize`) and most in
// snake_case (`mod_revision`): every reader below takes what is missing as the default.
import ObsCore

/// A JSON object of a gateway answer, read field by field; a field of the wrong type is a
/// `malformedResponse` naming it.
struct GatewayObject {
    let fields: [String: JSONValue]

    init(_ fields: [String: JSONValue]) { self.fields = fields }

    /// Parses one JSON object (with ObsCore's parser: Foundation's bridged every value).
    init(parsing bytes: [UInt8]) throws(EtcdError) {
        guard case .object(let fields)? = try? JSONValue.parse(bytes) else {
            throw .malformedResponse("not a JSON object: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
        }
        self.fields = fields
    }

    func has(_ name: String) -> Bool { fields[name] != nil }

    func object(_ name: String) throws(EtcdError) -> GatewayObject? {
        guard let value = fields[name] else { return nil }
        guard case .object(let object) = value else { throw .malformedResponse("\(name) is not an object") }
        return GatewayObject(object)
    }

    func objects(_ name: String) throws(EtcdError) -> [GatewayObject] {
        guard let value = fields[name] else { return [] }
        guard case .array(let array) = value else { throw .malformedResponse("\(name) is not an array") }
        var objects: [GatewayObject] = []
        objects.reserveCapacity(array.count)
        for element in array {
            guard case .object(let object) = element else { throw .malformedResponse("\(name) holds a non-object") }
            objects.append(GatewayObject(object))
        }
        return objects
    }

    func string(_ name: String) throws(EtcdError) -> String? {
        guard let value = fields[name] else { return nil }
        guard case .string(let string) = value else { throw .malformedResponse("\(name) is not a string") }
        return string
    }

    func strings(_ name: String) throws(EtcdError) -> [String] {
        guard let value = fields[name] else { return [] }
        guard case .array(let array) = value else { throw .malformedResponse("\(name) is not an array of strings") }
        var strings: [String] = []
        for element in array {
            guard case .string(let string) = element else { throw .malformedResponse("\(name) is not an array of strings") }
            strings.append(string)
        }
        return strings
    }

    func bool(_ name: String) throws(EtcdError) -> Bool {
        guard let value = fields[name] else { return false }
        guard case .bool(let bool) = value else { throw .malformedResponse("\(name) is not a boolean") }
        return bool
    }

    /// A 64-bit integer: a string of digits (proto3's JSON mapping) or a JSON number.
    func int64(_ name: String) throws(EtcdError) -> Int64 {
        switch fields[name] {
        case nil: return 0
        case .string(let string)?: if let number = Int64(string) { return number }
        case .int(let number)?: return number
        default: break
        }
        throw .malformedResponse("\(name) is not a 64-bit integer")
    }

    /// A revision, version or count, which etcd never sends negative (obsd takes them as
    /// unsigned): a negative one is a malformed response.
    func nonNegative(_ name: String) throws(EtcdError) -> Int64 {
        let value = try int64(name)
        guard value >= 0 else { throw .malformedResponse("\(name) is negative (\(value))") }
        return value
    }

    func uint64(_ name: String) throws(EtcdError) -> UInt64 {
        switch fields[name] {
        case nil: return 0
        case .string(let string)?: if let number = UInt64(string) { return number }
        case .int(let number)? where number >= 0: return UInt64(number)
        default: break
        }
        throw .malformedResponse("\(name) is not an unsigned 64-bit integer")
    }

    func bytes(_ name: String) throws(EtcdError) -> [UInt8] {
        guard let string = try string(name) else { return [] }
        guard let bytes = Base64.decode(string) else { throw .malformedResponse("\(name) is not base64") }
        return bytes
    }
}

extension ResponseHeader {
    init(_ object: GatewayObject?) throws(EtcdError) {
        guard let object else { throw .malformedResponse("no header") }
        self.init(clusterID: try object.uint64("cluster_id"), memberID: try object.uint64("member_id"),
                  revision: try object.nonNegative("revision"), raftTerm: try object.uint64("raft_term"))
    }
}

extension KeyValue {
    init(_ object: GatewayObject) throws(EtcdError) {
        self.init(key: try object.bytes("key"), value: try object.bytes("value"),
                  createRevision: try object.nonNegative("create_revision"), modRevision: try object.nonNegative("mod_revision"),
                  version: try object.nonNegative("version"), lease: try object.int64("lease"))
    }
}

extension RangeResponse {
    init(_ object: GatewayObject) throws(EtcdError) {
        var kvs: [KeyValue] = []
        for kv in try object.objects("kvs") { kvs.append(try KeyValue(kv)) }
        self.init(header: try ResponseHeader(object.object("header")), kvs: kvs, more: try object.bool("more"),
                  count: try object.nonNegative("count"))
    }
}

extension PutResponse {
    init(_ object: GatewayObject) throws(EtcdError) {
        self.init(header: try ResponseHeader(object.object("header")),
                  prevKV: try object.object("prev_kv").map { kv throws(EtcdError) in try KeyValue(kv) })
    }
}

extension DeleteRangeResponse {
    init(_ object: GatewayObject) throws(EtcdError) {
        var prevKVs: [KeyValue] = []
        for kv in try object.objects("prev_kvs") { prevKVs.append(try KeyValue(kv)) }
        self.init(header: try ResponseHeader(object.object("header")), deleted: try object.nonNegative("deleted"),
                  prevKVs: prevKVs)
    }
}

extension TxnResponse {
    init(_ object: GatewayObject) throws(EtcdError) {
        var responses: [ResponseOp] = []
        for op in try object.objects("responses") {
            if let range = try op.object("response_range") {
                responses.append(.range(try RangeResponse(range)))
            } else if let put = try op.object("response_put") {
                responses.append(.put(try PutResponse(put)))
            } else if let delete = try op.object("response_delete_range") {
                responses.append(.deleteRange(try DeleteRangeResponse(delete)))
            } else {
                throw .malformedResponse("a transaction result of an unknown kind: \(op.fields.keys.sorted())")
            }
        }
        self.init(header: try ResponseHeader(object.object("header")), succeeded: try object.bool("succeeded"),
                  responses: responses)
    }
}

extension LeaseResponse {
    init(_ object: GatewayObject) throws(EtcdError) {
        self.init(header: try ResponseHeader(object.object("header")), id: try object.int64("ID"),
                  ttl: try object.int64("TTL"))
    }
}

extension StatusResponse {
    init(_ object: GatewayObject) throws(EtcdError) {
        self.init(header: try ResponseHeader(object.object("header")), version: try object.string("version") ?? "",
                  dbSize: try object.int64(object.has("dbSize") ? "dbSize" : "db_size"),
                  leader: try object.uint64("leader"),
                  raftIndex: try object.uint64(object.has("raftIndex") ? "raftIndex" : "raft_index"),
                  raftTerm: try object.uint64(object.has("raftTerm") ? "raftTerm" : "raft_term"),
                  errors: try object.strings("errors"))
    }
}

extension WatchEvent {
    init(_ object: GatewayObject) throws(EtcdError) {
        // The event type is an enum whose default, PUT, is left out.
        let kind: Kind
        switch try object.string("type") {
        case nil, "PUT": kind = .put
        case "DELETE": kind = .delete
        case let other?: throw .malformedResponse("an event of unknown type \(other)")
        }
        guard let kv = try object.object("kv") else { throw .malformedResponse("an event without kv") }
        self.init(kind: kind, kv: try KeyValue(kv),
                  prevKV: try object.object("prev_kv").map { kv throws(EtcdError) in try KeyValue(kv) })
    }
}

extension EtcdRequest {
    /// Reads the gateway's answer to this request (an error answer is read before, by `gatewayError`).
    func decodeResponse(_ object: GatewayObject) throws(EtcdError) -> EtcdResponse {
        switch self {
        case .range: return .range(try RangeResponse(object))
        case .put: return .put(try PutResponse(object))
        case .deleteRange: return .deleteRange(try DeleteRangeResponse(object))
        case .txn: return .txn(try TxnResponse(object))
        case .compact: return .compact(try ResponseHeader(object.object("header")))
        case .leaseGrant:
            if let error = try object.string("error"), !error.isEmpty { throw .etcd(code: 0, message: error) }
            return .leaseGrant(try LeaseResponse(object))
        case .leaseKeepAlive:
            // LeaseKeepAlive is a stream in gRPC: the gateway wraps its one answer in "result".
            guard let result = try object.object("result") else { throw .malformedResponse("a keepalive without result") }
            return .leaseKeepAlive(try LeaseResponse(result))
        case .leaseRevoke: return .leaseRevoke(try ResponseHeader(object.object("header")))
        case .status: return .status(try StatusResponse(object))
        }
    }
}

extension WatchMessage {
    /// The gateway's `result` of a watch message.
    init(_ result: GatewayObject) throws(EtcdError) {
        header = try ResponseHeader(result.object("header"))
        created = try result.bool("created")
        canceled = try result.bool("canceled")
        compactRevision = try result.nonNegative("compact_revision")
        cancelReason = try result.string("cancel_reason") ?? ""
        fragment = try result.bool("fragment")
        for event in try result.objects("events") { events.append(try WatchEvent(event)) }
    }
}
