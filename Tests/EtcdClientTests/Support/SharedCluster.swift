// One healthy 3-member cluster for every test class that leaves its members alone (KV, watches,
// leases, bounds, check), started on first use and stopped when the test process exits; the
// classes that kill members, or need TLS or authentication, start their own. Each test works
// under a key prefix of its own, so tests never see one another's keys.
import EtcdClient
import Foundation
import TestSupport
import XCTest

enum SharedCluster {
    nonisolated(unsafe) private static var started: EtcdCluster?

    /// The shared cluster, started the first time it is asked for.
    static func get() throws -> EtcdCluster {
        if let started { return started }
        var options = EtcdCluster.Options()
        // Progress notifications often enough for a test to see one.
        options.progressNotifyInterval = "500ms"
        let cluster = try startEtcdCluster(options)
        started = cluster
        // Test cases keep their reference to the end, so the cluster is shut down, not released.
        atexit { SharedCluster.started?.shutDown() }
        return cluster
    }
}

/// A key prefix no other test uses: "/test-NAME-RANDOM/".
func uniquePrefix(_ name: String = #function) -> String {
    "/\(name.prefix { $0 != "(" })-\(UInt32.random(in: 0...UInt32.max))/"
}

/// A test case whose clients speak one of etcd's APIs: gRPC here, the JSON gateway in the
/// subclasses named "...OverTheGateway", which run every test of their class again.
class APITestCase: XCTestCase {
    class var api: EtcdAPI { .grpc }

    override func setUp() {
        super.setUp()
        ClientDriver.defaultAPI = Self.api
    }

    override func tearDown() {
        ClientDriver.defaultAPI = .grpc
        super.tearDown()
    }
}

/// A test case on the shared cluster, with a client of its own per test.
class SharedClusterTestCase: APITestCase {
    var cluster: EtcdCluster!
    var driver: ClientDriver!

    override func setUpWithError() throws {
        ClientDriver.defaultAPI = Self.api
        cluster = try SharedCluster.get()
        driver = try ClientDriver(cluster)
    }

    override func tearDown() {
        driver = nil
        super.tearDown()
    }
}
