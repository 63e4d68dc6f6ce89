// Cluster mode: a host that starts applies etcd's history before it serves (EtcdLog.attach). What
// it must not do meanwhile: write from the old view it replays, or serve a state older than etcd's
// when it started.
import Foundation
import Glibc
import TestSupport
import XCTest

final class ClusterCatchUpTests: XCTestCase {
    /// Waits until `index` has no request to etcd under way: a proposal it sent while it applied
    /// etcd's history is decided.
    private func settled(_ hosts: ClusterHosts, _ index: Int) {
        waitFor("host \(index) without requests under way") {
            let cluster = (try? hosts.request(index, #"{"op":"stats"}"#))?["cluster"] as? [String: Any]
            return cluster?["requests_sent"] as? Int == 0 && cluster?["requests_waiting"] as? Int == 0
        }
    }

    /// A plain `set` of a binding's source that committed from a host that had not applied the
    /// binding: every host running then applies it and runs the binding again, and the first
    /// writes the target. A host that starts later replays that revision from etcd's history: it
    /// must not run the binding again from that old view, whose compares (the target absent
    /// then, the source unchanged) still hold once the target was deleted, and write it back.
    func test_aHostStartedAfterABindingWasRepaired_doesNotWriteItsTargetAgain() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        XCTAssertEqual(try hosts.request(0, #"{"op":"bind","from":"src","to":"dst","map":"(value ?? 0) * 2"}"#)["ok"] as? Bool, true)
        _ = try hosts.request(0, #"{"op":"delete","key":"dst"}"#)
        // What a `set` racing a `bind` on another host commits: a put whose writer had applied an
        // older bindings epoch than the binding's.
        try hosts.etcd.etcdctl(["put", hosts.prefix + "k/src", #"{"bindings_rev":1,"value":5}"#])
        for index in 0..<2 {
            waitFor("the binding run again on host \(index)") {
                (try? hosts.request(index, #"{"op":"get","key":"dst"}"#)["value"] as? Int) == 10
            }
        }
        hosts.kill(1)
        XCTAssertEqual(try hosts.request(0, #"{"op":"delete","key":"dst"}"#)["deleted"] as? Bool, true)

        try hosts.start(1)
        settled(hosts, 1)
        let mark = try XCTUnwrap(try hosts.request(1, #"{"op":"set","key":"mark","value":1}"#)["rev"] as? Int)
        waitFor("host 0 at \(mark)") { (try? hosts.request(0, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= mark }
        for index in 0..<2 {
            let dst = try hosts.request(index, #"{"op":"get","key":"dst"}"#)
            XCTAssertEqual((dst["error"] as? [String: Any])?["code"] as? String, "not_found", "host \(index): \(dst)\n\(hosts.logs)")
        }
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"src"}"#)["value"] as? Int, 5)
    }
}
