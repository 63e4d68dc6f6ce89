// Requests as etcd's JSON gateway takes them: the protobuf messages in proto3's JSON mapping,
// bytes in base64, 64-bit integers as strings, fields at their default left out. Built as
// ObsCore's JSON values and encoded by its encoder (Foundation's JSONSerialization cost a third
// of a cluster host's CPU, bridging every dictionary to Objective-C types and back).
import ObsCore

/// One HTTP request: the path and the body (JSON for the gateway, a framed protobuf message for
/// gRPC: GRPC.swift).
struct WireCall: Sendable {
    var path: String
    var body: [UInt8]
    /// A call of etcd's gRPC API rather than of its gateway.
    var isGRPC = false
}

typealias JSONObject = [String: JSONValue]

extension EtcdRequest {
    /// The call in `api`.
    func call(_ api: EtcdAPI) -> WireCall { api == .grpc ? grpcCall : gatewayCall }

    /// The gateway call.
    var gatewayCall: WireCall {
        switch self {
        case .range(let range): WireCall(path: "/v3/kv/range", body: encodeJSON(range.json))
        case .put(let put): WireCall(path: "/v3/kv/put", body: encodeJSON(put.json))
        case .deleteRange(let delete): WireCall(path: "/v3/kv/deleterange", body: encodeJSON(delete.json))
        case .txn(let txn): WireCall(path: "/v3/kv/txn", body: encodeJSON(txn.json))
        case .compact(let revision, let physical):
            WireCall(path: "/v3/kv/compaction",
                        body: encodeJSON(["revision": .string(String(revision)), "physical": .bool(physical)]))
        case .leaseGrant(let ttl, let id):
            WireCall(path: "/v3/lease/grant", body: encodeJSON(["TTL": .string(String(ttl)), "ID": .string(String(id))]))
        case .leaseKeepAlive(let id): WireCall(path: "/v3/lease/keepalive", body: encodeJSON(["ID": .string(String(id))]))
        case .leaseRevoke(let id): WireCall(path: "/v3/lease/revoke", body: encodeJSON(["ID": .string(String(id))]))
        case .status: WireCall(path: "/v3/maintenance/status", body: Array("{}".utf8))
        }
    }

    /// Reads, and writes whose second application changes nothing, may be sent again when the
    /// first answer was lost; other writes only when they cannot have reached etcd.
    var isIdempotent: Bool {
        switch self {
        case .range, .status, .leaseKeepAlive, .leaseRevoke, .compact: true
        case .put, .deleteRange, .txn, .leaseGrant: false
        }
    }
}

extension WatchRequest {
    /// The call in `api`.
    func call(_ api: EtcdAPI) -> WireCall { api == .grpc ? grpcCall : gatewayCall }

    var gatewayCall: WireCall {
        var create: JSONObject = ["key": base64(key)]
        if let rangeEnd { create["range_end"] = base64(rangeEnd) }
        if startRevision != 0 { create["start_revision"] = .string(String(startRevision)) }
        if prevKV { create["prev_kv"] = .bool(true) }
        if progressNotify { create["progress_notify"] = .bool(true) }
        if fragment { create["fragment"] = .bool(true) }
        return WireCall(path: "/v3/watch", body: encodeJSON(["create_request": .object(create)]))
    }
}

func authenticateCall(user: String, password: String) -> WireCall {
    WireCall(path: "/v3/auth/authenticate", body: encodeJSON(["name": .string(user), "password": .string(password)]))
}

extension RangeRequest {
    var json: JSONObject {
        var object: JSONObject = ["key": base64(key)]
        if let rangeEnd { object["range_end"] = base64(rangeEnd) }
        if revision != 0 { object["revision"] = .string(String(revision)) }
        if limit != 0 { object["limit"] = .string(String(limit)) }
        if countOnly { object["count_only"] = .bool(true) }
        if keysOnly { object["keys_only"] = .bool(true) }
        if serializable { object["serializable"] = .bool(true) }
        return object
    }
}

extension PutRequest {
    var json: JSONObject {
        var object: JSONObject = ["key": base64(key), "value": base64(value)]
        if lease != 0 { object["lease"] = .string(String(lease)) }
        if prevKV { object["prev_kv"] = .bool(true) }
        return object
    }
}

extension DeleteRangeRequest {
    var json: JSONObject {
        var object: JSONObject = ["key": base64(key)]
        if let rangeEnd { object["range_end"] = base64(rangeEnd) }
        if prevKV { object["prev_kv"] = .bool(true) }
        return object
    }
}

extension Compare {
    var json: JSONObject {
        var object: JSONObject = ["key": base64(key), "result": .string(result.rawValue)]
        if let rangeEnd { object["range_end"] = base64(rangeEnd) }
        // The compared value is a oneof field named after the target.
        switch target {
        case .version(let version):
            object["target"] = .string("VERSION")
            object["version"] = .string(String(version))
        case .createRevision(let revision):
            object["target"] = .string("CREATE")
            object["create_revision"] = .string(String(revision))
        case .modRevision(let revision):
            object["target"] = .string("MOD")
            object["mod_revision"] = .string(String(revision))
        case .value(let value):
            object["target"] = .string("VALUE")
            object["value"] = base64(value)
        case .lease(let lease):
            object["target"] = .string("LEASE")
            object["lease"] = .string(String(lease))
        }
        return object
    }
}

extension RequestOp {
    var json: JSONObject {
        switch self {
        case .range(let range): ["request_range": .object(range.json)]
        case .put(let put): ["request_put": .object(put.json)]
        case .deleteRange(let delete): ["request_delete_range": .object(delete.json)]
        }
    }
}

extension Txn {
    var json: JSONObject {
        ["compare": .array(compares.map { .object($0.json) }), "success": .array(success.map { .object($0.json) }),
         "failure": .array(failure.map { .object($0.json) })]
    }
}

private func base64(_ bytes: [UInt8]) -> JSONValue { .string(Base64.encode(bytes)) }

private func encodeJSON(_ object: JSONObject) -> [UInt8] {
    var bytes: [UInt8] = []
    JSONValue.object(object).encode(into: &bytes)
    return bytes
}
