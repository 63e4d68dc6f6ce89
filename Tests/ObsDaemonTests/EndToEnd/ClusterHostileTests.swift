// Cluster mode against what an unlucky operator meets: a hung etcd member, a lease revoked behind
// a host's back, records put under the prefix with etcdctl, writes of one key racing between hosts.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import TestSupport
import XCTest

final class ClusterHostileTests: XCTestCase {
    /// A member frozen (a paused VM, a stalled disk: its sockets stay open and it answers nothing)
    /// while the quorum holds is "one etcd member down": nothing visible but latency. A host whose
    /// watch was on that member must go on applying what the others write.
    func test_aHostWhoseWatchIsOnAHungMember_goesOnApplying() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        try etcd.moveLeader(to: 1)
        // The writer asks member 1 first; the reader member 0 (its watch is there).
        let writer = try ClusterHosts(etcd, count: 1, extra: ["--etcd-endpoints", [1, 2, 0].map { etcd.endpoints[$0] }.joined(separator: ",")])
        let reader = try ClusterHosts(etcd, count: 1, prefix: writer.prefix)
        let watcher = try watch(reader, 0, ["k"])
        _ = try writer.request(0, #"{"op":"set","key":"k","value":1}"#)
        XCTAssertEqual(ClusterHosts.event(watcher)["new"] as? Int, 1, reader.logs)

        etcd.pause(0)
        defer { etcd.resume(0) }
        let answer = try writer.request(0, #"{"op":"set","key":"k","value":2}"#)
        let rev = try XCTUnwrap(answer["rev"] as? Int, "\(answer)\n\(writer.logs)")
        // Waits up to the client's read timeout (20 s, four times etcd_timeout) for the change.
        let event = ClusterHosts.event(watcher)
        let stats = (try? reader.request(0, #"{"op":"stats"}"#))?["cluster"] as? [String: Any] ?? [:]
        XCTAssertEqual(event["new"] as? Int, 2, "the reader never applied revision \(rev); its stats: \(stats)\n\(reader.logs)")
    }

    /// etcd counts one revision for all its keys: writes under another prefix move it on with
    /// nothing for this host's watch. That is not a stalled watch, and it is not set up again.
    func test_writesUnderAnotherPrefix_doNotRestartTheWatch() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 1, timeout: "1s")
        let host = try XCTUnwrap(hosts.hosts[0])
        XCTAssertEqual(try hosts.request(0, #"{"op":"set","key":"k","value":1}"#)["ok"] as? Bool, true)
        let before = try XCTUnwrap(try hosts.request(0, #"{"op":"stats"}"#)["cluster"] as? [String: Any])["etcd_rev"] as? Int ?? 0
        for index in 0..<5 { _ = try etcd.etcdctl(["put", "/another-application/\(index)", "x"]) }
        // The host learns etcd's revision from its lease's renewals (every third of ephemeral_ttl,
        // 2 s here); well past etcd_timeout (1 s) after that, its watch is still the first one.
        XCTAssertTrue(waitFor("the host to see etcd's revision move on") {
            ((try? hosts.request(0, #"{"op":"stats"}"#))?["cluster"] as? [String: Any])?["etcd_rev"] as? Int ?? 0 >= before + 5
        })
        let seen = Date()
        waitFor("three etcd_timeouts to pass") { Date().timeIntervalSince(seen) > 3 }
        XCTAssertFalse(host.log.contains("watching again"), host.log)
        // Its watch still brings this prefix's changes.
        let watcher = try watch(hosts, 0, ["k"])
        XCTAssertEqual(try etcd.etcdctl(["put", hosts.prefix + "k/k", #"{"value":2}"#]).isEmpty, false)
        XCTAssertEqual(ClusterHosts.event(watcher)["new"] as? Int, 2)
        XCTAssertFalse(host.log.contains("watching again"), host.log)
    }

    /// A client that watched on one host up to revision R resumes on another with `since: R`; that
    /// host is behind (its watch of etcd is slow) and has not applied R yet. It must send the
    /// changes after R, not again those up to R once it applies them.
    func test_sinceFromAHostAhead_onAHostBehind_sendsOnlyLaterChanges() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        try etcd.moveLeader(to: 1)
        let writer = try ClusterHosts(etcd, count: 1, extra: ["--etcd-endpoints", [1, 2, 0].map { etcd.endpoints[$0] }.joined(separator: ",")])
        let reader = try ClusterHosts(etcd, count: 1, prefix: writer.prefix)
        let first = try XCTUnwrap(try writer.request(0, #"{"op":"set","key":"k","value":1}"#)["rev"] as? Int)
        waitFor("the reader at \(first)") { (try? reader.request(0, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= first }

        // The reader's watch of etcd is on member 0: frozen, the reader falls behind.
        etcd.pause(0)
        let seen = try XCTUnwrap(try writer.request(0, #"{"op":"set","key":"k","value":2}"#)["rev"] as? Int)
        let resumed = try reader.client(0)
        resumed.send(#"{"op":"watch","keys":["k"],"since":\#(seen)}"# + "\n")
        XCTAssertEqual(json(resumed.readLine())["ok"] as? Bool, true)
        etcd.resume(0)
        _ = try writer.request(0, #"{"op":"set","key":"k","value":3}"#)
        var values: [Int] = []
        while values.last != 3 {
            let event = ClusterHosts.event(resumed)
            guard !event.isEmpty else { break }
            if let value = event["new"] as? Int { values.append(value) }
        }
        XCTAssertEqual(values, [3], "changes at or before since \(seen) sent again")
    }

    /// The host's lease is gone (revoked by an operator, or run out while etcd could not be
    /// reached): etcd removed its ephemeral keys. An ephemeral key set afterwards must still work:
    /// the host takes a new lease, rather than answering with an internal error until its next
    /// keepalive (a third of ephemeral_ttl later) finds the lease gone.
    func test_anEphemeralSetAfterTheHostsLeaseWasRevoked_works() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 1, ephemeralTTL: "60s")
        let owner = try hosts.client(0)
        owner.send(#"{"op":"set","key":"before","value":1,"ephemeral":true}"# + "\n")
        XCTAssertEqual(json(owner.readLine())["ok"] as? Bool, true)
        let log = hosts.hosts[0]!.log
        let lease = try XCTUnwrap(log.firstMatch(of: /lease (\d+)/).flatMap { Int64($0.1) }, log)
        try hosts.etcd.etcdctl(["lease", "revoke", String(lease, radix: 16)])
        waitFor("the revoked lease's key to go") {
            (try? hosts.request(0, #"{"op":"get","key":"before"}"#)["ok"] as? Bool) == false
        }

        owner.send(#"{"op":"set","key":"after","value":2,"ephemeral":true}"# + "\n")
        let answer = json(owner.readLine())
        XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)\n\(hosts.logs)")
        let stats = try hosts.request(0, #"{"op":"stats"}"#)["cluster"] as? [String: Any]
        XCTAssertEqual(stats?["state"] as? String, "connected", "\(stats ?? [:])")
        withExtendedLifetime(owner) {}
    }

    /// A batch that puts an ephemeral key of its own and changes another host's (an increment
    /// keeps the key's owner, and so its lease) is refused "lease not found" when this host's own
    /// lease is gone: the host finds out which lease it was, takes a new one, and runs the batch
    /// again, rather than answering that the other host's key is gone.
    func test_aBatchWithTwoHostsEphemeralKeys_afterItsOwnLeaseWasRevoked_works() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2, ephemeralTTL: "60s")
        let theirs = try hosts.client(0)
        theirs.send(#"{"op":"set","key":"theirs","value":1,"ephemeral":true}"# + "\n")
        XCTAssertEqual(json(theirs.readLine())["ok"] as? Bool, true)
        let mine = try hosts.client(1)
        mine.send(#"{"op":"set","key":"before","value":1,"ephemeral":true}"# + "\n")
        XCTAssertEqual(json(mine.readLine())["ok"] as? Bool, true)
        waitFor("host 2 to apply the other host's key") { (try? hosts.request(1, #"{"op":"get","key":"theirs"}"#)["value"] as? Int) == 1 }
        let log = hosts.hosts[1]!.log
        let lease = try XCTUnwrap(log.firstMatch(of: /lease (\d+)/).flatMap { Int64($0.1) }, log)
        try hosts.etcd.etcdctl(["lease", "revoke", String(lease, radix: 16)])
        waitFor("the revoked lease's key to go") { (try? hosts.request(1, #"{"op":"get","key":"before"}"#)["ok"] as? Bool) == false }

        mine.send(#"{"op":"batch","ops":[{"op":"incr","key":"theirs"},{"op":"set","key":"mine","value":1,"ephemeral":true}]}"# + "\n")
        let answer = json(mine.readLine())
        XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)\n\(hosts.logs)")
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"theirs"}"#)["value"] as? Int, 2)
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"mine"}"#)["value"] as? Int, 1)
        // Each key still goes with its own connection.
        mine.shutdownWrite()
        waitFor("the batch's ephemeral key to go with its connection") {
            (try? hosts.request(0, #"{"op":"get","key":"mine"}"#)["ok"] as? Bool) == false
        }
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"theirs"}"#)["value"] as? Int, 2)
        withExtendedLifetime((theirs, mine)) {}
    }

    /// A write put with the host's lease, refused "lease not found" (the lease revoked), whose
    /// answer comes after the host found the lease gone by itself and took a new one (its answers
    /// held 4 s here; the lease's renewal comes every 2 s): the write runs again with the new
    /// lease. It must not take a third: the keys put with the second meanwhile would be left
    /// to run out with their connections still open.
    func test_aLeaseNotFoundAnswer_afterTheHostTookANewLease_runsTheWriteWithIt_andTakesNoThird() throws {
        // A renewal between the revocation and the write (about one time in a hundred) leaves
        // nothing to test: tried again on a new host.
        for _ in 0..<3 {
            if try leaseNotFoundAfterRenewal() { return }
        }
        XCTFail("three times the host found its lease gone before the write was sent: the race never happened")
    }

    /// One try of the test above; false when the host found the lease gone before the write was
    /// sent, which tests nothing.
    private func leaseNotFoundAfterRenewal() throws -> Bool {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 1, timeout: "10s", ephemeralTTL: "6s",
                                     environment: ["OBSD_TEST_HOLD_PROPOSAL_ANSWERS_MS": "4000"])
        let log = hosts.hosts[0]!.log
        let lease = try XCTUnwrap(log.firstMatch(of: /lease (\d+)/).flatMap { Int64($0.1) }, log)
        try hosts.etcd.etcdctl(["lease", "revoke", String(lease, radix: 16)])
        let first = try hosts.client(0)
        let sent = Date()
        first.send(#"{"op":"set","key":"first","value":1,"ephemeral":true}"# + "\n")
        XCTAssertTrue(waitFor("the host to take a new lease", timeout: 10) { hosts.hosts[0]!.log.contains("cluster: new lease") },
                      hosts.logs)
        // Put with the second lease while the first write's answer is still held.
        let second = try hosts.client(0)
        second.send(#"{"op":"set","key":"second","value":2,"ephemeral":true}"# + "\n")
        XCTAssertEqual(json(first.readLine())["ok"] as? Bool, true, hosts.logs)
        // Two answers held 4 s each: refused "lease not found", then run again with the new lease.
        // One only: the host had found the lease gone before the write was sent.
        guard Date().timeIntervalSince(sent) > 6 else { return false }
        XCTAssertEqual(json(second.readLine())["ok"] as? Bool, true, hosts.logs)
        // Past the lease's TTL twice: both keys are there while their connections are.
        Thread.sleep(forTimeInterval: 12)
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"first"}"#)["value"] as? Int, 1, hosts.logs)
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"second"}"#)["value"] as? Int, 2, hosts.logs)
        XCTAssertEqual(hosts.hosts[0]!.log.components(separatedBy: "cluster: new lease").count - 1, 1, hosts.logs)
        withExtendedLifetime((first, second)) {}
        return true
    }

    /// A host a second behind (its watch's messages held that long) increments a key another host
    /// just deleted: etcd refuses the increment (the key is gone), and the answer does not say at
    /// which revision it went. The host runs it again once it applied the delete, not at each of
    /// the revisions before it, which etcd would refuse again one by one (every host's expiry of
    /// a TTL key meets this: one wins, the others lose to its delete).
    func test_aWriteThatLostToADeleteNotAppliedYet_runsAgainOnceItIsApplied_notAtEveryRevision() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 1)
        let slow = try ClusterHosts(hosts.etcd, count: 1, environment: ["OBSD_TEST_HOLD_WATCH_MS": "1000"], prefix: hosts.prefix)
        _ = try hosts.request(0, #"{"op":"set","key":"x","value":5}"#)
        waitFor("the slow host to apply x") { (try? slow.request(0, #"{"op":"get","key":"x"}"#)["value"] as? Int) == 5 }
        // Revisions all along, which the slow host applies a second late, one after another.
        let noise = try hosts.client(0)
        let stop = Shared<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            var index = 0
            while !stop.value {
                noise.send(#"{"op":"set","key":"noise","value":\#(index)}"# + "\n")
                _ = noise.readLine()
                index += 1
            }
            done.signal()
        }
        defer {
            stop.value = true
            done.wait()
        }
        let started = Date()
        waitFor("a second of writes") { Date().timeIntervalSince(started) > 1.2 }
        XCTAssertEqual(try hosts.request(0, #"{"op":"delete","key":"x"}"#)["deleted"] as? Bool, true)
        let before = try etcdTransactions(hosts.etcd)
        let answer = try slow.request(0, #"{"op":"incr","key":"x"}"#)
        let sent = try etcdTransactions(hosts.etcd) - before
        XCTAssertEqual(answer["value"] as? Int, 1, "\(answer)\n\(slow.logs)")
        // The one refused, the one committed, and room for one more (the noise is plain puts).
        XCTAssertLessThanOrEqual(sent, 3, "transactions etcd took while the slow host's incr was under way")
    }

    /// The same on a host six seconds behind, with three seconds to decide a write: it applies a
    /// revision after the one it proposed from, but not the delete, in time (a second and a half
    /// to spare either way). The write fails saying that, not that the host has not applied a
    /// revision it has.
    func test_aWriteThatLostToADeleteNotAppliedInTime_failsSayingSo() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 1)
        let slow = try ClusterHosts(hosts.etcd, count: 1, timeout: "3s", environment: ["OBSD_TEST_HOLD_WATCH_MS": "6000"],
                                    prefix: hosts.prefix)
        _ = try hosts.request(0, #"{"op":"set","key":"x","value":5}"#)
        waitFor("the slow host to apply x") { (try? slow.request(0, #"{"op":"get","key":"x"}"#)["value"] as? Int) == 5 }
        // Applied by the slow host a second and a half after its incr is proposed; the delete six
        // seconds after.
        _ = try hosts.request(0, #"{"op":"set","key":"y","value":1}"#)
        Thread.sleep(forTimeInterval: 4.5)
        XCTAssertEqual(try hosts.request(0, #"{"op":"delete","key":"x"}"#)["deleted"] as? Bool, true)
        XCTAssertEqual((try slow.request(0, #"{"op":"get","key":"y"}"#)["error"] as? [String: Any])?["code"] as? String, "not_found",
                       "the slow host applied y before its incr was proposed")
        let answer = try slow.request(0, #"{"op":"incr","key":"x"}"#)
        let error = answer["error"] as? [String: Any] ?? [:]
        XCTAssertEqual(error["code"] as? String, "unavailable", "\(answer)")
        XCTAssertEqual(error["message"] as? String, "etcd no longer holds a key this write depends on, but this host has not applied "
                       + "its delete within 3.0 s (its watch of etcd is behind or cut)", "\(answer)\n\(slow.logs)")
        // Nothing of it was committed: the key stays deleted everywhere.
        waitFor("the slow host to apply the delete") { (try? slow.request(0, #"{"op":"get","key":"x"}"#)["ok"] as? Bool) == false }
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"x"}"#)["ok"] as? Bool, false)
    }

    /// How many transactions etcd's members answered (their metrics), refused compares included.
    private func etcdTransactions(_ etcd: EtcdCluster) throws -> Int {
        var total = 0
        for endpoint in etcd.endpoints {
            let text = try fetch(URL(string: endpoint + "/metrics")!)
            let line = text.split(separator: "\n").first {
                $0.hasPrefix("grpc_server_handled_total{") && $0.contains(#"grpc_code="OK""#) && $0.contains(#"grpc_method="Txn""#)
            }
            total += Int(Double(line?.split(separator: " ").last ?? "") ?? 0)
        }
        return total
    }

    private func fetch(_ url: URL) throws -> String {
        let result = Shared<Result<String, any Error>?>(nil)
        let finished = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: url) { data, _, error in
            result.value = data.map { .success(String(decoding: $0, as: UTF8.self)) } ?? .failure(error ?? URLError(.badServerResponse))
            finished.signal()
        }.resume()
        guard finished.wait(timeout: .now() + 10) == .success, let outcome = result.value else { throw URLError(.timedOut) }
        return try outcome.get()
    }

    /// Every etcd member stopped while a host writes nothing: it says `unavailable` within about
    /// `etcd_timeout` (its watch ended, and a read finds etcd out of reach), not at its lease's
    /// next renewal (a third of `ephemeral_ttl`, 100 s here); and `connected` once etcd is back,
    /// still without a write.
    func test_anOutageOfEtcd_isShownByAHostThatWritesNothing_andItsEndToo() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 1, timeout: "2s", ephemeralTTL: "300s")
        _ = try hosts.request(0, #"{"op":"set","key":"k","value":1}"#)
        func state() -> String? { ((try? hosts.request(0, #"{"op":"stats"}"#))?["cluster"] as? [String: Any])?["state"] as? String }
        for member in 0..<3 { etcd.stop(member) }
        XCTAssertTrue(waitFor("the host to say etcd is unavailable", timeout: 30) { state() == "unavailable" }, hosts.logs)
        XCTAssertTrue(hosts.hosts[0]!.log.contains("cluster: etcd unavailable"), hosts.logs)
        try etcd.restart([0, 1, 2])
        XCTAssertTrue(waitFor("the host to say connected", timeout: 30) { state() == "connected" }, hosts.logs)
        XCTAssertTrue(hosts.hosts[0]!.log.contains("cluster: etcd answers again"), hosts.logs)
    }

    /// A TTL key put with etcdctl, its deadline far in the future: the hosts serve it like any key
    /// (a record obsd cannot use is skipped; nothing found in etcd crashes a host).
    func test_aTTLRecordWithAFarDeadline_putWithEtcdctl_isDescribed() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 1)
        try hosts.etcd.etcdctl(["put", hosts.prefix + "k/far", #"{"expires_at":1e300,"value":1}"#])
        waitFor("the host to apply the record") { (try? hosts.request(0, #"{"op":"get","key":"far"}"#)["value"] as? Int) == 1 }
        let described = try hosts.request(0, #"{"op":"describe","key":"far"}"#)
        XCTAssertEqual(described["ok"] as? Bool, true, "\(described)\n\(hosts.logs)")
        XCTAssertNotNil(try hosts.request(0, #"{"op":"ping"}"#)["rev"], "the host is gone\n\(hosts.logs)")
    }

    /// The same on one host: `ttl_ms` takes any non-negative integer, the largest included.
    func test_aKeyWithTheLargestTTL_isDescribed() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--memory"])
        XCTAssertTrue(obsd.waitUntilListening())
        let client = try Client(sandbox.socket)
        client.send(#"{"op":"set","key":"t","value":1,"ttl_ms":9223372036854775807}"# + "\n")
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        client.send(#"{"op":"describe","key":"t"}"# + "\n")
        let described = json(client.readLine())
        XCTAssertEqual(described["ok"] as? Bool, true, "\(described)\n\(obsd.log)")
    }

    /// Two changes that would close a cycle together, sent to two hosts at once, many times: of
    /// each pair exactly one is taken and the other refused with `cycle`, however they raced.
    func test_twoBindsOrDefinesThatCloseACycle_racedFromTwoHosts_oneIsRefused() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        let first = try hosts.client(0), second = try hosts.client(1)
        for round in 0..<12 {
            let (x, y) = ("cy\(round).x", "cy\(round).y")
            let pair = round % 2 == 0
                ? (#"{"op":"bind","from":"\#(x)","to":"\#(y)"}"#, #"{"op":"bind","from":"\#(y)","to":"\#(x)"}"#)
                : (#"{"op":"define","key":"\#(x)","expr":"$\#(y)"}"#, #"{"op":"define","key":"\#(y)","expr":"$\#(x)"}"#)
            first.send(pair.0 + "\n")
            second.send(pair.1 + "\n")
            let answers = [json(first.readLine()), json(second.readLine())]
            XCTAssertEqual(answers.filter { $0["ok"] as? Bool == true }.count, 1, "round \(round): \(answers)")
            XCTAssertEqual(answers.compactMap { ($0["error"] as? [String: Any])?["code"] as? String }, ["cycle"], "round \(round)")
        }
    }

    /// A `define` on one host and a `set` of the same key on another, sent together: on one host
    /// one of them fails (the set is `read_only`, or the define `exists`); in the cluster whatever
    /// won must be what every host serves, a host started afterwards included.
    func test_aDefineAndASetOfOneKeyRacedFromTwoHosts_leaveOneStateEverywhere() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        let definer = try hosts.client(0), setter = try hosts.client(1)
        let names = (0..<24).map { "race\($0)" }
        var last = 0
        for name in names {
            definer.send(#"{"op":"define","key":"\#(name)","expr":"1 + 1"}"# + "\n")
            setter.send(#"{"op":"set","key":"\#(name)","value":5}"# + "\n")
            for answer in [json(definer.readLine()), json(setter.readLine())] { last = max(last, answer["rev"] as? Int ?? 0) }
        }
        let late = try ClusterHosts(hosts.etcd, count: 1, prefix: hosts.prefix)
        for (group, index) in [(hosts, 0), (hosts, 1), (late, 0)] {
            waitFor("a host at \(last)") { (try? group.request(index, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= last }
        }
        func shown(_ group: ClusterHosts, _ index: Int, _ name: String) throws -> String {
            let answer = try group.request(index, #"{"op":"describe","key":"\#(name)"}"#)
            return "\(answer["kind"] ?? "-") \(answer["value"] ?? "-")"
        }
        var differing: [String] = []
        for name in names {
            let running = try shown(hosts, 0, name), other = try shown(hosts, 1, name), started = try shown(late, 0, name)
            if running != other || running != started { differing.append("\(name): \(running) / \(other) / started later: \(started)") }
        }
        XCTAssertEqual(differing, [], "hosts disagree on keys both defined and set")

        // Deleted everywhere, a name stays deleted for a host that reads the prefix afterwards:
        // no definition record the value replaced is left to come back.
        var deleted = 0
        for name in names {
            let answer = try hosts.request(0, #"{"op":"delete","key":"\#(name)"}"#)
            XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)")
            deleted = max(deleted, answer["rev"] as? Int ?? deleted)
        }
        let later = try ClusterHosts(hosts.etcd, count: 1, prefix: hosts.prefix)
        waitFor("the last host at \(deleted)") { (try? later.request(0, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= deleted }
        let left = try names.filter { try later.request(0, #"{"op":"describe","key":"\#($0)"}"#)["ok"] as? Bool == true }
        XCTAssertEqual(left, [], "names that came back on a host started after they were deleted")
    }

    /// `incr` of one counter from four clients on each of three hosts at once (a fleet counting
    /// visits, say): no host is out of reach, so every increment counts once, none fails (the
    /// losers of each race run again on the new value, however many hosts race).
    func test_incrementsFromTwelveClientsOnThreeHosts_allCount() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get())
        let clients = try (0..<12).map { try hosts.client($0 % 3) }
        let each = 10
        for _ in 0..<each {
            for client in clients { client.send(#"{"op":"incr","key":"n"}"# + "\n") }
        }
        var failures: [String: Int] = [:]
        for client in clients {
            for _ in 0..<each {
                let answer = json(client.readLine())
                if answer["ok"] as? Bool != true { failures["\(answer["error"] ?? "no answer")", default: 0] += 1 }
            }
        }
        XCTAssertEqual(failures, [:], "of \(clients.count * each) increments")
        let failed = failures.values.reduce(0, +)
        let last = try XCTUnwrap(try hosts.request(0, #"{"op":"ping"}"#)["rev"] as? Int)
        for index in 0..<3 {
            waitFor("host \(index) at \(last)") { (try? hosts.request(index, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= last }
            XCTAssertEqual(try hosts.request(index, #"{"op":"get","key":"n"}"#)["value"] as? Int, clients.count * each - failed)
        }
    }

    /// A batch on one host that writes a binding's source and its target, the binding made on
    /// another host: every host, a host started later included, ends with what one host does.
    func test_aBatchWritingABindingsSourceAndTarget_endsAsOnOneHost() throws {
        let requests = [#"{"op":"bind","from":"s","to":"t","map":"$ * 10"}"#,
                        #"{"op":"batch","ops":[{"op":"set","key":"s","value":1},{"op":"set","key":"t","value":2}]}"#,
                        #"{"op":"batch","ops":[{"op":"set","key":"t","value":3},{"op":"set","key":"s","value":4}]}"#]
        let sandbox = try Sandbox()
        let single = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--memory"])
        XCTAssertTrue(single.waitUntilListening())
        let one = try Client(sandbox.socket)
        var expected: [String] = []
        for request in requests {
            one.send(request + "\n")
            _ = one.readLine()
        }
        for key in ["s", "t"] {
            one.send(#"{"op":"get","key":"\#(key)"}"# + "\n")
            expected.append("\(json(one.readLine())["value"] ?? "-")")
        }

        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        _ = try hosts.request(0, requests[0])
        var last = 0
        for request in requests.dropFirst() { last = try hosts.request(1, request)["rev"] as? Int ?? last }
        let late = try ClusterHosts(hosts.etcd, count: 1, prefix: hosts.prefix)
        for (group, index) in [(hosts, 0), (hosts, 1), (late, 0)] {
            waitFor("a host at \(last)") { (try? group.request(index, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= last }
            let values = try ["s", "t"].map { "\(try group.request(index, #"{"op":"get","key":"\#($0)"}"#)["value"] ?? "-")" }
            XCTAssertEqual(values, expected, "host \(index) of \(group === late ? "the late group" : "the first")")
        }
    }

    /// A host frozen longer than its lease's TTL (a paused VM): etcd removed its ephemeral keys,
    /// and every host says why. Running again, the host serves as before: an ephemeral key set on
    /// it now lives, on every host.
    func test_aHostFrozenPastItsLease_losesItsEphemeralKeys_thenSetsNewOnes() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        let watcher = try watch(hosts, 1, ["eph"])
        let owner = try hosts.client(0)
        owner.send(#"{"op":"set","key":"eph","value":1,"ephemeral":true}"# + "\n")
        XCTAssertEqual(json(owner.readLine())["ok"] as? Bool, true)
        XCTAssertEqual(ClusterHosts.event(watcher)["new"] as? Int, 1)
        hosts.hosts[0]!.signal(SIGSTOP)
        let gone = ClusterHosts.event(watcher)
        hosts.hosts[0]!.signal(SIGCONT)
        XCTAssertEqual(gone["event"] as? String, "delete", "\(gone)")
        XCTAssertEqual(gone["reason"] as? String, "ephemeral")

        owner.send(#"{"op":"set","key":"eph","value":2,"ephemeral":true}"# + "\n")
        let answer = json(owner.readLine())
        XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)\n\(hosts.logs)")
        XCTAssertEqual(ClusterHosts.event(watcher)["new"] as? Int, 2)
        // Past another lease TTL (2 s), the key is still there: it was put with a live lease.
        let marker = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"eph.marker","value":1,"ttl_ms":3000}"#)["rev"] as? Int)
        waitFor("the marker to expire") { (try? hosts.request(1, #"{"op":"get","key":"eph.marker"}"#)["ok"] as? Bool) == false }
        let still = try hosts.request(1, #"{"op":"get","key":"eph"}"#)
        XCTAssertEqual(still["value"] as? Int, 2, "\(still), marker at \(marker)\n\(hosts.logs)")
        withExtendedLifetime(owner) {}
    }
}

/// A value two threads read and write, under a lock.
private final class Shared<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
