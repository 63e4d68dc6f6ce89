// The gateway's answers read without a cluster: its shapes of refusal and what each becomes, its
// fields left out at their defaults, its camelCase status.
@testable import EtcdClient
import XCTest

final class GatewayDecodingTests: XCTestCase {
    private func object(_ json: String) throws -> GatewayObject { try GatewayObject(parsing: Array(json.utf8)) }

    func test_refusals_mapToTheirErrors() throws {
        let cases: [(String, EtcdError)] = [
            (#"{"error":"etcdserver: request timed out","message":"etcdserver: request timed out","code":14}"#,
             .unavailable("etcdserver: request timed out", mayHaveBeenApplied: false)),
            (#"{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader","http_status":"Service Unavailable"}}"#,
             .unavailable("etcdserver: no leader", mayHaveBeenApplied: false)),
            (#"{"error":"etcdserver: authentication failed, invalid user ID or password","message":"etcdserver: authentication failed, invalid user ID or password","code":3}"#,
             .authenticationFailed("etcdserver: authentication failed, invalid user ID or password")),
            (#"{"error":"etcdserver: user name is empty","message":"etcdserver: user name is empty","code":3}"#,
             .authenticationFailed("etcdserver: user name is empty")),
            (#"{"error":"etcdserver: permission denied","message":"etcdserver: permission denied","code":7}"#,
             .authenticationFailed("etcdserver: permission denied")),
            (#"{"error":"etcdserver: mvcc: required revision has been compacted","message":"etcdserver: mvcc: required revision has been compacted","code":11}"#,
             .compacted("etcdserver: mvcc: required revision has been compacted")),
            (#"{"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5}"#,
             .leaseNotFound("etcdserver: requested lease not found")),
            (#"{"error":"etcdserver: too many operations in txn request","message":"etcdserver: too many operations in txn request","code":3}"#,
             .requestTooLarge("etcdserver: too many operations in txn request")),
            (#"{"error":"etcdserver: request is too large","message":"etcdserver: request is too large","code":3}"#,
             .requestTooLarge("etcdserver: request is too large")),
            (#"{"error":"grpc: received message larger than max (3145780 vs. 2097152)","message":"grpc: received message larger than max (3145780 vs. 2097152)","code":8}"#,
             .requestTooLarge("grpc: received message larger than max (3145780 vs. 2097152)")),
            (#"{"error":"etcdserver: mvcc: database space exceeded","message":"etcdserver: mvcc: database space exceeded","code":8}"#,
             .unavailable("etcdserver: mvcc: database space exceeded", mayHaveBeenApplied: false)),
            // Checked before etcd proposes anything: not applied, worth sending again later.
            (#"{"error":"etcdserver: too many requests","message":"etcdserver: too many requests","code":8}"#,
             .unavailable("etcdserver: too many requests", mayHaveBeenApplied: false)),
            (#"{"error":"etcdserver: key is not provided","message":"etcdserver: key is not provided","code":3}"#,
             .etcd(code: 3, message: "etcdserver: key is not provided")),
        ]
        for (json, error) in cases {
            XCTAssertEqual(GatewayFailure(try object(json))?.error, error, json)
        }
        XCTAssertTrue(GatewayFailure(try object(#"{"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14}"#))!.isNoLeader)
    }

    func test_watchCancelReason_isReadAsARefusal() {
        let failure = GatewayFailure(cancelReason: "rpc error: code = Unauthenticated desc = etcdserver: invalid auth token")
        XCTAssertTrue(failure.isInvalidToken)
        XCTAssertEqual(failure.error, .authenticationFailed("etcdserver: invalid auth token"))
    }

    func test_answers_areNotRefusals() throws {
        // A lease grant has a string field named error, empty when it worked.
        XCTAssertNil(GatewayFailure(try object(#"{"header":{"revision":"2"},"ID":"7","TTL":"5","error":""}"#)))
        XCTAssertNil(GatewayFailure(try object(#"{"header":{"revision":"2"}}"#)))
    }

    func test_fieldsLeftOut_areTheirDefaults() throws {
        let txn = try TxnResponse(object(#"{"header":{"revision":"9"},"responses":[{"response_range":{"header":{}}}]}"#))
        XCTAssertFalse(txn.succeeded)
        XCTAssertEqual(txn.header.revision, 9)
        XCTAssertEqual(txn.responses, [.range(RangeResponse(header: ResponseHeader()))])
        let event = try WatchEvent(object(#"{"type":"DELETE","kv":{"key":"YQ==","mod_revision":"12"}}"#))
        XCTAssertEqual(event, WatchEvent(kind: .delete, kv: KeyValue(key: bytes("a"), modRevision: 12)))
    }

    func test_status_readsCamelCaseFields() throws {
        let status = try StatusResponse(object(#"{"header":{"revision":"2"},"version":"3.4.23","dbSize":"20480","leader":"3319814642761637952","raftIndex":"5","raftTerm":"2","errors":["etcdserver: no leader"]}"#))
        XCTAssertEqual(status.dbSize, 20480)
        XCTAssertEqual(status.leader, 3_319_814_642_761_637_952)
        XCTAssertEqual(status.raftIndex, 5)
        XCTAssertEqual(status.errors, ["etcdserver: no leader"])
    }

    func test_wrongTypes_areMalformed() {
        XCTAssertThrowsError(try RangeResponse(object(#"{"header":{"revision":"x"}}"#)))
        XCTAssertThrowsError(try RangeResponse(object(#"{"header":{},"kvs":[{"key":"not base64!"}]}"#)))
        XCTAssertThrowsError(try RangeResponse(object(#"{"kvs":[]}"#)))
        XCTAssertThrowsError(try object("[1]"))
    }

    /// Revisions, versions and counts are taken as unsigned further on: a negative one is refused
    /// here, as malformed, rather than trapping there.
    func test_negativeRevisionsVersionsAndCounts_areMalformed() {
        let damaged = [
            #"{"header":{"revision":"-1"}}"#,
            #"{"header":{"revision":"2"},"kvs":[{"key":"YQ==","mod_revision":"-5"}]}"#,
            #"{"header":{"revision":"2"},"kvs":[{"key":"YQ==","create_revision":"-5"}]}"#,
            #"{"header":{"revision":"2"},"kvs":[{"key":"YQ==","version":"-1"}]}"#,
            #"{"header":{"revision":"2"},"count":"-3"}"#,
        ]
        for json in damaged {
            XCTAssertThrowsError(try RangeResponse(object(json)), json) { error in
                guard case .malformedResponse = error as? EtcdError else { return XCTFail("\(json): \(error)") }
            }
        }
        XCTAssertThrowsError(try WatchMessage(object(#"{"header":{"revision":"3"},"compact_revision":"-1"}"#)))
        XCTAssertNoThrow(try RangeResponse(object(#"{"header":{"revision":"2"},"kvs":[{"key":"YQ==","lease":"-7"}]}"#)),
                         "a lease is an ID, which may be any 64 bits")
    }

    func test_prefixRangeEnd() {
        XCTAssertEqual(prefixRangeEnd(bytes("/obsd/")), bytes("/obsd0"))
        XCTAssertEqual(prefixRangeEnd([0x61, 0xff]), [0x62])
        XCTAssertEqual(prefixRangeEnd([0xff, 0xff]), [0])
        XCTAssertEqual(prefixRangeEnd([]), [0])
    }
}
