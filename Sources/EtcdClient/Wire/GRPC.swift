// etcd's own API, gRPC over HTTP/2, as the client speaks it (`EtcdAPI.grpc`, the default): each
// call a POST to `/etcdserverpb.<Service>/<Method>` whose body is the request message in
// protobuf, framed as gRPC frames every message (a flag byte, 0 for uncompressed, and the
// length in four bytes, big-endian). The answer is one such message (a watch's: one after another
// on the stream), and the call's outcome comes last, in the `grpc-status` and `grpc-message`
// trailers (or in the headers, when etcd refuses before answering anything).
//
// A streaming call (Watch, LeaseKeepAlive) is sent the same way: its one request, after which
// the client's side of the stream ends. etcd keeps a watch's stream open after that; a
// keepalive answers once and ends. Field numbers are those of etcd's rpc.proto and kv.proto.

/// gRPC's frame around one message.
enum GRPCFrame {
    static let headerBytes = 5

    static func frame(_ message: [UInt8]) -> [UInt8] {
        var framed: [UInt8] = [0]
        framed.reserveCapacity(headerBytes + message.count)
        let length = UInt32(message.count)
        framed += [UInt8(length >> 24), UInt8(truncatingIfNeeded: length >> 16),
                   UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)]
        framed += message
        return framed
    }
}

/// Cuts a gRPC stream into messages as its bytes arrive; a message over `maxBytes` or a
/// compressed one (the client asks for none) ends the stream: `failure` says why, after the
/// messages before it were returned.
struct GRPCFramer {
    enum Failure: Error {
        case tooLarge
        case compressed
    }

    private let maxBytes: Int
    private var pending: [UInt8] = []
    private var start = 0
    private(set) var failure: Failure?

    init(maxBytes: Int) { self.maxBytes = maxBytes }

    /// The whole messages that `bytes` completes, without their frames (none once `failure` is set).
    mutating func append(_ bytes: UnsafeRawBufferPointer) -> [ArraySlice<UInt8>] {
        guard failure == nil else { return [] }
        pending.append(contentsOf: bytes)
        var messages: [ArraySlice<UInt8>] = []
        while pending.count - start >= GRPCFrame.headerBytes {
            guard pending[start] == 0 else {
                failure = .compressed
                break
            }
            let length = Int(pending[start + 1]) << 24 | Int(pending[start + 2]) << 16
                | Int(pending[start + 3]) << 8 | Int(pending[start + 4])
            guard length <= maxBytes else {
                failure = .tooLarge
                break
            }
            let end = start + GRPCFrame.headerBytes + length
            guard end <= pending.count else { break }
            messages.append(pending[(start + GRPCFrame.headerBytes)..<end])
            start = end
        }
        if failure != nil {
            pending = []
            start = 0
        } else if start == pending.count {
            // Every message is out: the buffer starts again (the slices returned keep their copy).
            pending.removeAll(keepingCapacity: messages.isEmpty)
            start = 0
        } else if start > 1 << 16 {
            pending.removeFirst(start)
            start = 0
        }
        return messages
    }

    /// Bytes of a message not yet whole.
    var hasPartialMessage: Bool { start < pending.count }
}

// MARK: - Requests

extension EtcdRequest {
    /// The gRPC call: the method's path and the framed request.
    var grpcCall: WireCall {
        var writer = ProtoWriter()
        let path: String
        switch self {
        case .range(let range):
            path = "/etcdserverpb.KV/Range"
            range.encode(into: &writer)
        case .put(let put):
            path = "/etcdserverpb.KV/Put"
            put.encode(into: &writer)
        case .deleteRange(let delete):
            path = "/etcdserverpb.KV/DeleteRange"
            delete.encode(into: &writer)
        case .txn(let txn):
            path = "/etcdserverpb.KV/Txn"
            txn.encode(into: &writer)
        case .compact(let revision, let physical):
            path = "/etcdserverpb.KV/Compact"
            writer.int64(1, revision)
            writer.bool(2, physical)
        case .leaseGrant(let ttl, let id):
            path = "/etcdserverpb.Lease/LeaseGrant"
            writer.int64(1, ttl)
            writer.int64(2, id)
        case .leaseKeepAlive(let id):
            path = "/etcdserverpb.Lease/LeaseKeepAlive"
            writer.int64(1, id)
        case .leaseRevoke(let id):
            path = "/etcdserverpb.Lease/LeaseRevoke"
            writer.int64(1, id)
        case .status:
            path = "/etcdserverpb.Maintenance/Status"
        }
        return WireCall(path: path, body: GRPCFrame.frame(writer.bytes), isGRPC: true)
    }

    /// Reads etcd's answer to this request (a refusal is read before, from the trailers).
    func decodeGRPC(_ message: ArraySlice<UInt8>) throws(EtcdError) -> EtcdResponse {
        switch self {
        case .range: return .range(try RangeResponse(protobuf: message))
        case .put: return .put(try PutResponse(protobuf: message))
        case .deleteRange: return .deleteRange(try DeleteRangeResponse(protobuf: message))
        case .txn: return .txn(try TxnResponse(protobuf: message))
        case .compact: return .compact(try ResponseHeader(onlyIn: message))
        case .leaseGrant:
            // LeaseGrantResponse: header 1, ID 2, TTL 3, error 4.
            var lease = LeaseResponse(header: ResponseHeader(), id: 0, ttl: 0)
            var reader = ProtoReader(message)
            var error = ""
            while let (field, value) = try reader.next() {
                switch field {
                case 1: lease.header = try ResponseHeader(protobuf: value.bytes("header"))
                case 2: lease.id = try value.int64("ID")
                case 3: lease.ttl = try value.int64("TTL")
                case 4: error = try value.string("error")
                default: break
                }
            }
            if !error.isEmpty { throw .etcd(code: 0, message: error) }
            return .leaseGrant(lease)
        case .leaseKeepAlive:
            // LeaseKeepAliveResponse: header 1, ID 2, TTL 3.
            var lease = LeaseResponse(header: ResponseHeader(), id: 0, ttl: 0)
            var reader = ProtoReader(message)
            while let (field, value) = try reader.next() {
                switch field {
                case 1: lease.header = try ResponseHeader(protobuf: value.bytes("header"))
                case 2: lease.id = try value.int64("ID")
                case 3: lease.ttl = try value.int64("TTL")
                default: break
                }
            }
            return .leaseKeepAlive(lease)
        case .leaseRevoke: return .leaseRevoke(try ResponseHeader(onlyIn: message))
        case .status: return .status(try StatusResponse(protobuf: message))
        }
    }
}

extension WatchRequest {
    /// Watch with one WatchRequest whose create_request (1) is this watch.
    var grpcCall: WireCall {
        var writer = ProtoWriter()
        writer.message(1) { create in
            // WatchCreateRequest: key 1, range_end 2, start_revision 3, progress_notify 4, prev_kv 6,
            // fragment 8.
            create.bytes(1, key)
            create.bytes(2, rangeEnd ?? [])
            create.int64(3, startRevision)
            create.bool(4, progressNotify)
            create.bool(6, prevKV)
            create.bool(8, fragment)
        }
        return WireCall(path: "/etcdserverpb.Watch/Watch", body: GRPCFrame.frame(writer.bytes), isGRPC: true)
    }
}

/// Authenticate: AuthenticateRequest name 1, password 2.
func grpcAuthenticateCall(user: String, password: String) -> WireCall {
    var writer = ProtoWriter()
    writer.string(1, user)
    writer.string(2, password)
    return WireCall(path: "/etcdserverpb.Auth/Authenticate", body: GRPCFrame.frame(writer.bytes), isGRPC: true)
}

/// The token of an AuthenticateResponse (header 1, token 2).
func grpcAuthenticationToken(_ message: ArraySlice<UInt8>) throws(EtcdError) -> String {
    var reader = ProtoReader(message)
    var token = ""
    while let (field, value) = try reader.next() {
        if field == 2 { token = try value.string("token") }
    }
    return token
}

extension RangeRequest {
    /// RangeRequest: key 1, range_end 2, limit 3, revision 4, serializable 7, keys_only 8, count_only 9.
    func encode(into writer: inout ProtoWriter) {
        writer.bytes(1, key)
        writer.bytes(2, rangeEnd ?? [])
        writer.int64(3, limit)
        writer.int64(4, revision)
        writer.bool(7, serializable)
        writer.bool(8, keysOnly)
        writer.bool(9, countOnly)
    }
}

extension PutRequest {
    /// PutRequest: key 1, value 2, lease 3, prev_kv 4.
    func encode(into writer: inout ProtoWriter) {
        writer.bytes(1, key)
        writer.bytes(2, value)
        writer.int64(3, lease)
        writer.bool(4, prevKV)
    }
}

extension DeleteRangeRequest {
    /// DeleteRangeRequest: key 1, range_end 2, prev_kv 3.
    func encode(into writer: inout ProtoWriter) {
        writer.bytes(1, key)
        writer.bytes(2, rangeEnd ?? [])
        writer.bool(3, prevKV)
    }
}

extension Compare {
    /// Compare: result 1, target 2, key 3, the compared value in the oneof 4-8, range_end 64.
    func encode(into writer: inout ProtoWriter) {
        let result: Int64 = switch self.result {
        case .equal: 0
        case .greater: 1
        case .less: 2
        case .notEqual: 3
        }
        writer.int64(1, result)
        // A oneof member is written even at its default: it says which one is set.
        switch target {
        case .version(let version):
            writer.int64(2, 0)
            writer.bytes(3, key)
            writer.oneofInt64(4, version)
        case .createRevision(let revision):
            writer.int64(2, 1)
            writer.bytes(3, key)
            writer.oneofInt64(5, revision)
        case .modRevision(let revision):
            writer.int64(2, 2)
            writer.bytes(3, key)
            writer.oneofInt64(6, revision)
        case .value(let value):
            writer.int64(2, 3)
            writer.bytes(3, key)
            writer.bytesAlways(7, value)
        case .lease(let lease):
            writer.int64(2, 4)
            writer.bytes(3, key)
            writer.oneofInt64(8, lease)
        }
        writer.bytes(64, rangeEnd ?? [])
    }
}

extension ProtoWriter {
    /// An int64 member of a oneof: written even when 0.
    mutating func oneofInt64(_ field: Int, _ value: Int64) {
        varint(UInt64(field) << 3)
        varint(UInt64(bitPattern: value))
    }
}

extension RequestOp {
    /// RequestOp: request_range 1, request_put 2, request_delete_range 3.
    func encode(into writer: inout ProtoWriter) {
        switch self {
        case .range(let range): writer.message(1) { range.encode(into: &$0) }
        case .put(let put): writer.message(2) { put.encode(into: &$0) }
        case .deleteRange(let delete): writer.message(3) { delete.encode(into: &$0) }
        }
    }
}

extension Txn {
    /// TxnRequest: compare 1, success 2, failure 3.
    func encode(into writer: inout ProtoWriter) {
        for compare in compares { writer.message(1) { compare.encode(into: &$0) } }
        for op in success { writer.message(2) { op.encode(into: &$0) } }
        for op in failure { writer.message(3) { op.encode(into: &$0) } }
    }
}

// MARK: - Answers

extension ResponseHeader {
    /// ResponseHeader: cluster_id 1, member_id 2, revision 3, raft_term 4.
    init(protobuf message: ArraySlice<UInt8>) throws(EtcdError) {
        self.init()
        var reader = ProtoReader(message)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: clusterID = try value.uint64("cluster_id")
            case 2: memberID = try value.uint64("member_id")
            case 3: revision = try value.nonNegative("revision")
            case 4: raftTerm = try value.uint64("raft_term")
            default: break
            }
        }
    }

    /// The header (field 1) of an answer that has nothing else.
    init(onlyIn message: ArraySlice<UInt8>) throws(EtcdError) {
        self.init()
        var reader = ProtoReader(message)
        while let (field, value) = try reader.next() {
            if field == 1 { self = try ResponseHeader(protobuf: value.bytes("header")) }
        }
    }
}

extension KeyValue {
    /// mvccpb.KeyValue: key 1, create_revision 2, mod_revision 3, version 4, value 5, lease 6.
    init(protobuf message: ArraySlice<UInt8>) throws(EtcdError) {
        self.init(key: [])
        var reader = ProtoReader(message)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: key = Array(try value.bytes("key"))
            case 2: createRevision = try value.nonNegative("create_revision")
            case 3: modRevision = try value.nonNegative("mod_revision")
            case 4: version = try value.nonNegative("version")
            case 5: self.value = Array(try value.bytes("value"))
            case 6: lease = try value.int64("lease")
            default: break
            }
        }
    }
}

extension RangeResponse {
    /// RangeResponse: header 1, kvs 2, more 3, count 4.
    init(protobuf message: ArraySlice<UInt8>) throws(EtcdError) {
        self.init(header: ResponseHeader())
        var reader = ProtoReader(message)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: header = try ResponseHeader(protobuf: value.bytes("header"))
            case 2: kvs.append(try KeyValue(protobuf: value.bytes("kvs")))
            case 3: more = try value.bool("more")
            case 4: count = try value.nonNegative("count")
            default: break
            }
        }
    }
}

extension PutResponse {
    /// PutResponse: header 1, prev_kv 2.
    init(protobuf message: ArraySlice<UInt8>) throws(EtcdError) {
        self.init(header: ResponseHeader())
        var reader = ProtoReader(message)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: header = try ResponseHeader(protobuf: value.bytes("header"))
            case 2: prevKV = try KeyValue(protobuf: value.bytes("prev_kv"))
            default: break
            }
        }
    }
}

extension DeleteRangeResponse {
    /// DeleteRangeResponse: header 1, deleted 2, prev_kvs 3.
    init(protobuf message: ArraySlice<UInt8>) throws(EtcdError) {
        self.init(header: ResponseHeader())
        var reader = ProtoReader(message)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: header = try ResponseHeader(protobuf: value.bytes("header"))
            case 2: deleted = try value.nonNegative("deleted")
            case 3: prevKVs.append(try KeyValue(protobuf: value.bytes("prev_kvs")))
            default: break
            }
        }
    }
}

extension TxnResponse {
    /// TxnResponse: header 1, succeeded 2, responses 3 (ResponseOp: response_range 1,
    /// response_put 2, response_delete_range 3).
    init(protobuf message: ArraySlice<UInt8>) throws(EtcdError) {
        self.init(header: ResponseHeader(), succeeded: false)
        var reader = ProtoReader(message)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: header = try ResponseHeader(protobuf: value.bytes("header"))
            case 2: succeeded = try value.bool("succeeded")
            case 3:
                var op = ProtoReader(try value.bytes("responses"))
                guard let (kind, result) = try op.next() else {
                    throw .malformedResponse("an empty transaction result")
                }
                switch kind {
                case 1: responses.append(.range(try RangeResponse(protobuf: result.bytes("response_range"))))
                case 2: responses.append(.put(try PutResponse(protobuf: result.bytes("response_put"))))
                case 3: responses.append(.deleteRange(try DeleteRangeResponse(protobuf: result.bytes("response_delete_range"))))
                default: throw .malformedResponse("a transaction result of an unknown kind (field \(kind))")
                }
            default: break
            }
        }
    }
}

extension StatusResponse {
    /// StatusResponse: header 1, version 2, dbSize 3, leader 4, raftIndex 5, raftTerm 6, errors 8.
    init(protobuf message: ArraySlice<UInt8>) throws(EtcdError) {
        self.init(header: ResponseHeader())
        var reader = ProtoReader(message)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: header = try ResponseHeader(protobuf: value.bytes("header"))
            case 2: version = try value.string("version")
            case 3: dbSize = try value.nonNegative("dbSize")
            case 4: leader = try value.uint64("leader")
            case 5: raftIndex = try value.uint64("raftIndex")
            case 6: raftTerm = try value.uint64("raftTerm")
            case 8: errors.append(try value.string("errors"))
            default: break
            }
        }
    }
}

extension WatchEvent {
    /// mvccpb.Event: type 1 (PUT 0, DELETE 1), kv 2, prev_kv 3.
    init(protobuf message: ArraySlice<UInt8>) throws(EtcdError) {
        var kind = Kind.put
        var kv: KeyValue?
        var prevKV: KeyValue?
        var reader = ProtoReader(message)
        while let (field, value) = try reader.next() {
            switch field {
            case 1:
                switch try value.uint64("type") {
                case 0: kind = .put
                case 1: kind = .delete
                case let other: throw .malformedResponse("an event of unknown type \(other)")
                }
            case 2: kv = try KeyValue(protobuf: value.bytes("kv"))
            case 3: prevKV = try KeyValue(protobuf: value.bytes("prev_kv"))
            default: break
            }
        }
        guard let kv else { throw .malformedResponse("an event without kv") }
        self.init(kind: kind, kv: kv, prevKV: prevKV)
    }
}

/// One message of a watch's stream (WatchResponse), from either API.
struct WatchMessage {
    var header = ResponseHeader()
    var created = false
    var canceled = false
    var compactRevision: Int64 = 0
    var cancelReason = ""
    /// More of this message's events follow in the next (the watch asked for fragments).
    var fragment = false
    var events: [WatchEvent] = []

    /// WatchResponse: header 1, watch_id 2, created 3, canceled 4, compact_revision 5,
    /// cancel_reason 6, fragment 7, events 11.
    init(protobuf message: ArraySlice<UInt8>) throws(EtcdError) {
        var reader = ProtoReader(message)
        while let (field, value) = try reader.next() {
            switch field {
            case 1: header = try ResponseHeader(protobuf: value.bytes("header"))
            case 3: created = try value.bool("created")
            case 4: canceled = try value.bool("canceled")
            case 5: compactRevision = try value.nonNegative("compact_revision")
            case 6: cancelReason = try value.string("cancel_reason")
            case 7: fragment = try value.bool("fragment")
            case 11: events.append(try WatchEvent(protobuf: value.bytes("events")))
            default: break
            }
        }
    }
}

/// The outcome of a gRPC call, from the `grpc-status` and `grpc-message` header or trailer lines.
struct GRPCStatus {
    var code: Int?
    var message = ""

    /// Takes one header line (as libcurl hands it over, with its CRLF) if it is one of the two.
    mutating func take(_ line: UnsafeRawBufferPointer) {
        guard line.count > 12, line[0] | 0x20 == UInt8(ascii: "g"), let colon = line.firstIndex(of: UInt8(ascii: ":"))
        else { return }
        let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
        var value = Array(line[(colon + 1)...])
        while let last = value.last, last == 13 || last == 10 || last == 32 { value.removeLast() }
        while let first = value.first, first == 32 { value.removeFirst() }
        switch name {
        case "grpc-status": code = Int(String(decoding: value, as: UTF8.self))
        case "grpc-message": message = Self.percentDecoded(value)
        default: break
        }
    }

    /// grpc-message is percent-encoded (RFC 3986's %XX) outside printable ASCII.
    private static func percentDecoded(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
               let byte = UInt8(String(decoding: bytes[(index + 1)...(index + 2)], as: UTF8.self), radix: 16) {
                out.append(byte)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
