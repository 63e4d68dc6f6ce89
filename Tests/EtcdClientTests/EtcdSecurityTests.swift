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

    /// A user etcd knows, with the right password but no role on the keys, is told that the
    /// permission is missing: "authentication failed" sent operators after the password.
    func test_aUserWithoutARoleOnTheKeys_isToldThePermissionIsMissing() throws {
        var options = EtcdCluster.Options()
        options.rootPassword = "open sesame"
        let cluster = try startEtcdCluster(options)
        try cluster.etcdctl(["user", "add", "reader:its password"])

        let reader = try ClientDriver(cluster) {
            $0.user = "reader"
            $0.password = "its password"
        }
        guard case .failure(let error)? = reader.perform(.range(.prefix(bytes(uniquePrefix())))) else {
            return XCTFail("expected a refusal, got \(String(describing: reader.responses.values.first))")
        }
        XCTAssertEqual(error, .authenticationFailed("etcdserver: permission denied"))
        XCTAssertTrue("\(error)".hasPrefix("etcd denied the permission: etcdserver: permission denied"), "\(error)")
    }
}

/// Every test above again, over etcd's JSON gateway (`etcd_api = json`). Each is named here:
/// XCTest on Linux finds a test class by the test methods it declares, not those it inherits.
final class EtcdSecurityTestsOverTheGateway: EtcdSecurityTests {
    override class var api: EtcdAPI { .json }

    override func test_tls_withTheCAAndAClientCertificate_works_andWithoutEitherIsRefused() throws { try super.test_tls_withTheCAAndAClientCertificate_works_andWithoutEitherIsRefused() }
    override func test_authentication_withThePassword_works_andWithAWrongOneOrNoneIsRefused() throws { try super.test_authentication_withThePassword_works_andWithAWrongOneOrNoneIsRefused() }
    override func test_aUserWithoutARoleOnTheKeys_isToldThePermissionIsMissing() throws { try super.test_aUserWithoutARoleOnTheKeys_isToldThePermissionIsMissing() }

    /// With client certificates and etcd's authentication both on, the gateway refuses a client
    /// certificate that has a CommonName (HTTP 400), explaining it in plain text only: the error
    /// carries that text, the operator's only clue (it said "HTTP 400" and nothing more).
    func test_aClientCertificateWithACommonName_underAuthentication_isRefusedWithTheGatewaysReason() throws {
        var options = EtcdCluster.Options()
        options.tls = true
        options.rootPassword = "open sesame"
        let cluster = try startEtcdCluster(options)

        let driver = try ClientDriver(cluster) {
            $0.user = "root"
            $0.password = "open sesame"
        }
        guard case .failure(.etcd(_, let message))? = driver.perform(.status) else {
            return XCTFail("expected etcd's refusal, got \(String(describing: driver.responses.values.first))")
        }
        XCTAssertTrue(message.hasPrefix("HTTP 400 from https://"), message)
        XCTAssertTrue(message.contains(": CommonName of client sending a request against gateway will be ignored"), message)
    }
}
