// Cluster mode against more of what an unlucky operator meets: etcd re-created under running
// hosts (its revisions starting again lower), a compaction at the newest revision, hosts down while
// a TTL key's deadline passes, and the upgrade path from one prefix to another with obsctl.
import Foundation
import Glibc
import TestSupport
import XCTest

final class ClusterHostile2Tests: XCTestCase {
    /// Waits until the host shows a state other than the usual ones (the damage found), or
    /// answers that `a`, which only the state it applied holds, is not found; its cluster state
    /// and that answer.
    private func damageOrNewState(_ hosts: ClusterHosts) -> (state: String, read: [String: Any]) {
        var state = "", read: [String: Any] = [:]
        waitFor("the host to show the damage, or to serve etcd's state") {
            state = ((try? hosts.request(0, #"{"op":"stats"}"#))?["cluster"] as? [String: Any])?["state"] as? String ?? ""
            read = (try? hosts.request(0, #"{"op":"get","key":"a"}"#)) ?? [:]
            return !["connected", "degraded", "unavailable", ""].contains(state) || (read["error"] as? [String: Any])?["code"] as? String == "not_found"
        }
        return (state, read)
    }

    /// Waits until host `index` shows `diverged` in its stats; fails the test, with the state it
    /// showed last, if it does not within `timeout` seconds.
    private func waitUntilDiverged(_ hosts: ClusterHosts, _ index: Int, _ what: String, timeout: Double,
                                   file: StaticString = #filePath, line: UInt = #line) {
        var state = ""
        XCTAssertTrue(waitFor(what, timeout: timeout) {
            state = ((try? hosts.request(index, #"{"op":"stats"}"#))?["cluster"] as? [String: Any])?["state"] as? String ?? ""
            return state == "diverged"
        }, "state \(state)\n\(hosts.logs)", file: file, line: line)
    }

    /// etcd's data lost and the cluster made again (or restored from an old snapshot) on the same
    /// endpoints, under a running host: etcd's revisions are now lower than the ones the host
    /// applied. The host must not acknowledge a write it then does not serve: a client that
    /// writes and then reads on one host sees its write, or the write fails saying what happened
    /// and stats show the host is not connected.
    func test_etcdRecreatedWithLowerRevisions_aWriteAcknowledgedIsServed() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 1)
        // Other applications' writes move etcd's revision on, past what a new cluster reaches at once.
        for index in 0..<20 { try etcd.etcdctl(["put", "/another-application/\(index)", "x"]) }
        let applied = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"a","value":1}"#)["rev"] as? Int)

        for index in etcd.members.indices { etcd.stop(index) }
        for member in etcd.members { try FileManager.default.removeItem(atPath: member.dataDirectory) }
        try etcd.restart(Array(etcd.members.indices))

        // The host reaches the new cluster within a few of its retries; until then writes are unavailable.
        var answer: [String: Any] = [:]
        waitFor("a write acknowledged, or refused for etcd's history going back") {
            answer = (try? hosts.request(0, #"{"op":"set","key":"b","value":1}"#)) ?? [:]
            return answer["ok"] as? Bool == true || ((answer["error"] as? [String: Any])?["message"] as? String ?? "").contains("went back")
        }
        let stats = try hosts.request(0, #"{"op":"stats"}"#)["cluster"] as? [String: Any] ?? [:]
        guard answer["ok"] as? Bool == true else {
            XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"a"}"#)["value"] as? Int, 1, "reads go on")
            return XCTAssertNotEqual(stats["state"] as? String, "connected", "\(answer)")
        }
        let read = try hosts.request(0, #"{"op":"get","key":"b"}"#)
        XCTAssertEqual(read["value"] as? Int, 1,
                       "set b answered \(answer) after the host applied revision \(applied); get b answers \(read); stats \(stats)\n\(hosts.logs)")
        XCTAssertGreaterThan(answer["rev"] as? Int ?? 0, applied, "revisions went backwards on one host")
    }

    /// The same under a host that only reads: it cannot wait for a write to find it out. Its
    /// watch, set up again on the new cluster, starts at a revision etcd says is older than the
    /// one the host applied; the host must find the damage (a member that lags says the same for a
    /// moment, but a linearizable read tells them apart) rather than serve, as connected, keys
    /// etcd no longer holds.
    func test_etcdRecreatedWithLowerRevisions_underAHostThatOnlyReads_isFound() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 1)
        for index in 0..<20 { try etcd.etcdctl(["put", "/another-application/\(index)", "x"]) }
        _ = try hosts.request(0, #"{"op":"set","key":"a","value":1}"#)

        for index in etcd.members.indices { etcd.stop(index) }
        for member in etcd.members { try FileManager.default.removeItem(atPath: member.dataDirectory) }
        try etcd.restart(Array(etcd.members.indices))

        let (state, read) = damageOrNewState(hosts)
        XCTAssertNotEqual(state, "connected", "a key etcd no longer holds is served as connected: \(read)\n\(hosts.logs)")
    }

    /// A host whose endpoints name members of two different etcd clusters (a misconfiguration:
    /// one member of the cluster meant, one of another that holds other data), failing over from
    /// the first to the second: what it applied from the first is not the second's state. It must
    /// not go on as connected, serving both (etcd's answers carry the cluster's ID).
    func test_endpointsOfTwoDifferentEtcdClusters_failingOver_isFound() throws {
        let meant = try startEtcdCluster()
        defer { meant.shutDown() }
        let other = try startEtcdCluster()
        defer { other.shutDown() }
        // The other cluster is ahead, so nothing in its revisions gives the mix-up away.
        for index in 0..<30 { try other.etcdctl(["put", "/another-application/\(index)", "x"]) }
        let hosts = try ClusterHosts(meant, count: 1, extra: ["--etcd-endpoints", "\(meant.endpoints[0]),\(other.endpoints[0])"])
        XCTAssertEqual(try hosts.request(0, #"{"op":"set","key":"a","value":1}"#)["ok"] as? Bool, true)
        for index in meant.members.indices { meant.kill(index) }

        let answer = try hosts.request(0, #"{"op":"set","key":"b","value":1}"#)
        let (state, read) = damageOrNewState(hosts)
        XCTAssertNotEqual(state, "connected", "set b on the other cluster answered \(answer); a, which only the first holds, reads \(read)\n\(hosts.logs)")
    }

    /// The same mix-up under a host that only reads: its watch, set up again on the other
    /// cluster's member, brings that cluster's records under the prefix. None of them may be
    /// applied: the watch's first message names its cluster. (The host's lease is renewed every
    /// 20 s here, so that no answer to a request of its own finds it out first.)
    func test_endpointsOfTwoDifferentEtcdClusters_underAHostThatOnlyReads_applyNothingOfTheOther() throws {
        let meant = try startEtcdCluster()
        defer { meant.shutDown() }
        let other = try startEtcdCluster()
        defer { other.shutDown() }
        let prefix = "/two-clusters-\(UInt32.random(in: 0...UInt32.max))/"
        for index in 0..<30 { try other.etcdctl(["put", "/another-application/\(index)", "x"]) }
        try other.etcdctl(["put", prefix + "k/only-in-the-other", #"{"value":7}"#])
        let hosts = try ClusterHosts(meant, count: 1, extra: ["--etcd-endpoints", "\(meant.endpoints[0]),\(other.endpoints[0])"],
                                     ephemeralTTL: "60s", prefix: prefix)
        XCTAssertEqual(try hosts.request(0, #"{"op":"set","key":"a","value":1}"#)["ok"] as? Bool, true)
        for index in meant.members.indices { meant.kill(index) }

        waitUntilDiverged(hosts, 0, "the host to find its watch on another cluster", timeout: 15)
        let read = try hosts.request(0, #"{"op":"get","key":"only-in-the-other"}"#)
        XCTAssertEqual((read["error"] as? [String: Any])?["code"] as? String, "not_found", "the other cluster's record was applied: \(read)")
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"a"}"#)["value"] as? Int, 1, "reads go on")
        // Found by the watch set up there, or by the answer to the read the host sends when its
        // watch ends: either before anything of the other cluster is applied.
        XCTAssertTrue(hosts.logs.contains("the watch of etcd at \(other.endpoints[0]) is for cluster")
                      || hosts.logs.contains("etcd at \(other.endpoints[0]) answered for cluster"), hosts.logs)
    }

    /// A host whose watch found etcd's history compacted reads the prefix again; before it takes
    /// the read's answer (held 8 s here), the etcd cluster it reads from goes away and its
    /// endpoints lead it to another cluster's member: diverged. The answer, from the first
    /// cluster, must then change nothing: a diverged host serves what it applied, and takes
    /// nothing more, however it comes.
    func test_theReadAfterACompaction_answeredOnceTheHostDiverged_changesNothing() throws {
        let meant = try startEtcdCluster()
        defer { meant.shutDown() }
        let other = try startEtcdCluster()
        defer { other.shutDown() }
        let hosts = try ClusterHosts(meant, count: 2, extra: ["--etcd-endpoints", "\(meant.endpoints[0]),\(other.endpoints[0])"],
                                     environment: ["OBSD_TEST_HOLD_RESYNC_ANSWERS_MS": "8000"])
        XCTAssertEqual(try hosts.request(0, #"{"op":"set","key":"a","value":1}"#)["ok"] as? Bool, true)
        XCTAssertTrue(waitFor("host 2 to apply a") { (try? hosts.request(1, #"{"op":"get","key":"a"}"#)["value"] as? Int) == 1 })
        let watcher = try watch(hosts, 1, ["a", "b"])
        let slow = try XCTUnwrap(hosts.hosts[1])
        slow.signal(SIGSTOP)
        // Enough to fill every buffer between etcd and the stopped host, so that etcd has to
        // replay its watch from its history, which the compaction then takes away.
        let value = String(repeating: "x", count: 16_384)
        let writer = try hosts.client(0)
        for index in 0..<1200 {
            writer.send(#"{"op":"set","key":"big.\#(index % 50)","value":"\#(value)\#(index)"}"# + "\n")
            if index % 100 == 99 { for _ in 0..<100 { _ = writer.readLine() } }
        }
        _ = try hosts.request(0, #"{"op":"set","key":"a","value":2}"#)
        let last = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"b","value":3}"#)["rev"] as? Int)
        try meant.etcdctl(["compaction", "\(last)"])
        slow.signal(SIGCONT)
        XCTAssertTrue(waitFor("the host to find etcd's history compacted") { slow.log.contains("etcd compacted its history to revision") },
                      slow.log)
        // The read is answered by the first cluster within milliseconds, and held.
        Thread.sleep(forTimeInterval: 0.5)
        for index in meant.members.indices { meant.kill(index) }
        waitUntilDiverged(hosts, 1, "the host to find the other cluster", timeout: 7)
        // Past the read's hold: its answer has been taken.
        Thread.sleep(forTimeInterval: 8)
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"a"}"#)["value"] as? Int, 1, slow.log)
        XCTAssertEqual((try hosts.request(1, #"{"op":"get","key":"b"}"#)["error"] as? [String: Any])?["code"] as? String, "not_found")
        XCTAssertEqual(((try hosts.request(1, #"{"op":"stats"}"#))["cluster"] as? [String: Any])?["state"] as? String, "diverged")
        // Its watcher got no snapshot either.
        var readable = pollfd(fd: watcher.fd, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&readable, 1, 0), 0, "the watcher got: \(watcher.readLine() ?? "")")
    }

    /// A compaction at the newest revision while every host is caught up (an operator's routine
    /// `etcdctl compaction`): the watches go on with the next change, no `compacted`, nothing lost.
    func test_compactionAtTheNewestRevision_underCaughtUpHosts_isInvisible() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        let watcher = try watch(hosts, 1, ["c"])
        let first = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"c","value":1}"#)["rev"] as? Int)
        XCTAssertEqual(ClusterHosts.event(watcher)["new"] as? Int, 1)
        try hosts.etcd.etcdctl(["compaction", "\(first)"])
        for value in 2...4 { _ = try hosts.request(0, "{\"op\":\"set\",\"key\":\"c\",\"value\":\(value)}") }
        var events: [String] = []
        while events.last != "change 4" {
            let event = ClusterHosts.event(watcher)
            guard let name = event["event"] as? String else { break }
            events.append("\(name)\((event["new"] as? Int).map { " \($0)" } ?? "")")
        }
        XCTAssertEqual(events, ["change 2", "change 3", "change 4"], hosts.logs)
        // A host started afterwards reads the compacted state.
        let later = try ClusterHosts(hosts.etcd, count: 1, prefix: hosts.prefix)
        XCTAssertEqual(try later.request(0, #"{"op":"get","key":"c"}"#)["value"] as? Int, 4)
    }

    /// Every host is down while a TTL key's deadline passes: the hosts that start again find it
    /// past its deadline and expire it, once (both propose; one delete commits), with reason ttl.
    func test_aTTLKeyWhoseDeadlinePassedWhileEveryHostWasDown_expiresOnceAtStart() throws {
        // A cluster of its own: revisions are counted, and other tests' leases running out on
        // a shared one would add revisions in between.
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        let set = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"t","value":1,"ttl_ms":1000}"#)["rev"] as? Int)
        let deadline = Date().addingTimeInterval(1)
        hosts.kill(0)
        hosts.kill(1)
        waitFor("the deadline to pass") { Date() > deadline.addingTimeInterval(0.5) }
        try hosts.start(0)
        try hosts.start(1)
        for index in 0..<2 {
            waitFor("host \(index) to expire t") {
                ((try? hosts.request(index, #"{"op":"get","key":"t"}"#))?["error"] as? [String: Any])?["code"] as? String == "not_found"
            }
        }
        let history = try hosts.etcd.etcdctl(["get", hosts.prefix + "m/reason", "--print-value-only", "--rev", "\(set + 1)"])
        XCTAssertEqual(history.trimmingCharacters(in: .whitespacesAndNewlines), #""ttl""#, "revision \(set + 1) is not the expiry")
        let marker = try XCTUnwrap(try hosts.request(1, #"{"op":"set","key":"marker","value":1}"#)["rev"] as? Int)
        XCTAssertEqual(marker, set + 2, "the expiry was not one transaction\n\(hosts.logs)")
    }

    /// The documented upgrade path, with obsctl, from one cluster prefix to another: `obsctl dump`
    /// on a host of the first, `obsctl restore` on a host of the second. Keys, computeds, bindings
    /// and TTL keys (with their deadline) arrive; ephemeral keys, which belong to a connection, do not.
    func test_obsctlDumpThenRestoreIntoAnotherPrefix_keepsKeysComputedsBindingsAndDeadlines() throws {
        let etcd = try SharedEtcd.get()
        let old = try ClusterHosts(etcd, count: 1)
        let owner = try old.client(0)
        for line in [#"{"op":"set","key":"a","value":20}"#, #"{"op":"define","key":"f","expr":"$a * 9 / 5 + 32"}"#,
                     #"{"op":"bind","from":"a","to":"b"}"#, #"{"op":"set","key":"t","value":"soon","ttl_ms":3000}"#,
                     #"{"op":"set","key":"e","value":1,"ephemeral":true}"#] {
            owner.send(line + "\n")
            XCTAssertEqual(json(owner.readLine())["ok"] as? Bool, true, line)
        }
        let dump = try obsctl(old.socket(0), ["dump"])
        XCTAssertEqual(dump.status, 0, dump.error)

        let new = try ClusterHosts(etcd, count: 2)
        let watcher = try watch(new, 1, ["t"])
        let restore = try obsctl(new.socket(0), ["restore"], input: dump.output)
        XCTAssertEqual(restore.status, 0, "\(restore.error)\n\(new.logs)")
        let restored = ClusterHosts.event(watcher)
        XCTAssertEqual(restored["new"] as? String, "soon", "\(restored)")
        XCTAssertEqual(try new.request(1, #"{"op":"get","key":"f"}"#)["value"] as? Int, 68)
        XCTAssertEqual(try new.request(1, #"{"op":"get","key":"b"}"#)["value"] as? Int, 20)
        XCTAssertEqual((try new.request(1, #"{"op":"get","key":"e"}"#)["error"] as? [String: Any])?["code"] as? String, "not_found")
        // The TTL key keeps its deadline and expires on the new prefix, once.
        let expired = ClusterHosts.event(watcher)
        XCTAssertEqual(expired["event"] as? String, "delete", "\(expired)\n\(new.logs)")
        XCTAssertEqual(expired["reason"] as? String, "ttl")
        _ = try new.request(1, #"{"op":"set","key":"a","value":100}"#)
        waitFor("the restored binding on host 0") { (try? new.request(0, #"{"op":"get","key":"b"}"#)["value"] as? Int) == 100 }
        withExtendedLifetime(owner) {}
    }

    /// The upgrade path for a state larger than one etcd transaction takes (more than 128 keys,
    /// etcd's default `--max-txn-ops`): `obsctl restore` refuses it whole with `too_large` and
    /// restores nothing; `obsctl restore --split` restores all of it, in as many transactions as
    /// etcd takes, and every host ends with the whole state.
    func test_obsctlRestoreSplit_ofMoreKeysThanOneEtcdTransactionTakes_restoresThemAll() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        var keys: [[String: Any]] = (0..<300).map { ["key": "v\($0)", "kind": "value", "value": $0] }
        keys += (0..<20).map { ["key": "c\($0)", "kind": "computed", "expr": "$v\($0) * 2"] }
        let bindings: [[String: Any]] = (0..<10).map { ["from": "v\($0)", "to": "t\($0)"] }
        let dump = String(decoding: try JSONSerialization.data(withJSONObject: ["keys": keys, "bindings": bindings]), as: UTF8.self)

        let whole = try obsctl(hosts.socket(0), ["restore"], input: dump)
        XCTAssertNotEqual(whole.status, 0)
        XCTAssertTrue(whole.error.contains("too_large"), whole.error)
        XCTAssertTrue(whole.error.hasSuffix("; obsctl restore --split restores it in as many transactions as it needs\n"), whole.error)
        XCTAssertEqual((try hosts.request(0, #"{"op":"get","key":"v0"}"#)["error"] as? [String: Any])?["code"] as? String, "not_found")

        let split = try obsctl(hosts.socket(0), ["restore", "--split"], input: dump)
        XCTAssertEqual(split.status, 0, "\(split.error)\n\(hosts.logs)")
        XCTAssertTrue(split.error.contains("restore: 330 items in "), split.error)
        waitFor("the last binding on the other host") { (try? hosts.request(1, #"{"op":"get","key":"t9"}"#)["value"] as? Int) == 9 }
        let restored = try obsctl(hosts.socket(1), ["dump"])
        let state = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(restored.output.utf8)) as? [String: Any])
        let found = Dictionary(uniqueKeysWithValues: (state["keys"] as? [[String: Any]] ?? []).map { ($0["key"] as? String ?? "", $0) })
        XCTAssertEqual(found.count, 330, "300 values, 20 computeds, 10 binding targets")
        for index in 0..<300 { XCTAssertEqual(found["v\(index)"]?["value"] as? Int, index, "v\(index)") }
        for index in 0..<20 { XCTAssertEqual(found["c\(index)"]?["expr"] as? String, "$v\(index) * 2", "c\(index)") }
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"c19"}"#)["value"] as? Int, 38)
        XCTAssertEqual((state["bindings"] as? [Any])?.count, 10)
    }

    /// `obsctl watch --reconnect` on a host that is killed and started again while another host
    /// writes: it resumes with `since` on the restarted host (whose history starts afresh), so
    /// every change arrives once, or a `compacted` and a snapshot holding the latest value.
    func test_obsctlWatchReconnect_acrossARestartOfItsHost_losesAndRepeatsNothing() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        _ = try hosts.request(1, #"{"op":"set","key":"w","value":0}"#)
        let watcher = Process()
        watcher.executableURL = URL(fileURLWithPath: try builtExecutable("obsctl"))
        watcher.arguments = ["--socket", hosts.socket(0), "watch", "w", "--no-initial", "--reconnect", "--timeout", "30s"]
        let stdout = Pipe()
        watcher.standardOutput = stdout
        try watcher.run()
        defer { if watcher.isRunning { watcher.terminate() } }
        var buffer = Data()
        var lines: [[String: Any]] = []
        /// Reads obsctl's lines until a change to `value` or a snapshot holding it (nil: its synced
        /// line); false when it ended.
        func read(until value: Int?) -> Bool {
            while true {
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    let object = json(String(decoding: buffer[..<newline], as: UTF8.self))
                    buffer.removeSubrange(...newline)
                    lines.append(object)
                    if let value, object["new"] as? Int == value || object["value"] as? Int == value { return true }
                    if value == nil, object["event"] as? String == "synced" { return true }
                }
                let more = stdout.fileHandleForReading.availableData
                if more.isEmpty { return false }
                buffer.append(more)
            }
        }
        XCTAssertTrue(read(until: nil))
        _ = try hosts.request(1, #"{"op":"set","key":"w","value":1}"#)
        XCTAssertTrue(read(until: 1))
        hosts.kill(0)
        _ = try hosts.request(1, #"{"op":"set","key":"w","value":2}"#)
        _ = try hosts.request(1, #"{"op":"set","key":"w","value":3}"#)
        try hosts.start(0)
        _ = try hosts.request(1, #"{"op":"set","key":"w","value":4}"#)
        XCTAssertTrue(read(until: 4), "\(lines)\n\(hosts.logs)")
        // What a client rebuilds from the lines: every change once, or a snapshot then what followed it.
        var seen: [Int] = []
        for line in lines {
            switch line["event"] as? String {
            case "change": seen.append(line["new"] as? Int ?? -1)
            case "compacted": seen.append(-100)
            case "initial": seen.append(line["value"] as? Int ?? -1)
            default: break
            }
        }
        XCTAssertTrue([[1, 2, 3, 4], [1, -100, 3, 4], [1, -100, 4]].contains(seen), "\(seen): \(lines)")
    }

    /// `obsctl apply` of a definitions file on one host: every host has its keys, computeds and
    /// bindings; applied again on another host, it changes nothing (no revision).
    func test_obsctlApplyOnOneHost_isSeenOnAnother_andAgainChangesNothing() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        let file = hosts.sandbox.root + "/definitions"
        try hosts.sandbox.write("""
            # status bar
            set volume 0.4
            define volume.label 'format("{}%", round($volume * 100))'
            bind net.ssid bar.wifi --map 'value ?? "offline"'
            """, to: file)
        let first = try obsctl(hosts.socket(0), ["apply", file])
        XCTAssertEqual(first.status, 0, first.error)
        let rev = try XCTUnwrap(try hosts.request(0, #"{"op":"ping"}"#)["rev"] as? Int)
        waitFor("host 1 at \(rev)") { (try? hosts.request(1, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= rev }
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"volume.label"}"#)["value"] as? String, "40%")
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"bar.wifi"}"#)["value"] as? String, "offline")
        let again = try obsctl(hosts.socket(1), ["apply", file])
        XCTAssertEqual(again.status, 0, again.error)
        XCTAssertEqual(try hosts.request(1, #"{"op":"ping"}"#)["rev"] as? Int, rev, "applying the file again made a revision\n\(again.output)")
        _ = try hosts.request(1, #"{"op":"set","key":"net.ssid","value":"home"}"#)
        waitFor("the binding on host 0") { (try? hosts.request(0, #"{"op":"get","key":"bar.wifi"}"#)["value"] as? String) == "home" }
    }

    /// Fifty pattern watches on one connection of one host that reads nothing while another host
    /// writes fast: the host bounds what it queues for that client (`overflow`), and once the
    /// client reads, every watch ends holding every key's last value (a snapshot after its
    /// overflow, then live changes); the host answers others meanwhile.
    func test_manyPatternWatches_onAClientThatDoesNotRead_overflowAndEndWithTheLastValues() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        let slow = try hosts.client(1)
        for _ in 0..<50 {
            slow.send(#"{"op":"watch","keys":["k.*"],"initial":false}"# + "\n")
            XCTAssertEqual(json(slow.readLine())["ok"] as? Bool, true)
            XCTAssertEqual(ClusterHosts.event(slow)["event"] as? String, "synced")
        }
        let value = String(repeating: "v", count: 4096)
        let writer = try hosts.client(0)
        var last: [String: String] = [:]
        for round in 0..<10 {
            for index in 0..<100 {
                let key = "k.\(index % 20)", written = "\(value)\(round * 100 + index)"
                last[key] = written
                writer.send("{\"op\":\"set\",\"key\":\"\(key)\",\"value\":\"\(written)\"}\n")
            }
            for _ in 0..<100 { XCTAssertEqual(json(writer.readLine())["ok"] as? Bool, true) }
        }
        let end = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"k.done","value":"end"}"#)["rev"] as? Int)
        last["k.done"] = "end"
        waitFor("host 1 at \(end)") { (try? hosts.request(1, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= end }

        var states: [Int: [String: String]] = [:]
        var overflows = 0
        while states.count < 50 || states.values.contains(where: { $0["k.done"] != "end" }) {
            guard let line = slow.readLine() else { break }
            let event = json(line)
            guard let watch = event["watch"] as? Int, let name = event["event"] as? String else { continue }
            switch name {
            case "overflow", "compacted":
                overflows += 1
                states[watch] = [:]
            case "initial", "change":
                if let key = event["key"] as? String { states[watch, default: [:]][key] = event[name == "initial" ? "value" : "new"] as? String }
            default: break
            }
        }
        XCTAssertGreaterThan(overflows, 0, "nothing overflowed: the test did not exceed the client's output bound")
        XCTAssertEqual(states.count, 50)
        for (watch, state) in states where state != last {
            XCTFail("watch \(watch) ends with \(state.count) keys, differing at \(state.keys.filter { state[$0] != last[$0] }.sorted())")
            break
        }
    }
}

/// Runs the built obsctl against `socket` with `input` on its stdin: its exit status and output.
private func obsctl(_ socket: String, _ arguments: [String], input: String = "") throws -> (status: Int32, output: String, error: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try builtExecutable("obsctl"))
    process.arguments = ["--socket", socket] + arguments
    let stdin = Pipe(), stdout = Pipe(), stderr = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stderr
    try process.run()
    stdin.fileHandleForWriting.write(Data(input.utf8))
    try stdin.fileHandleForWriting.close()
    let output = String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let error = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, output, error)
}
