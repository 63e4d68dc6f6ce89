// Leases against a real 3-member etcd cluster: keys attached to a lease go when it expires or is
// revoked, and stay while it is kept alive. (etcd's shortest TTL with the test cluster's 1 s
// election timeout is 2 s.)
import EtcdClient
import TestSupport
import XCTest

class EtcdLeaseTests: SharedClusterTestCase {
    private func grant(ttl: Int64) throws -> LeaseResponse {
        guard case .leaseGrant(let lease) = try driver.succeed(.leaseGrant(ttl: ttl)) else {
            throw EtcdTestError("not a lease grant")
        }
        return lease
    }

    func test_expiredLease_deletesItsKeys() throws {
        let prefix = uniquePrefix()
        let lease = try grant(ttl: 2)
        XCTAssertNotEqual(lease.id, 0)
        XCTAssertGreaterThanOrEqual(lease.ttl, 2)
        let put = try driver.put(prefix + "ephemeral", "x", lease: lease.id)
        XCTAssertEqual(try driver.range(RangeRequest(key: bytes(prefix + "ephemeral"))).kvs.first?.lease, lease.id)
        let watch = driver.client.watch(.prefix(bytes(prefix), startRevision: put.header.revision + 1))
        let events = driver.watchUpdates(watch, timeout: 30) { $0.events.count >= 1 }.events
        XCTAssertEqual(events.first?.kind, .delete)
        XCTAssertEqual(events.first.map { text($0.kv.key) }, prefix + "ephemeral")
        XCTAssertEqual(try driver.range(.prefix(bytes(prefix), countOnly: true)).count, 0)
        // The lease is gone: a keepalive finds no TTL left.
        guard case .leaseKeepAlive(let kept) = try driver.succeed(.leaseKeepAlive(id: lease.id)) else {
            return XCTFail("not a keepalive answer")
        }
        XCTAssertEqual(kept.ttl, 0)
    }

    func test_keepAlive_keepsTheKeyPastItsTTL() throws {
        let prefix = uniquePrefix()
        let lease = try grant(ttl: 2)
        _ = try driver.put(prefix + "kept", "x", lease: lease.id)
        // Renew every quarter TTL for over two TTLs; the key must be there throughout.
        let end = Date().addingTimeInterval(4.5)
        while Date() < end {
            guard case .leaseKeepAlive(let kept) = try driver.succeed(.leaseKeepAlive(id: lease.id)) else {
                return XCTFail("not a keepalive answer")
            }
            XCTAssertEqual(kept.id, lease.id)
            XCTAssertGreaterThan(kept.ttl, 0)
            XCTAssertEqual(try driver.range(.prefix(bytes(prefix), countOnly: true)).count, 1)
            usleep(500_000)
        }
        _ = try driver.succeed(.leaseRevoke(id: lease.id))
    }

    func test_revoke_deletesTheKeysAtOnce() throws {
        let prefix = uniquePrefix()
        let lease = try grant(ttl: 60)
        _ = try driver.put(prefix + "a", "1", lease: lease.id)
        _ = try driver.put(prefix + "b", "2", lease: lease.id)
        guard case .leaseRevoke(let header) = try driver.succeed(.leaseRevoke(id: lease.id)) else {
            return XCTFail("not a revoke answer")
        }
        XCTAssertGreaterThan(header.revision, 0)
        XCTAssertEqual(try driver.range(.prefix(bytes(prefix), countOnly: true)).count, 0)
    }

    func test_grantWithAnID_usesIt() throws {
        let id = Int64.random(in: 1_000_000...Int64.max / 2)
        guard case .leaseGrant(let lease) = try driver.succeed(.leaseGrant(ttl: 30, id: id)) else {
            return XCTFail("not a lease grant")
        }
        XCTAssertEqual(lease.id, id)
        _ = try driver.succeed(.leaseRevoke(id: id))
    }
}

/// Every test above again, over etcd's JSON gateway (`etcd_api = json`). Each is named here:
/// XCTest on Linux finds a test class by the test methods it declares, not those it inherits.
final class EtcdLeaseTestsOverTheGateway: EtcdLeaseTests {
    override class var api: EtcdAPI { .json }

    override func test_expiredLease_deletesItsKeys() throws { try super.test_expiredLease_deletesItsKeys() }
    override func test_keepAlive_keepsTheKeyPastItsTTL() throws { try super.test_keepAlive_keepsTheKeyPastItsTTL() }
    override func test_revoke_deletesTheKeysAtOnce() throws { try super.test_revoke_deletesTheKeysAtOnce() }
    override func test_grantWithAnID_usesIt() throws { try super.test_grantWithAnID_usesIt() }
}
