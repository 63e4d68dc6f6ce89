// Reads, writes, deletes and transactions against a real 3-member etcd cluster.
import EtcdClient
import TestSupport
import XCTest

class EtcdKVTests: SharedClusterTestCase {
    func test_put_thenRange_returnsTheValueWithItsRevisions() throws {
        let prefix = uniquePrefix()
        let first = try driver.put(prefix + "a", "one")
        let second = try driver.put(prefix + "a", "two")
        XCTAssertEqual(second.header.revision, first.header.revision + 1)

        let range = try driver.range(RangeRequest(key: bytes(prefix + "a")))
        XCTAssertEqual(range.count, 1)
        let kv = try XCTUnwrap(range.kvs.first)
        XCTAssertEqual(text(kv.key), prefix + "a")
        XCTAssertEqual(text(kv.value), "two")
        XCTAssertEqual(kv.createRevision, first.header.revision)
        XCTAssertEqual(kv.modRevision, second.header.revision)
        XCTAssertEqual(kv.version, 2)
        XCTAssertEqual(kv.lease, 0)
    }

    func test_rangePrefix_findsEveryKeyUnderThePrefixOnly() throws {
        let prefix = uniquePrefix()
        for key in ["a", "b", "c/d"] { _ = try driver.put(prefix + key, key) }
        _ = try driver.put(String(prefix.dropLast()) + "0", "outside")

        let range = try driver.range(.prefix(bytes(prefix)))
        XCTAssertEqual(range.kvs.map { text($0.key) }, ["a", "b", "c/d"].map { prefix + $0 })
        let counted = try driver.range(.prefix(bytes(prefix), countOnly: true))
        XCTAssertEqual(counted.count, 3)
        XCTAssertTrue(counted.kvs.isEmpty)
    }

    func test_rangeAtRevision_seesTheStoreAsItWas() throws {
        let prefix = uniquePrefix()
        let old = try driver.put(prefix + "k", "old")
        _ = try driver.put(prefix + "k", "new")
        let range = try driver.range(.prefix(bytes(prefix), revision: old.header.revision))
        XCTAssertEqual(range.kvs.map { text($0.value) }, ["old"])
    }

    func test_bytesThatAreNotUTF8_roundTrip() throws {
        let key = bytes(uniquePrefix()) + [0x00, 0xff, 0x80]
        let value: [UInt8] = [0xff, 0x00, 0x7b, 0x22]
        _ = try driver.succeed(.put(PutRequest(key: key, value: value)))
        let range = try driver.range(RangeRequest(key: key))
        XCTAssertEqual(range.kvs.first?.key, key)
        XCTAssertEqual(range.kvs.first?.value, value)
    }

    func test_deleteRange_withPrevKV_returnsTheDeletedKeys() throws {
        let prefix = uniquePrefix()
        _ = try driver.put(prefix + "a", "1")
        _ = try driver.put(prefix + "b", "2")
        guard case .deleteRange(let deleted) = try driver.succeed(
            .deleteRange(DeleteRangeRequest(key: bytes(prefix), rangeEnd: prefixRangeEnd(bytes(prefix)), prevKV: true))) else {
            return XCTFail("not a delete answer")
        }
        XCTAssertEqual(deleted.deleted, 2)
        XCTAssertEqual(deleted.prevKVs.map { text($0.value) }, ["1", "2"])
        XCTAssertEqual(try driver.range(.prefix(bytes(prefix), countOnly: true)).count, 0)
    }

    func test_putWithPrevKV_returnsTheKeyBefore() throws {
        let prefix = uniquePrefix()
        _ = try driver.put(prefix + "a", "before")
        guard case .put(let put) = try driver.succeed(.put(PutRequest(key: bytes(prefix + "a"), value: bytes("after"),
                                                                       prevKV: true))) else {
            return XCTFail("not a put answer")
        }
        XCTAssertEqual(put.prevKV.map { text($0.value) }, "before")
    }

    func test_txn_eachCompareTarget_choosesTheBranch() throws {
        let prefix = uniquePrefix()
        let key = bytes(prefix + "k")
        let put = try driver.put(prefix + "k", "v")
        let revision = put.header.revision
        let holding: [Compare] = [
            Compare(key: key, .equal, .version(1)),
            Compare(key: key, .equal, .createRevision(revision)),
            Compare(key: key, .equal, .modRevision(revision)),
            Compare(key: key, .equal, .value(bytes("v"))),
            Compare(key: key, .equal, .lease(0)),
            Compare(key: key, .notEqual, .value(bytes("w"))),
            Compare(key: key, .greater, .modRevision(revision - 1)),
            Compare(key: key, .less, .modRevision(revision + 1)),
            Compare(key: bytes(prefix + "absent"), .equal, .createRevision(0)),
        ]
        for compare in holding {
            let txn = try driver.txn(Txn(compares: [compare], success: [.range(RangeRequest(key: key))]))
            XCTAssertTrue(txn.succeeded, "\(compare) should hold")
            guard case .range(let range)? = txn.responses.first else { return XCTFail("no range result") }
            XCTAssertEqual(range.kvs.map { text($0.value) }, ["v"])
        }
        let failing: [Compare] = [
            Compare(key: key, .equal, .version(2)),
            Compare(key: key, .equal, .modRevision(revision - 1)),
            Compare(key: key, .equal, .value(bytes("w"))),
            Compare(key: key, .greater, .modRevision(revision)),
            Compare(key: key, .notEqual, .lease(0)),
        ]
        for compare in failing {
            let txn = try driver.txn(Txn(compares: [compare], success: [.put(PutRequest(key: key, value: bytes("x")))],
                                         failure: [.range(RangeRequest(key: key))]))
            XCTAssertFalse(txn.succeeded, "\(compare) should not hold")
            guard case .range(let range)? = txn.responses.first else { return XCTFail("no failure-branch result") }
            XCTAssertEqual(range.kvs.map { text($0.value) }, ["v"], "the success branch must not have run")
        }
    }

    func test_txn_operationsAreOneRevision_withResultsInOrder() throws {
        let prefix = uniquePrefix()
        _ = try driver.put(prefix + "gone", "x")
        let txn = try driver.txn(Txn(success: [
            .put(PutRequest(key: bytes(prefix + "a"), value: bytes("1"))),
            .put(PutRequest(key: bytes(prefix + "b"), value: bytes("2"))),
            .deleteRange(DeleteRangeRequest(key: bytes(prefix + "gone"))),
            .range(RangeRequest.prefix(bytes(prefix))),
        ]))
        XCTAssertTrue(txn.succeeded)
        guard txn.responses.count == 4, case .put = txn.responses[0], case .put = txn.responses[1],
              case .deleteRange(let deleted) = txn.responses[2], case .range(let range) = txn.responses[3] else {
            return XCTFail("unexpected results \(txn.responses)")
        }
        XCTAssertEqual(deleted.deleted, 1)
        XCTAssertEqual(range.kvs.map { text($0.key) }, [prefix + "a", prefix + "b"])
        XCTAssertEqual(Set(range.kvs.map(\.modRevision)), [txn.header.revision])
    }

    /// Two clients race a compare-and-set on one key from the same revision: etcd applies one.
    func test_concurrentCompareAndSet_exactlyOneSucceeds() throws {
        let prefix = uniquePrefix()
        let key = bytes(prefix + "cas")
        let other = try ClientDriver(cluster)
        for round in 0..<10 {
            let revision = try driver.put(prefix + "cas", "start \(round)").header.revision
            func claim(_ by: String) -> EtcdRequest {
                .txn(Txn(compares: [Compare(key: key, .equal, .modRevision(revision))],
                         success: [.put(PutRequest(key: key, value: bytes(by)))]))
            }
            let first = driver.client.submit(claim("first"))
            let second = other.client.submit(claim("second"))
            let results = [driver.result(first), other.result(second)].map { result -> Bool? in
                guard case .success(.txn(let txn))? = result else { return nil }
                return txn.succeeded
            }
            XCTAssertEqual(results.compactMap { $0 }.count, 2, "both must be answered: \(results)")
            XCTAssertEqual(results.filter { $0 == true }.count, 1, "round \(round): exactly one wins")
            let winner = results[0] == true ? "first" : "second"
            XCTAssertEqual(try driver.range(RangeRequest(key: key)).kvs.map { text($0.value) }, [winner])
        }
    }

    func test_rangeAtACompactedRevision_isCompacted() throws {
        let prefix = uniquePrefix()
        let old = try driver.put(prefix + "k", "1")
        let newer = try driver.put(prefix + "k", "2")
        _ = try driver.succeed(.compact(revision: newer.header.revision, physical: true))
        switch driver.perform(.range(.prefix(bytes(prefix), revision: old.header.revision))) {
        case .failure(.compacted)?: break
        case let other: XCTFail("expected compacted, got \(String(describing: other))")
        }
    }

    func test_putWithAnUnknownLease_isLeaseNotFound() throws {
        switch driver.perform(.put(PutRequest(key: bytes(uniquePrefix()), value: [], lease: 12345))) {
        case .failure(.leaseNotFound(let message))?:
            XCTAssertTrue(message.contains("lease not found"), message)
        case let other: XCTFail("expected leaseNotFound, got \(String(describing: other))")
        }
    }

    func test_status_namesTheLeaderAndVersion() throws {
        guard case .status(let status) = try driver.succeed(.status) else { return XCTFail("not a status") }
        XCTAssertTrue(status.version.hasPrefix("3."), status.version)
        XCTAssertNotEqual(status.leader, 0)
        XCTAssertTrue(status.errors.isEmpty)
        XCTAssertGreaterThan(status.dbSize, 0)
    }

    func test_check_countsTheKeysUnderThePrefix() throws {
        let prefix = uniquePrefix()
        for key in ["a", "b"] { _ = try driver.put(prefix + key, key) }
        var configuration = EtcdConfiguration(endpoints: cluster.endpoints)
        configuration.api = Self.api
        let check = try EtcdClient.check(configuration, prefix: bytes(prefix))
        XCTAssertEqual(check.keys, 2)
        XCTAssertTrue(cluster.endpoints.contains(check.endpoint))
        XCTAssertNotEqual(check.status.leader, 0)
    }

    func test_check_withNoEtcd_isUnavailable() throws {
        let dead = try freeLoopbackPorts(1)[0]
        var configuration = EtcdConfiguration(endpoints: ["http://127.0.0.1:\(dead)"])
        configuration.api = Self.api
        configuration.requestTimeout = .seconds(2)
        XCTAssertThrowsError(try EtcdClient.check(configuration, prefix: bytes("/"))) { error in
            guard case EtcdError.unavailable(let message, false) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(message.contains("127.0.0.1:\(dead)"), message)
        }
    }
}

/// Every test above again, over etcd's JSON gateway (`etcd_api = json`). Each is named here:
/// XCTest on Linux finds a test class by the test methods it declares, not those it inherits.
final class EtcdKVTestsOverTheGateway: EtcdKVTests {
    override class var api: EtcdAPI { .json }

    override func test_put_thenRange_returnsTheValueWithItsRevisions() throws { try super.test_put_thenRange_returnsTheValueWithItsRevisions() }
    override func test_rangePrefix_findsEveryKeyUnderThePrefixOnly() throws { try super.test_rangePrefix_findsEveryKeyUnderThePrefixOnly() }
    override func test_rangeAtRevision_seesTheStoreAsItWas() throws { try super.test_rangeAtRevision_seesTheStoreAsItWas() }
    override func test_bytesThatAreNotUTF8_roundTrip() throws { try super.test_bytesThatAreNotUTF8_roundTrip() }
    override func test_deleteRange_withPrevKV_returnsTheDeletedKeys() throws { try super.test_deleteRange_withPrevKV_returnsTheDeletedKeys() }
    override func test_putWithPrevKV_returnsTheKeyBefore() throws { try super.test_putWithPrevKV_returnsTheKeyBefore() }
    override func test_txn_eachCompareTarget_choosesTheBranch() throws { try super.test_txn_eachCompareTarget_choosesTheBranch() }
    override func test_txn_operationsAreOneRevision_withResultsInOrder() throws { try super.test_txn_operationsAreOneRevision_withResultsInOrder() }
    override func test_concurrentCompareAndSet_exactlyOneSucceeds() throws { try super.test_concurrentCompareAndSet_exactlyOneSucceeds() }
    override func test_rangeAtACompactedRevision_isCompacted() throws { try super.test_rangeAtACompactedRevision_isCompacted() }
    override func test_putWithAnUnknownLease_isLeaseNotFound() throws { try super.test_putWithAnUnknownLease_isLeaseNotFound() }
    override func test_status_namesTheLeaderAndVersion() throws { try super.test_status_namesTheLeaderAndVersion() }
    override func test_check_countsTheKeysUnderThePrefix() throws { try super.test_check_countsTheKeysUnderThePrefix() }
    override func test_check_withNoEtcd_isUnavailable() throws { try super.test_check_withNoEtcd_isUnavailable() }
}
