// Requests as etcd's JSON gateway takes them: the protobuf messages in proto3's JSON mapping,
// bytes in base64, 64-bit integers as strings, fields at their default left out.
import Foundation

/// One HTTP request to the gateway: the path and the JSON body.
struct GatewayCall: Sendable {
    var path: String
    var body: [UInt8]
}

typealias JSONObject = [String: Any]

extension EtcdRequest {
    /// The gateway call.
    var call: GatewayCall {
        switch self {
        case .range(let range): GatewayCall(path: "/v3/kv/range", body: encodeJSON(range.json))
        case .put(let put): GatewayCall(path: "/v3/kv/put", body: encodeJSON(put.json))
        case .deleteRange(let delete): GatewayCall(path: "/v3/kv/deleterange", body: encodeJSON(delete.json))
        case .txn(let txn): GatewayCall(path: "/v3/kv/txn", body: encodeJSON(txn.json))
        case .compact(let revision, let physical):
            GatewayCall(path: "/v3/kv/compaction",
                        body: encodeJSON(["revision": String(revision), "physical": physical]))
        case .leaseGrant(let ttl, let id):
            GatewayCall(path: "/v3/lease/grant", body: encodeJSON(["TTL": String(ttl), "ID": String(id)]))
        case .leaseKeepAlive(let id): GatewayCall(path: "/v3/lease/keepalive", body: encodeJSON(["ID": String(id)]))
        case .leaseRevoke(let id): GatewayCall(path: "/v3/lease/revoke", body: encodeJSON(["ID": String(id)]))
        case .status: GatewayCall(path: "/v3/maintenance/status", body: Array("{}".utf8))
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
    var call: GatewayCall {
        var create: JSONObject = ["key": base64(key)]
        if let rangeEnd { create["range_end"] = base64(rangeEnd) }
        if startRevision != 0 { create["start_revision"] = String(startRevision) }
        if prevKV { create["prev_kv"] = true }
        if progressNotify { create["progress_notify"] = true }
        return GatewayCall(path: "/v3/watch", body: encodeJSON(["create_request": create]))
    }
}

func authenticateCall(user: String, password: String) -> GatewayCall {
    GatewayCall(path: "/v3/auth/authenticate", body: encodeJSON(["name": user, "password": password]))
}

extension RangeRequest {
    var json: JSONObject {
        var object: JSONObject = ["key": base64(key)]
        if let rangeEnd { object["range_end"] = base64(rangeEnd) }
        if revision != 0 { object["revision"] = String(revision) }
        if limit != 0 { object["limit"] = String(limit) }
        if countOnly { object["count_only"] = true }
        if keysOnly { object["keys_only"] = true }
        if serializable { object["serializable"] = true }
        return object
    }
}

extension PutRequest {
    var json: JSONObject {
        var object: JSONObject = ["key": base64(key), "value": base64(value)]
        if lease != 0 { object["lease"] = String(lease) }
        if prevKV { object["prev_kv"] = true }
        return object
    }
}

extension DeleteRangeRequest {
    var json: JSONObject {
        var object: JSONObject = ["key": base64(key)]
        if let rangeEnd { object["range_end"] = base64(rangeEnd) }
        if prevKV { object["prev_kv"] = true }
        return object
    }
}

extension Compare {
    var json: JSONObject {
        var object: JSONObject = ["key": base64(key), "result": result.rawValue]
        if let rangeEnd { object["range_end"] = base64(rangeEnd) }
        // The compared value is a oneof field named after the target.
        switch target {
        case .version(let version):
            object["target"] = "VERSION"
            object["version"] = String(version)
        case .createRevision(let revision):
            object["target"] = "CREATE"
            object["create_revision"] = String(revision)
        case .modRevision(let revision):
            object["target"] = "MOD"
            object["mod_revision"] = String(revision)
        case .value(let value):
            object["target"] = "VALUE"
            object["value"] = base64(value)
        case .lease(let lease):
            object["target"] = "LEASE"
            object["lease"] = String(lease)
        }
        return object
    }
}

extension RequestOp {
    var json: JSONObject {
        switch self {
        case .range(let range): ["request_range": range.json]
        case .put(let put): ["request_put": put.json]
        case .deleteRange(let delete): ["request_delete_range": delete.json]
        }
    }
}

extension Txn {
    var json: JSONObject {
        ["compare": compares.map(\.json), "success": success.map(\.json), "failure": failure.map(\.json)]
    }
}

private func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }

private func encodeJSON(_ object: JSONObject) -> [UInt8] {
    // Only strings, booleans, arrays and objects are put in: serialization cannot fail.
    guard let data = try? JSONSerialization.data(withJSONObject: object) else {
        preconditionFailure("a gateway request that JSONSerialization refuses: \(object)")
    }
    return [UInt8](data)
}
