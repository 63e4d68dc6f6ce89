// etcd's gRPC messages as the client writes and reads them, without a cluster: requests byte for
// byte as protobuf encodes them, answers built field by field as etcd sends them (with fields the
// client does not know, which it must skip), damaged messages refused rather than trusted, the
// stream cut into frames however its bytes arrive, and the call's status from its trailers.
@testable import EtcdClient
import XCTest

final class GRPCWireTests: XCTestCase {
    // MARK: - Requests

    func test_put_isEncodedAsProtobufInAGRPCFrame() {
        let call = EtcdRequest.put(PutRequest(key: Array("a".utf8), value: Array("xyz".utf8), lease: 300)).grpcCall
        XCTAssertEqual(call.path, "/etcdserverpb.KV/Put")
        XCTAssertTrue(call.isGRPC)
        // key 1 "a", value 2 "xyz", lease 3 300 (varint ac 02); prev_kv left out at false.
        let message: [UInt8] = [0x0a, 0x01, 0x61, 0x12, 0x03, 0x78, 0x79, 0x7a, 0x18, 0xac, 0x02]
        XCTAssertEqual(call.body, [0, 0, 0, 0, UInt8(message.count)] + message)
        // Fragments only when asked for: etcd 3.4 makes them slowly (WatchRequest.fragment).
        XCTAssertFalse(WatchRequest.prefix(Array("/p/".utf8)).fragment)
    }

    func test_compare_writesItsTargetValue_evenAtZero() {
        // A compare of version 0 ("the key does not exist") must say which oneof member it sets.
        var writer = ProtoWriter()
        Compare(key: Array("k".utf8), .equal, .version(0)).encode(into: &writer)
        // result EQUAL (0) and target VERSION (0) are defaults and left out; key 3; version 4 = 0.
        XCTAssertEqual(writer.bytes, [0x1a, 0x01, 0x6b, 0x20, 0x00])

        var value = ProtoWriter()
        Compare(key: Array("k".utf8), .notEqual, .value([]), rangeEnd: [0]).encode(into: &value)
        // result 3, target VALUE 3, key, value 7 empty but present, range_end 64 (tag 0x82 0x04).
        XCTAssertEqual(value.bytes, [0x08, 0x03, 0x10, 0x03, 0x1a, 0x01, 0x6b, 0x3a, 0x00, 0x82, 0x04, 0x01, 0x00])
    }

    func test_negativeIntegers_takeTenBytes_andComeBack() throws {
        var writer = ProtoWriter()
        writer.int64(3, -1)
        XCTAssertEqual(writer.bytes, [0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
        var reader = ProtoReader(writer.bytes)
        let field = try XCTUnwrap(reader.next())
        XCTAssertEqual(field.field, 3)
        XCTAssertEqual(try field.value.int64("x"), -1)
        XCTAssertNil(try reader.next())
    }

    func test_watch_sendsOneCreateRequest() {
        let call = WatchRequest(key: Array("/p/".utf8), rangeEnd: Array("/p0".utf8), startRevision: 5, prevKV: true,
                                progressNotify: true, fragment: true).grpcCall
        XCTAssertEqual(call.path, "/etcdserverpb.Watch/Watch")
        let create: [UInt8] = [0x0a, 0x03] + Array("/p/".utf8) + [0x12, 0x03] + Array("/p0".utf8)
            + [0x18, 0x05, 0x20, 0x01, 0x30, 0x01, 0x40, 0x01]
        let message: [UInt8] = [0x0a, UInt8(create.count)] + create
        XCTAssertEqual(call.body, [0, 0, 0, 0, UInt8(message.count)] + message)
    }

    /// Fragments are joined at revision boundaries: a revision split over two fragments is
    /// handed over whole, once, with the next fragment.
    func test_watchFragments_areJoinedAtRevisionBoundaries() {
        func events(_ revisions: [Int64]) -> [WatchEvent] {
            revisions.enumerated().map { WatchEvent(kind: .put, kv: KeyValue(key: Array("k\($0.offset)".utf8), modRevision: $0.element)) }
        }
        let first = events([5, 5, 6, 7, 7])
        var (complete, held) = joinFragment(held: [], first, more: true)
        XCTAssertEqual(complete.map(\.revision), [5, 5, 6])
        XCTAssertEqual(held.map(\.revision), [7, 7])
        let second = events([7, 8])
        (complete, held) = joinFragment(held: held, second, more: true)
        XCTAssertEqual(complete.map(\.revision), [7, 7, 7])
        XCTAssertEqual(held.map(\.revision), [8])
        (complete, held) = joinFragment(held: held, events([8, 8]), more: true)
        XCTAssertEqual(complete, [], "a revision still going on is all held")
        XCTAssertEqual(held.map(\.revision), [8, 8, 8])
        (complete, held) = joinFragment(held: held, events([8, 9]), more: false)
        XCTAssertEqual(complete.map(\.revision), [8, 8, 8, 8, 9], "the last fragment hands over everything")
        XCTAssertEqual(held, [])
        XCTAssertEqual(joinFragment(held: [], first, more: false).complete, first, "no fragment: as it came")
    }

    // MARK: - Answers

    private func header(_ writer: inout ProtoWriter, revision: Int64) {
        writer.message(1) { header in
            header.int64(1, 0x1234)
            header.int64(2, 7)
            header.int64(3, revision)
            header.int64(4, 2)
        }
    }

    private func keyValue(_ writer: inout ProtoWriter, field: Int, key: String, value: String, modRevision: Int64) {
        writer.message(field) { kv in
            kv.bytes(1, Array(key.utf8))
            kv.int64(2, 4)
            kv.int64(3, modRevision)
            kv.int64(4, 3)
            kv.bytes(5, Array(value.utf8))
            kv.int64(6, -5)
        }
    }

    /// Fields etcd may add in later versions: a varint, a fixed64, a fixed32 and bytes, numbered
    /// beyond what the client reads.
    private func unknownFields(_ writer: inout ProtoWriter) {
        writer.int64(90, 12345)
        writer.varint(91 << 3 | 1)
        writer.bytesRaw([1, 2, 3, 4, 5, 6, 7, 8])
        writer.varint(92 << 3 | 5)
        writer.bytesRaw([1, 2, 3, 4])
        writer.bytes(93, [9, 9, 9])
    }

    func test_range_readsKeysAndSkipsUnknownFields() throws {
        var writer = ProtoWriter()
        header(&writer, revision: 42)
        unknownFields(&writer)
        keyValue(&writer, field: 2, key: "a", value: "1", modRevision: 40)
        keyValue(&writer, field: 2, key: "b", value: "", modRevision: 41)
        writer.bool(3, true)
        writer.int64(4, 9)
        guard case .range(let range) = try EtcdRequest.range(RangeRequest(key: [])).decodeGRPC(writer.bytes[...]) else {
            return XCTFail("not a range")
        }
        XCTAssertEqual(range.header, ResponseHeader(clusterID: 0x1234, memberID: 7, revision: 42, raftTerm: 2))
        XCTAssertEqual(range.kvs, [
            KeyValue(key: Array("a".utf8), value: Array("1".utf8), createRevision: 4, modRevision: 40, version: 3, lease: -5),
            KeyValue(key: Array("b".utf8), value: [], createRevision: 4, modRevision: 41, version: 3, lease: -5),
        ])
        XCTAssertTrue(range.more)
        XCTAssertEqual(range.count, 9)
    }

    func test_txn_readsEachKindOfResult_inOrder() throws {
        var writer = ProtoWriter()
        header(&writer, revision: 8)
        writer.bool(2, true)
        writer.message(3) { op in
            op.message(1) { range in
                self.header(&range, revision: 8)
                self.keyValue(&range, field: 2, key: "k", value: "v", modRevision: 8)
                range.int64(4, 1)
            }
        }
        writer.message(3) { op in op.message(2) { put in self.header(&put, revision: 8) } }
        writer.message(3) { op in
            op.message(3) { delete in
                self.header(&delete, revision: 8)
                delete.int64(2, 2)
            }
        }
        guard case .txn(let txn) = try EtcdRequest.txn(Txn()).decodeGRPC(writer.bytes[...]) else { return XCTFail("not a txn") }
        XCTAssertTrue(txn.succeeded)
        XCTAssertEqual(txn.header.revision, 8)
        XCTAssertEqual(txn.responses.count, 3)
        guard case .range(let range) = txn.responses[0], case .put = txn.responses[1],
              case .deleteRange(let delete) = txn.responses[2] else { return XCTFail("\(txn.responses)") }
        XCTAssertEqual(range.kvs.map(\.value), [Array("v".utf8)])
        XCTAssertEqual(delete.deleted, 2)

        var unknownKind = ProtoWriter()
        unknownKind.message(3) { op in op.message(4) { _ in } }
        XCTAssertThrowsError(try EtcdRequest.txn(Txn()).decodeGRPC(unknownKind.bytes[...]))
    }

    func test_watchMessages_created_events_canceled() throws {
        var created = ProtoWriter()
        header(&created, revision: 10)
        created.bool(3, true)
        let first = try WatchMessage(protobuf: created.bytes[...])
        XCTAssertTrue(first.created)
        XCTAssertEqual(first.header.revision, 10)

        var events = ProtoWriter()
        header(&events, revision: 12)
        events.message(11) { event in self.keyValue(&event, field: 2, key: "a", value: "new", modRevision: 11) }
        events.message(11) { event in
            event.int64(1, 1)
            event.message(2) { kv in
                kv.bytes(1, Array("b".utf8))
                kv.int64(3, 12)
            }
            self.keyValue(&event, field: 3, key: "b", value: "old", modRevision: 5)
        }
        unknownFields(&events)
        let second = try WatchMessage(protobuf: events.bytes[...])
        XCTAssertEqual(second.events.map(\.kind), [.put, .delete])
        XCTAssertEqual(second.events.map(\.revision), [11, 12])
        XCTAssertEqual(second.events[1].prevKV?.value, Array("old".utf8))
        XCTAssertFalse(second.created || second.canceled || second.fragment)
        events.bool(7, true)
        XCTAssertTrue(try WatchMessage(protobuf: events.bytes[...]).fragment)

        var canceled = ProtoWriter()
        header(&canceled, revision: 12)
        canceled.bool(4, true)
        canceled.int64(5, 9)
        canceled.string(6, "mvcc: required revision has been compacted")
        let third = try WatchMessage(protobuf: canceled.bytes[...])
        XCTAssertTrue(third.canceled)
        XCTAssertEqual(third.compactRevision, 9)
        XCTAssertEqual(third.cancelReason, "mvcc: required revision has been compacted")

        var badType = ProtoWriter()
        badType.message(11) { event in
            event.int64(1, 7)
            self.keyValue(&event, field: 2, key: "a", value: "", modRevision: 1)
        }
        XCTAssertThrowsError(try WatchMessage(protobuf: badType.bytes[...]))
        var noKV = ProtoWriter()
        noKV.message(11) { event in event.int64(1, 1) }
        XCTAssertThrowsError(try WatchMessage(protobuf: noKV.bytes[...]))
    }

    func test_leaseGrantError_andStatus() throws {
        var grant = ProtoWriter()
        header(&grant, revision: 3)
        grant.int64(2, 99)
        grant.int64(3, 10)
        guard case .leaseGrant(let lease) = try EtcdRequest.leaseGrant(ttl: 10).decodeGRPC(grant.bytes[...]) else {
            return XCTFail("not a grant")
        }
        XCTAssertEqual(lease.id, 99)
        XCTAssertEqual(lease.ttl, 10)
        grant.string(4, "lease already exists")
        XCTAssertThrowsError(try EtcdRequest.leaseGrant(ttl: 10).decodeGRPC(grant.bytes[...])) { error in
            XCTAssertEqual(error as? EtcdError, .etcd(code: 0, message: "lease already exists"))
        }

        var status = ProtoWriter()
        header(&status, revision: 3)
        status.string(2, "3.4.23")
        status.int64(3, 20480)
        status.int64(4, 7)
        status.int64(5, 11)
        status.int64(6, 2)
        status.int64(7, 11)
        status.string(8, "etcdserver: no leader")
        status.string(8, "NOSPACE")
        status.int64(9, 16384)
        status.bool(10, true)
        guard case .status(let answer) = try EtcdRequest.status.decodeGRPC(status.bytes[...]) else { return XCTFail("not a status") }
        XCTAssertEqual(answer.version, "3.4.23")
        XCTAssertEqual(answer.dbSize, 20480)
        XCTAssertEqual(answer.leader, 7)
        XCTAssertEqual(answer.raftIndex, 11)
        XCTAssertEqual(answer.raftTerm, 2)
        XCTAssertEqual(answer.errors, ["etcdserver: no leader", "NOSPACE"])
    }

    // MARK: - Damage

    func test_damagedMessages_areRefused() {
        let damaged: [(String, [UInt8])] = [
            ("a varint cut short", [0x18, 0xff]),
            ("a varint of eleven bytes", [0x18] + Array(repeating: 0xff, count: 10) + [0x01]),
            ("a length past the message", [0x0a, 0x05, 0x01]),
            ("a header that is not a message", [0x0a, 0x02, 0x08]),
            ("field number 0", [0x00, 0x01]),
            ("wire type 3 (groups, which proto3 has not)", [0x0b]),
            ("a fixed64 cut short", [0x09, 1, 2, 3]),
            ("a header given as a varint", [0x08, 0x01, 0x0a]),
        ]
        for (what, bytes) in damaged {
            XCTAssertThrowsError(try RangeResponse(protobuf: [0x0a, 0x00][...] + bytes), what) { error in
                guard case .malformedResponse = error as? EtcdError else { return XCTFail("\(what): \(error)") }
            }
        }
        var wrongType = ProtoWriter()
        wrongType.bytes(4, [1])
        XCTAssertThrowsError(try RangeResponse(protobuf: wrongType.bytes[...]), "a count given as bytes")
        // A negative revision, version or count (taken as unsigned further on) is malformed.
        var header = ProtoWriter()
        header.int64(3, -1)
        var negative = ProtoWriter()
        negative.bytes(1, header.bytes)
        XCTAssertThrowsError(try RangeResponse(protobuf: negative.bytes[...]), "a negative revision") { error in
            guard case .malformedResponse = error as? EtcdError else { return XCTFail("a negative revision: \(error)") }
        }
        var kv = ProtoWriter()
        kv.bytes(1, [0x61])
        kv.int64(3, -9)
        var withKV = ProtoWriter()
        withKV.bytes(2, kv.bytes)
        XCTAssertThrowsError(try RangeResponse(protobuf: withKV.bytes[...]), "a negative mod_revision")
    }

    func test_randomBytes_neverTrap() {
        // Whatever arrives, every decoder answers or throws; none reads out of bounds.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...40, using: &generator)
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = try? WatchMessage(protobuf: bytes[...])
            _ = try? TxnResponse(protobuf: bytes[...])
            _ = try? StatusResponse(protobuf: bytes[...])
            _ = try? EtcdRequest.leaseKeepAlive(id: 1).decodeGRPC(bytes[...])
        }
    }

    // MARK: - Frames and status

    func test_framer_cutsMessagesHoweverTheBytesArrive() throws {
        let messages: [[UInt8]] = [[], [1], Array(repeating: 7, count: 300), [2, 3]]
        let stream = messages.flatMap { GRPCFrame.frame($0) }
        for chunk in [1, 2, 3, 5, 6, 301, stream.count] {
            var framer = GRPCFramer(maxBytes: 1000)
            var received: [[UInt8]] = []
            var start = 0
            while start < stream.count {
                let piece = Array(stream[start..<min(stream.count, start + chunk)])
                received += piece.withUnsafeBytes { framer.append($0) }.map(Array.init)
                start += chunk
            }
            XCTAssertEqual(received, messages, "chunks of \(chunk)")
            XCTAssertFalse(framer.hasPartialMessage)
        }
    }

    func test_framer_refusesAMessageOverTheBound_andACompressedOne_afterTheMessagesBefore() {
        var bounded = GRPCFramer(maxBytes: 10)
        // The bound is checked from the frame's header, before the message arrives.
        let stream = GRPCFrame.frame([1, 2]) + GRPCFrame.frame(Array(repeating: 0, count: 11)).prefix(5)
        XCTAssertEqual(stream.withUnsafeBytes { bounded.append($0) }.map(Array.init), [[1, 2]])
        guard case .tooLarge? = bounded.failure else { return XCTFail("\(String(describing: bounded.failure))") }
        XCTAssertEqual(GRPCFrame.frame([3]).withUnsafeBytes { bounded.append($0) }.count, 0, "nothing after the failure")

        var framer = GRPCFramer(maxBytes: 10)
        XCTAssertEqual(([1, 0, 0, 0, 1, 9] as [UInt8]).withUnsafeBytes { framer.append($0) }.count, 0)
        guard case .compressed? = framer.failure else { return XCTFail("\(String(describing: framer.failure))") }
    }

    func test_status_comesFromTrailerLines_percentDecoded() {
        var status = GRPCStatus()
        for line in ["HTTP/2 200\r\n", "content-type: application/grpc\r\n", "\r\n",
                     "Grpc-Status: 14\r\n", "grpc-message: etcdserver: no leader %E2%9C%93 100%25\r\n"] {
            Array(line.utf8).withUnsafeBytes { status.take($0) }
        }
        XCTAssertEqual(status.code, 14)
        XCTAssertEqual(status.message, "etcdserver: no leader ✓ 100%")
        XCTAssertTrue(GatewayFailure(code: status.code!, message: status.message).isNoLeader)
        XCTAssertEqual(GatewayFailure(code: 14, message: status.message).error, .unavailable(status.message, mayHaveBeenApplied: false))

        var none = GRPCStatus()
        Array("grpc-encoding: identity\r\n".utf8).withUnsafeBytes { none.take($0) }
        XCTAssertNil(none.code)
    }
}

extension ProtoWriter {
    /// Bytes as they are (each below 0x80, a one-byte varint), for fields of wire types the
    /// writer has no method for.
    mutating func bytesRaw(_ raw: [UInt8]) {
        for byte in raw {
            precondition(byte < 0x80)
            varint(UInt64(byte))
        }
    }
}
