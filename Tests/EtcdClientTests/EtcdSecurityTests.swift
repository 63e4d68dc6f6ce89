// TLS with client certificates, and etcd's user/password authentication, each against a cluster
// of its own: what works with the right credentials, and the error each wrong one gets.
import EtcdClient
import TestSupport
import XCTest

class EtcdSecurityTests: APITestCase {
    func test_tls_withTheCAAndAClientCertificate_works_andWithoutEitherIsRefused() throws {
        var options = EtcdCluster.Options()
        options.tls = true
        let cluster = try startEtcdCluster(options)
        XCTAssertTrue(cluster.endpoints.allSatisfy { $0.hasPrefix("https://") })

        let driver = try ClientDriver(cluster)
        let prefix = uniquePrefix()
        let watch = driver.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(driver.created(watch))
        let put = try driver.put(prefix + "k", "secret")
        XCTAssertEqual(driver.watchUpdates(watch) { $0.events.count == 1 }.events.map(\.revision), [put.header.revision])

        // No client certificate: the members require one.
        let anonymous = try ClientDriver(cluster) {
            $0.certFile = nil
            $0.keyFile = nil
        }
        guard case .failure(.tlsFailed(let message))? = anonymous.perform(.status) else {
            return XCTFail("expected tlsFailed, got \(String(describing: anonymous.responses.values.first))")
        }
        XCTAssertFalse(message.isEmpty)
        // The system's CAs do not know the test CA: the members' certificate is refused.
        let untrusting = try ClientDriver(cluster) { $0.caFile = nil }
        guard case .failure(.tlsFailed)? = untrusting.perform(.status) else {
            return XCTFail("expected tlsFailed, got \(String(describing: untrusting.responses.values.first))")
        }
    }

    func test_authentication_withThePassword_works_andWithAWrongOneOrNoneIsRefused() throws {
        var options = EtcdCluster.Options()
        options.rootPassword = "open sesame"
        options.authTokenTTL = 1
        let cluster = try startEtcdCluster(options)

        let driver = try ClientDriver(cluster) {
            $0.user = "root"
            $0.password = "open sesame"
        }
        let prefix = uniquePrefix()
        let watch = driver.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(driver.created(watch))
        let put = try driver.put(prefix + "k", "v")
        XCTAssertEqual(try driver.range(.prefix(bytes(prefix))).kvs.map { text($0.value) }, ["v"])
        XCTAssertEqual(driver.watchUpdates(watch) { $0.events.count == 1 }.events.map(\.revision), [put.header.revision])

        let wrong = try ClientDriver(cluster) {
            $0.user = "root"
            $0.password = "guess"
        }
        let refusedWatch = wrong.client.watch(.prefix(bytes(prefix)))
        guard case .failure(.authenticationFailed(let message))? = wrong.perform(.range(.prefix(bytes(prefix)))) else {
            return XCTFail("expected authenticationFailed, got \(String(describing: wrong.responses.values.first))")
        }
        XCTAssertTrue(message.contains("authentication failed"), message)
        guard case .failed(.authenticationFailed)? = wrong.watchUpdates(refusedWatch, until: { $0.end != nil }).end else {
            return XCTFail("the watch was not refused: \(wrong.updates[refusedWatch] ?? [])")
        }

        let nobody = try ClientDriver(cluster)
        guard case .failure(.authenticationFailed)? = nobody.perform(.range(.prefix(bytes(prefix)))) else {
            return XCTFail("expected authenticationFailed, got \(String(describing: nobody.responses.values.first))")
        }

        // Left unused past its TTL, the token expires; etcd refuses it, and the client fetches a
        // new one and sends the request again. (The wait makes the token expire; it asserts nothing.)
        usleep(2_500_000)
        XCTAssertEqual(try driver.range(.prefix(bytes(prefix))).kvs.map { text($0.value) }, ["v"])
    }
}

/// Every test above again, over etcd's JSON gateway (`etcd_api = json`). Each is named here:
/// XCTest on Linux finds a test class by the test methods it declares, not those it inherits.
final class EtcdSecurityTestsOverTheGateway: EtcdSecurityTests {
    override class var api: EtcdAPI { .json }

    override func test_tls_withTheCAAndAClientCertificate_works_andWithoutEitherIsRefused() throws { try super.test_tls_withTheCAAndAClientCertificate_works_andWithoutEitherIsRefused() }
    override func test_authentication_withThePassword_works_andWithAWrongOneOrNoneIsRefused() throws { try super.test_authentication_withThePassword_works_andWithAWrongOneOrNoneIsRefused() }
}
