// Cluster mode: a host that starts applies etcd's history before it serves (EtcdLog.attach). What
// it must not do meanwhile: write from the old view it replays, or serve a state older than etcd's
// when it started.
import Foundation
import Glibc
import TestSupport
import XCTest

final class ClusterCatchUpTests: XCTestCase {
    /// A datagram socket bound in the sandbox that takes sd_notify messages.
    private final class NotifyListener {
        let path: String
        let fd: Int32

        init(_ sandbox: Sandbox) {
            path = sandbox.root + "/notify.sock"
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            var timeout = timeval(tv_sec: 20, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(fd) }

        /// The next message, or "" after 20 s without one.
        func next() -> String {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, 0)
            return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : ""
        }
    }

    /// Waits until `index` has no request to etcd under way: a proposal it sent while it applied
    /// etcd's history is decided.
    private func settled(_ hosts: ClusterHosts, _ index: Int) {
        waitFor("host \(index) without requests under way") {
            let cluster = (try? hosts.request(index, #"{"op":"stats"}"#))?["cluster"] as? [String: Any]
            return cluster?["requests_sent"] as? Int == 0 && cluster?["requests_waiting"] as? Int == 0
        }
    }

    /// Puts `revisions` revisions of about 100 KB (ten keys of 10 KB, one batch each) through
    /// host 0, pipelined: enough history that a host takes a while to apply it. The value each
    /// key ends with, and the last revision.
    private func writeHistory(_ hosts: ClusterHosts, revisions: Int) throws -> (value: String, rev: Int) {
        let client = try hosts.client(0)
        let pad = String(repeating: "v", count: 10_000)
        var sent = 0, answered = 0, last = 0
        while answered < revisions {
            while sent < revisions, sent - answered < 16 {
                let ops = (0..<10).map { #"{"op":"set","key":"k.\#($0)","value":"\#(sent)-\#(pad)"}"# }
                client.send(#"{"op":"batch","ops":["# + ops.joined(separator: ",") + "]}\n")
                sent += 1
            }
            let answer = json(client.readLine())
            XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)")
            last = max(last, answer["rev"] as? Int ?? 0)
            answered += 1
        }
        return ("\(revisions - 1)-\(pad)", last)
    }

    /// Makes every watch of the host ask etcd for fragments, which etcd 3.4 sends slowly (in a
    /// time that grows with the square of their events): a debug build's test hook. The tests
    /// that need a host to apply etcd's history for a while set it (a host asks for fragments
    /// only after a message of etcd's was too large).
    static let slowHistory = ["OBSD_TEST_WATCH_FRAGMENTS": "1"]

    /// Starts host `index` again (killed before) without waiting for it to listen: it has read
    /// the state it starts from once it logs that it applies etcd's history. Its watches ask
    /// for fragments (`slowHistory`), so that it takes a while.
    private func startApplyingHistory(_ hosts: ClusterHosts, _ index: Int) throws -> ObsdProcess {
        let obsd = try ObsdProcess(hosts.sandbox, arguments: hosts.arguments(index) + ["--config", hosts.sandbox.root + "/h\(index).conf"],
                                   environment: Self.slowHistory, name: "h\(index).again")
        waitFor("host \(index) to apply etcd's history") { obsd.log.contains("applying etcd's history") || obsd.log.contains("error:") }
        return obsd
    }

    /// etcd loses its quorum while a host that starts applies etcd's history: what it applied is
    /// older than etcd's state when it started (and than what the other hosts serve). It must
    /// not serve that: its start fails, as it does when etcd cannot be read at start.
    func test_quorumLostWhileAHostAppliesEtcdsHistory_itsStartFails_ratherThanServeAnOlderState() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        hosts.kill(1)
        let newest = try writeHistory(hosts, revisions: 400).value

        let obsd = try startApplyingHistory(hosts, 1)
        etcd.kill(0)
        etcd.kill(1)
        if obsd.waitUntilListening(hosts.socket(1)) {
            // It applied everything before the quorum went: it serves etcd's state.
            let read = try hosts.request(1, #"{"op":"get","key":"k.0"}"#)
            XCTAssertEqual(read["value"] as? String, newest, "served \(String(describing: read["value"]).prefix(20)) "
                           + "from revision \(read["rev"] ?? "?")\n\(obsd.log)")
            if read["value"] as? String == newest { print("the host applied etcd's history before the quorum was lost") }
        } else {
            XCTAssertEqual(obsd.waitForExit(), 1, obsd.log)
            XCTAssertTrue(obsd.log.contains("cannot apply etcd's history up to revision"), obsd.log)
        }
    }

    /// The member a host that starts watches hangs (stopped, its disk stalled) while it applies
    /// etcd's history, and the others keep the quorum: the host finds the watch stalled and
    /// watches again from the member that answers, as while it serves, and that watch has the
    /// time to bring the rest: the host starts with etcd's state and its history.
    func test_theWatchedMemberHangsWhileAHostAppliesEtcdsHistory_theHostWatchesAnotherAndStarts() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        hosts.kill(1)
        let (newest, last) = try writeHistory(hosts, revisions: 400)

        // Every request went to the first endpoint so far, and so does the watch.
        let obsd = try startApplyingHistory(hosts, 1)
        etcd.pause(0)
        defer { etcd.resume(0) }
        XCTAssertTrue(obsd.waitUntilListening(hosts.socket(1)), obsd.log)
        let read = try hosts.request(1, #"{"op":"get","key":"k.0"}"#)
        XCTAssertEqual(read["value"] as? String, newest, "served \(String(describing: read["value"]).prefix(20)) "
                       + "from revision \(read["rev"] ?? "?")\n\(obsd.log)")
        XCTAssertTrue(obsd.log.contains("applied etcd's history"), obsd.log)
        // Its history holds what a watch from before its start missed (as far as history_bytes
        // keeps: the last revisions).
        let client = try hosts.client(1)
        client.send(#"{"op":"watch","keys":["k.9"],"since":\#(last - 5)}"# + "\n")
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        XCTAssertEqual(ClusterHosts.event(client)["rev"] as? Int, last - 4, obsd.log)
    }

    /// etcd 3.4 sends a watch that fell behind slowly when its revisions hold many small events
    /// and the watch asks for fragments (`slowHistory`): it splits a message into fragments in a
    /// time that grows with the square of their events (here seconds with nothing sent). A host
    /// that starts waits for them while etcd answers
    /// (the lease's renewals are far apart here: the host asks), asks systemd for more time as it
    /// goes, and starts with etcd's state.
    func test_aHistoryEtcdSendsSlowly_theHostWaitsWhileEtcdAnswers_andStarts() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        // Short names: the more events a fragment holds, the longer etcd takes to make it.
        let hosts = try ClusterHosts(etcd, count: 2, timeout: "2s", ephemeralTTL: "60s", prefix: "/s\(UInt16.random(in: 0...UInt16.max))/")
        hosts.kill(1)
        let client = try hosts.client(0)
        let revisions = 600
        var sent = 0, answered = 0, last = 0
        while answered < revisions {
            while sent < revisions, sent - answered < 16 {
                let ops = (0..<100).map { #"{"op":"set","key":"k.\#($0)","value":\#(sent)}"# }
                client.send(#"{"op":"batch","ops":["# + ops.joined(separator: ",") + "]}\n")
                sent += 1
            }
            let answer = json(client.readLine())
            XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)")
            last = max(last, answer["rev"] as? Int ?? 0)
            answered += 1
        }

        // Under systemd, which waits 90 s for a start by default: it is asked for more time.
        let notify = NotifyListener(hosts.sandbox)
        let started = Date()
        let obsd = try ObsdProcess(hosts.sandbox, arguments: hosts.arguments(1) + ["--config", hosts.sandbox.root + "/h1.conf"],
                                   environment: Self.slowHistory.merging(["NOTIFY_SOCKET": notify.path]) { $1 }, name: "h1.again")
        var messages: [String] = []
        while !messages.contains(where: { $0.contains("READY=1") }) {
            let message = notify.next()
            XCTAssertFalse(message.isEmpty, "no sd_notify message for 20 s: \(messages)\n\(obsd.log)")
            if message.isEmpty { return }
            messages.append(message)
        }
        let took = Date().timeIntervalSince(started)
        let read = try hosts.request(1, #"{"op":"get","key":"k.99"}"#)
        XCTAssertEqual(read["value"] as? Int, revisions - 1, "\(read)\n\(obsd.log)")
        XCTAssertEqual(read["rev"] as? Int, last)
        XCTAssertTrue(obsd.log.contains("applied etcd's history"), obsd.log)
        // Each report (every 10 s while it applies etcd's history, logged) asks for more time.
        let extensions = messages.filter { $0.contains("EXTEND_TIMEOUT_USEC=30000000") && $0.contains("STATUS=applying etcd's history") }
        let reports = obsd.log.components(separatedBy: "cluster: applying etcd's history: at revision").count - 1
        XCTAssertEqual(extensions.count, reports, "in \(took) s: \(messages)\n\(obsd.log)")
        print("started in \(took) s, \(reports) times asking systemd for more time")
    }

    /// A host behind on large values (10 MB of 100 KiB values, sent in fragments of about
    /// 1.5 MB as after a message too large) applies etcd's history slower than etcd sends it,
    /// and more of it waits in its watch than the client keeps (`maxWatchBacklogBytes`, 32 MiB,
    /// here 1 MiB: a debug build's test hook): the client stops reading and hands over what it
    /// kept, and the host watches again at once from the last revision it applied, without
    /// taking etcd for unavailable (nor waiting a second to go on, nor letting its lease run
    /// out), and starts with etcd's state.
    func test_aHostBehindOnLargeValues_appliesHistorySlowerThanEtcdSends_withoutTakingEtcdForUnavailable() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        hosts.kill(1)
        let pad = String(repeating: "v", count: 100 << 10)
        let client = try hosts.client(0)
        let revisions = 100
        var sent = 0, answered = 0, last = 0
        while answered < revisions {
            while sent < revisions, sent - answered < 16 {
                client.send(#"{"op":"set","key":"k.\#(sent % 50)","value":"\#(sent)-\#(pad)"}"# + "\n")
                sent += 1
            }
            let answer = json(client.readLine())
            XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer.keys)")
            last = max(last, answer["rev"] as? Int ?? 0)
            answered += 1
        }

        let started = Date()
        let obsd = try ObsdProcess(hosts.sandbox, arguments: hosts.arguments(1) + ["--config", hosts.sandbox.root + "/h1.conf"],
                                   environment: Self.slowHistory.merging(["OBSD_TEST_WATCH_BACKLOG_BYTES": "\(1 << 20)"]) { $1 },
                                   name: "h1.again")
        XCTAssertTrue(waitFor("host 1 to start", timeout: 300) { obsd.log.contains(" listening on ") || obsd.log.contains("error:") }, obsd.log)
        let log = obsd.log
        let behind = log.components(separatedBy: "applies etcd's history slower than etcd sends it").count - 1
        // (A host that applies as fast as etcd sends has nothing to show here.)
        print("started in \(Date().timeIntervalSince(started)) s; said it was slower than its watch \(behind) times")
        XCTAssertTrue(obsd.waitUntilListening(hosts.socket(1)), log)
        let read = try hosts.request(1, #"{"op":"get","key":"k.49"}"#)
        XCTAssertEqual(read["value"] as? String, "\(revisions - 1)-\(pad)", log)
        XCTAssertEqual(read["rev"] as? Int, last)
        XCTAssertTrue(log.contains("applied etcd's history"), log)
        XCTAssertFalse(log.contains("etcd unavailable"), log)
        XCTAssertFalse(log.contains("etcd answers again"), log)
        XCTAssertFalse(log.contains("expired or was revoked"), log)
        XCTAssertLessThanOrEqual(behind, 1, log)
        let stats = try hosts.request(1, #"{"op":"stats"}"#)["cluster"] as? [String: Any] ?? [:]
        XCTAssertEqual(stats["state"] as? String, "connected", "\(stats)")
    }

    /// etcd compacts its history past the revision of a host that applies it at start (here the
    /// host is stopped meanwhile, and etcd holds its watch back): the host reads everything
    /// again, starts with etcd's state, and says its history starts at that read, not at the
    /// older revision it started from (what came before the read is gone from its history).
    func test_etcdCompactsWhileAHostAppliesItsHistory_theHostSaysItsHistoryStartsAtTheReadAgain() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        hosts.kill(1)
        _ = try writeHistory(hosts, revisions: 500)

        let obsd = try startApplyingHistory(hosts, 1)
        obsd.signal(SIGSTOP)
        // More changes than etcd queues for a watch whose reader is stopped: it holds the watch
        // back, to send from its history later, which the compaction then removes.
        let client = try hosts.client(0)
        var last = 0
        for index in 0..<300 { client.send(#"{"op":"set","key":"small","value":\#(index)}"# + "\n") }
        for _ in 0..<300 { last = max(last, json(client.readLine())["rev"] as? Int ?? 0) }
        try etcd.etcdctl(["compaction", "\(last)"])
        obsd.signal(SIGCONT)

        XCTAssertTrue(obsd.waitUntilListening(hosts.socket(1)), obsd.log)
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"small"}"#)["value"] as? Int, 299, obsd.log)
        let log = obsd.log
        XCTAssertTrue(log.contains("etcd compacted its history to revision"), log)
        let line = try XCTUnwrap(log.split(separator: "\n").first { $0.contains("applied etcd's history from revision") }, log)
        let from = try XCTUnwrap(Int(line.split(separator: " ").drop { $0 != "revision" }.dropFirst().first ?? ""), String(line))
        XCTAssertGreaterThanOrEqual(from, last, String(line))
        XCTAssertTrue(line.contains("read again at revision \(from)") && line.contains("may resume from \(from) on"), String(line))
    }

    /// The host's endpoints name members of two etcd clusters, and the one it read its state
    /// from goes away while it applies etcd's history: it fails over to the other, whose answers
    /// give the mix-up away (their cluster ID). What it applied is neither cluster's state now:
    /// its start fails, rather than serve it.
    func test_aHostThatFindsAnotherEtcdClusterWhileItAppliesEtcdsHistory_failsItsStart() throws {
        let meant = try startEtcdCluster()
        defer { meant.shutDown() }
        let other = try startEtcdCluster()
        defer { other.shutDown() }
        let hosts = try ClusterHosts(meant, count: 2, extra: ["--etcd-endpoints", "\(meant.endpoints[0]),\(other.endpoints[0])"])
        hosts.kill(1)
        _ = try writeHistory(hosts, revisions: 400)

        let obsd = try startApplyingHistory(hosts, 1)
        for index in meant.members.indices { meant.kill(index) }
        if obsd.waitUntilListening(hosts.socket(1)) {
            let stats = try hosts.request(1, #"{"op":"stats"}"#)["cluster"] as? [String: Any] ?? [:]
            XCTAssertEqual(stats["applied_rev"] as? Int, stats["etcd_rev"] as? Int, "serves an older state: \(stats)\n\(obsd.log)")
            if stats["applied_rev"] as? Int == stats["etcd_rev"] as? Int { print("the host applied etcd's history before its cluster went") }
        } else {
            XCTAssertEqual(obsd.waitForExit(), 1, obsd.log)
            XCTAssertTrue(obsd.log.contains("cannot apply etcd's history up to revision"), obsd.log)
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
