// The etcd cluster launcher (Tests/EtcdTestCluster, a target without XCTest so that obsbench can
// start clusters too), for every test target that imports TestSupport.
@_exported import EtcdTestCluster
import Foundation
import XCTest

/// Starts a 3-member etcd cluster on loopback. Without etcd installed the test is skipped, but in
/// CI (where scripts/test installs it) that is a failure.
public func startEtcdCluster(_ options: EtcdCluster.Options = EtcdCluster.Options()) throws -> EtcdCluster {
    guard EtcdCluster.binariesAvailable else {
        if ProcessInfo.processInfo.environment["CI"] != nil { XCTFail("etcd and etcdctl are not installed") }
        throw XCTSkip("etcd and etcdctl are not installed (Debian: etcd-server, etcd-client); scripts/test installs them")
    }
    return try EtcdCluster(options)
}
