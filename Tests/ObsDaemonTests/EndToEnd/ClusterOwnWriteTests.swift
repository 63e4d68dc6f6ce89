// A host's own plain writes applied from etcd's answer, before its watch's copy of them comes
// (EtcdLog.applyOwnPut): the client's answer does not wait for the copy, and what the host then
// holds (revisions, versions, events) is what etcd holds and what every other host applies.
import Foundation
import Glibc
import TestSupport
import XCTest

final class ClusterOwnWriteTests: XCTestCase {
    /// Both hosts apply their watch's messages late (a debug build's hook), so that host 0's
    /// answers from etcd come first, as on a watch that lags behind its host's requests.
    private static func lateWatch(milliseconds: Int) -> [String: String] { ["OBSD_TEST_HOLD_WATCH_MS": "\(milliseconds)"] }

    private func appliedFromAnswers(_ hosts: ClusterHosts, _ index: Int) throws -> Int? {
        (try hosts.request(index, #"{"op":"stats"}"#)["cluster"] as? [String: Any])?["applied_from_answers"] as? Int
    }

    func test_ownPlainWrites_areAppliedFromEtcdsAnswer_asEtcdHoldsThem() throws {
        // A cluster of its own: a revision of another prefix in between (another test's lease
        // running out) would make host 0 wait for its watch, rightly, and the count below differ.
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        // Held 2 s: etcd's answer to each write reaches host 0 long before the copy is applied,
        // however slow the machine, so the counts below are exact (etcd_timeout is 5 s).
        let hosts = try ClusterHosts(etcd, count: 2, environment: Self.lateWatch(milliseconds: 2000))
        let watcher = try watch(hosts, 0, ["own.*", "marker"])
        XCTAssertEqual(try appliedFromAnswers(hosts, 0), 0)

        // Each request is sent once the one before was answered, so host 0 has applied every
        // revision before each of its writes: the plain ones are applied from etcd's answer.
        var revisions: [Int] = []
        func send(_ line: String, on client: Client? = nil) throws -> [String: Any] {
            let answer: [String: Any]
            if let client {
                client.send(line + "\n")
                answer = json(client.readLine())
            } else {
                answer = try hosts.request(0, line)
            }
            let rev = try XCTUnwrap(answer["rev"] as? Int, "\(line): \(answer)\n\(hosts.logs)")
            revisions.append(rev)
            return answer
        }
        _ = try send(#"{"op":"set","key":"own.a","value":1}"#)        // created
        _ = try send(#"{"op":"set","key":"own.a","value":2.5}"#)      // its second version
        // Read at once: the write is there though the watch's copy of it is not yet.
        let read = try hosts.request(0, #"{"op":"get","key":"own.a"}"#)
        XCTAssertEqual(read["value"] as? Double, 2.5)
        XCTAssertEqual(read["rev"] as? Int, revisions.last)
        XCTAssertEqual(read["version"] as? Int, 2)
        XCTAssertEqual(try appliedFromAnswers(hosts, 0), 2)
        _ = try send(#"{"op":"set","key":"own.b","value":"x"}"#)
        _ = try send(#"{"op":"set","key":"own.b","value":"y"}"#)
        _ = try send(#"{"op":"delete","key":"own.a"}"#)                  // a transaction: waits for the copy
        _ = try send(#"{"op":"set","key":"own.a","value":"again"}"#)  // created again: version 1
        _ = try send(#"{"op":"set","key":"own.t","value":{"n":[1,null]},"ttl_ms":600000}"#)
        let owner = try hosts.client(0)
        _ = try send(#"{"op":"set","key":"own.e","value":true,"ephemeral":true}"#, on: owner)
        _ = try send(#"{"op":"set","key":"own.b","value":"z"}"#)      // its third version
        XCTAssertEqual(try appliedFromAnswers(hosts, 0), 8)
        XCTAssertEqual(revisions, Array(revisions[0]..<(revisions[0] + 9)), "one revision each, none between")

        // Every revision reaches host 0's watcher once, in order, when its copy comes too.
        var events: [Int] = []
        for _ in revisions { events.append(try XCTUnwrap(ClusterHosts.event(watcher)["rev"] as? Int, hosts.logs)) }
        XCTAssertEqual(events, revisions)
        let marker = try XCTUnwrap(try hosts.request(1, #"{"op":"set","key":"marker","value":1}"#)["rev"] as? Int)
        XCTAssertEqual(ClusterHosts.event(watcher)["rev"] as? Int, marker, "no revision's event twice")

        // Both hosts hold what etcd holds: each key's creation revision, revision and version.
        for index in 0..<2 {
            var found: [String: Any] = [:]
            for _ in 0..<100 {
                found = try hosts.request(index, #"{"op":"get","key":"marker"}"#)
                if found["rev"] as? Int == marker { break }
                usleep(50_000)
            }
            XCTAssertEqual(found["rev"] as? Int, marker, "host \(index) caught up")
            let dump = try XCTUnwrap(try hosts.request(index, #"{"op":"dump"}"#)["keys"] as? [[String: Any]])
            for key in ["own.a", "own.b", "own.t"] {
                let held = try XCTUnwrap(dump.first { $0["key"] as? String == key }, "host \(index): \(key) in \(dump)")
                let record = try etcd.etcdctl(["get", hosts.prefix + "k/" + key, "-w", "json"])
                let kv = try XCTUnwrap((json(record)["kvs"] as? [[String: Any]])?.first, record)
                XCTAssertEqual(held["created_rev"] as? Int, kv["create_revision"] as? Int, "host \(index), \(key)")
                XCTAssertEqual(held["rev"] as? Int, kv["mod_revision"] as? Int, "host \(index), \(key)")
                XCTAssertEqual(held["version"] as? Int, kv["version"] as? Int, "host \(index), \(key)")
            }
            let ephemeral = try hosts.request(index, #"{"op":"get","key":"own.e"}"#)
            XCTAssertEqual(ephemeral["value"] as? Bool, true, "host \(index)")
            XCTAssertEqual(ephemeral["rev"] as? Int, revisions[revisions.count - 2], "host \(index)")
            XCTAssertEqual(ephemeral["version"] as? Int, 1, "host \(index)")
        }
        let again = try hosts.request(0, #"{"op":"get","key":"own.a"}"#)
        XCTAssertEqual(again["value"] as? String, "again")
        XCTAssertEqual(again["version"] as? Int, 1)
        withExtendedLifetime(owner) {}
    }

    /// A revision of another writer before a host's own write, not applied yet when etcd answers
    /// the write: the host waits for its watch (it cannot know what that revision held), and
    /// applies both in order.
    func test_aWriteAfterOneTheHostHasNotApplied_waitsForTheWatch() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        // Held 3 s: host 0 takes etcd's answer to its own write well before it applies `other`,
        // however slow the machine (etcd_timeout is 5 s).
        let hosts = try ClusterHosts(etcd, count: 2, environment: Self.lateWatch(milliseconds: 3000))
        let watcher = try watch(hosts, 0, ["k.*"])
        let other = try XCTUnwrap(try hosts.request(1, #"{"op":"set","key":"k.other","value":1}"#)["rev"] as? Int)
        // Host 0 has not applied `other` yet: its own write waits.
        let own = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"k.own","value":2}"#)["rev"] as? Int)
        XCTAssertEqual(own, other + 1)
        XCTAssertEqual(try appliedFromAnswers(hosts, 0), 0)
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"k.other"}"#)["value"] as? Int, 1)
        XCTAssertEqual(ClusterHosts.event(watcher)["rev"] as? Int, other)
        XCTAssertEqual(ClusterHosts.event(watcher)["rev"] as? Int, own)
    }
}
