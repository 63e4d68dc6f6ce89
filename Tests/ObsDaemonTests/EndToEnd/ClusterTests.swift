// Cluster mode against a real 3-member etcd cluster on loopback and real obsd daemons: what holds
// for users on every host, and what happens when etcd members or hosts fail.
import Foundation
import Glibc
import TestSupport
import XCTest

/// Three obsd hosts sharing one etcd prefix.
final class ClusterHosts {
    let sandbox: Sandbox
    let etcd: EtcdCluster
    let prefix: String
    private(set) var hosts: [ObsdProcess?]
    let extra: [String]
    /// etcd_timeout: how long a write waits for etcd before `unavailable`.
    let timeout: String
    /// ephemeral_ttl: the TTL of each host's lease (a third of it between keepalives).
    let ephemeralTTL: String
    let environment: [String: String]
    /// Lines added to each host's configuration file.
    let settings: String
    /// The client certificate and key the hosts read (with TLS), when not the cluster's own.
    let clientFiles: (cert: String, key: String)?

    /// `prefix`: another group's, for hosts that join it (nil: a prefix of their own).
    init(_ etcd: EtcdCluster, count: Int = 3, extra: [String] = [], timeout: String = "5s", ephemeralTTL: String = "2s",
         environment: [String: String] = [:], prefix: String? = nil, clientFiles: (cert: String, key: String)? = nil,
         settings: String = "", name: String = #function) throws {
        sandbox = try Sandbox()
        self.etcd = etcd
        self.clientFiles = clientFiles
        self.prefix = prefix ?? "/\(name.prefix { $0 != "(" })-\(UInt32.random(in: 0...UInt32.max))/"
        self.extra = extra
        self.timeout = timeout
        self.ephemeralTTL = ephemeralTTL
        self.environment = environment
        self.settings = settings
        hosts = Array(repeating: nil, count: count)
        for index in 0..<count { try start(index) }
    }

    func socket(_ index: Int) -> String { sandbox.root + "/h\(index).sock" }

    func arguments(_ index: Int) -> [String] {
        var arguments = ["--socket", socket(index), "--cluster", "etcd", "--etcd-endpoints", etcd.endpoints.joined(separator: ","),
                         "--etcd-prefix", prefix]
        if let ca = etcd.caFile, let cert = clientFiles?.cert ?? etcd.clientCertFile, let key = clientFiles?.key ?? etcd.clientKeyFile {
            arguments += ["--etcd-cacert", ca, "--etcd-cert", cert, "--etcd-key", key]
        }
        return arguments + extra
    }

    func start(_ index: Int) throws {
        let config = sandbox.root + "/h\(index).conf"
        try sandbox.write("etcd_timeout = \(timeout)\nephemeral_ttl = \(ephemeralTTL)\n" + settings, to: config)
        let obsd = try ObsdProcess(sandbox, arguments: arguments(index) + ["--config", config], environment: environment,
                                   name: "h\(index)")
        XCTAssertTrue(obsd.waitUntilListening(socket(index)), obsd.log)
        hosts[index] = obsd
    }

    func kill(_ index: Int) {
        hosts[index]?.signal(SIGKILL)
        _ = hosts[index]?.waitForExit()
        hosts[index] = nil
    }

    func client(_ index: Int) throws -> Client { try Client(socket(index)) }

    /// Sends one request and returns the answer (skipping events).
    func request(_ index: Int, _ line: String) throws -> [String: Any] {
        let client = try client(index)
        client.send(line + "\n")
        while let answer = client.readLine() {
            let object = json(answer)
            if object["ok"] != nil { return object }
        }
        return [:]
    }

    /// The next line of `client` that is an event, decoded.
    static func event(_ client: Client) -> [String: Any] {
        while let line = client.readLine() {
            let object = json(line)
            if object["event"] != nil { return object }
        }
        return [:]
    }

    var logs: String { hosts.compactMap { $0?.log }.joined(separator: "\n---\n") }
}

/// A watch on one host, read event by event.
func watch(_ hosts: ClusterHosts, _ index: Int, _ keys: [String], initial: Bool = false) throws -> Client {
    let client = try hosts.client(index)
    let list = keys.map { "\"\($0)\"" }.joined(separator: ",")
    client.send("{\"op\":\"watch\",\"keys\":[\(list)],\"initial\":\(initial)}\n")
    XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
    if !initial { XCTAssertEqual(ClusterHosts.event(client)["event"] as? String, "synced") }
    return client
}

/// One etcd cluster for the tests that leave it alone; each test has a prefix of its own.
enum SharedEtcd {
    nonisolated(unsafe) private static var started: EtcdCluster?

    static func get() throws -> EtcdCluster {
        if let started { return started }
        let cluster = try startEtcdCluster()
        started = cluster
        atexit { SharedEtcd.started?.shutDown() }
        return cluster
    }
}

final class ClusterTests: XCTestCase {
    func test_aSetOnOneHost_isSeenOnTheOthers_withTheSameRevision() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get())
        let b = try watch(hosts, 1, ["k"]), c = try watch(hosts, 2, ["k"])
        let answer = try hosts.request(0, #"{"op":"set","key":"k","value":42}"#)
        let rev = try XCTUnwrap(answer["rev"] as? Int, "\(answer)\n\(hosts.logs)")
        for watcher in [b, c] {
            let event = ClusterHosts.event(watcher)
            XCTAssertEqual(event["new"] as? Int, 42)
            XCTAssertEqual(event["rev"] as? Int, rev)
        }
        XCTAssertEqual(try hosts.request(2, #"{"op":"get","key":"k"}"#)["rev"] as? Int, rev)
        // The revision is etcd's own.
        let etcdKey = try hosts.etcd.etcdctl(["get", hosts.prefix + "k/k", "-w", "json"])
        XCTAssertTrue(etcdKey.contains("\"mod_revision\":\(rev)"), etcdKey)
    }

    /// libcurl (and OpenSSL, GnuTLS, Kerberos... behind it) is loaded by cluster mode only: a
    /// daemon serving one host does not map it.
    func test_onlyClusterModeLoadsLibcurl() throws {
        let sandbox = try Sandbox()
        let single = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--memory"])
        XCTAssertTrue(single.waitUntilListening(), single.log)
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 1)
        let clustered = try XCTUnwrap(hosts.hosts[0])
        XCTAssertNotNil(try hosts.request(0, #"{"op":"set","key":"k","value":1}"#)["rev"] as? Int, hosts.logs)
        func libraries(_ pid: Int32) throws -> Set<String> {
            // Read to the end: /proc files have no size, and a one-read reader gets the first page.
            let file = try XCTUnwrap(FileHandle(forReadingAtPath: "/proc/\(pid)/maps"))
            let maps = String(decoding: file.readDataToEndOfFile(), as: UTF8.self)
            return Set(maps.split(separator: "\n").compactMap { line in
                line.split(separator: " ", omittingEmptySubsequences: true).dropFirst(5).first.map(String.init)
            }.filter { $0.hasPrefix("/") }.map { String($0.split(separator: "/").last ?? "") })
        }
        let curl = { (names: Set<String>) in names.filter { $0.hasPrefix("libcurl") } }
        XCTAssertEqual(curl(try libraries(single.pid)), [], "single-host obsd")
        let clusteredLibraries = try libraries(clustered.pid)
        XCTAssertEqual(curl(clusteredLibraries).count, 1, "cluster-mode obsd: \(clusteredLibraries.sorted())")
    }

    /// A host whose libcurl cannot be loaded (here a broken file found first on the library path)
    /// refuses to start in cluster mode, saying so, and serves one host without it.
    func test_aHostWithoutAUsableLibcurl_refusesClusterMode_andServesOneHost() throws {
        let sandbox = try Sandbox()
        let libraries = sandbox.root + "/lib"
        try FileManager.default.createDirectory(atPath: libraries, withIntermediateDirectories: false)
        try sandbox.write("not a library\n", to: libraries + "/libcurl.so.4")
        let environment = ["LD_LIBRARY_PATH": libraries]
        let clustered = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--cluster", "etcd",
                                                             "--etcd-endpoints", "http://127.0.0.1:9"], environment: environment)
        XCTAssertEqual(clustered.waitForExit(), 1)
        XCTAssertTrue(clustered.log.contains("cluster mode needs libcurl (Debian: apt-get install libcurl4), which could not be loaded"),
                      clustered.log)
        let single = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--memory"], environment: environment)
        XCTAssertTrue(single.waitUntilListening(), single.log)
    }

    ///   a (written on host 0) ─┐
    ///                          ├─ sum (computed on host 2): one change per batch, never a mix
    ///   b (written on host 1) ─┘
    func test_aComputedOverKeysWrittenOnTwoHosts_isGlitchFree() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get())
        XCTAssertEqual(try hosts.request(2, #"{"op":"define","key":"sum","expr":"($a ?? 0) + ($b ?? 0)"}"#)["ok"] as? Bool, true)
        let watcher = try watch(hosts, 2, ["sum"])
        _ = try hosts.request(0, #"{"op":"set","key":"a","value":1}"#)
        _ = try hosts.request(1, #"{"op":"set","key":"b","value":2}"#)
        _ = try hosts.request(0, #"{"op":"batch","ops":[{"op":"set","key":"a","value":10},{"op":"set","key":"b","value":20}]}"#)
        XCTAssertEqual((0..<3).map { _ in ClusterHosts.event(watcher)["new"] as? Int }, [1, 3, 30])
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"sum"}"#)["value"] as? Int, 30, "defined on every host")
    }

    /// Two hosts race a compare-and-set on one key: exactly one wins, the other gets `conflict`.
    func test_compareAndSetRacedFromTwoHosts_exactlyOneWins() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        for round in 0..<5 {
            let current = try hosts.request(0, #"{"op":"set","key":"lock","value":"free\#(round)"}"#)
            let rev = try XCTUnwrap(current["rev"] as? Int)
            // Both hosts have applied it before the race starts.
            waitFor("host 1 at \(rev)") { (try? hosts.request(1, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= rev }
            let a = try hosts.client(0), b = try hosts.client(1)
            a.send(#"{"op":"set","key":"lock","value":"A","if_rev":\#(rev)}"# + "\n")
            b.send(#"{"op":"set","key":"lock","value":"B","if_rev":\#(rev)}"# + "\n")
            let answers = [json(a.readLine()), json(b.readLine())]
            XCTAssertEqual(answers.filter { $0["ok"] as? Bool == true }.count, 1, "\(answers)")
            XCTAssertEqual(answers.compactMap { ($0["error"] as? [String: Any])?["code"] as? String }, ["conflict"], "\(answers)")
            // Both hosts hold the winner's value, at its revision.
            guard let winner = answers.firstIndex(where: { $0["ok"] as? Bool == true }), let won = answers[winner]["rev"] as? Int else { continue }
            for host in 0..<2 {
                var read: [String: Any] = [:]
                XCTAssertTrue(waitFor("host \(host) at \(won)") {
                    read = (try? hosts.request(host, #"{"op":"get","key":"lock"}"#)) ?? [:]
                    return read["rev"] as? Int ?? 0 >= won
                })
                XCTAssertEqual(read["value"] as? String, ["A", "B"][winner], "host \(host): \(read)")
                XCTAssertEqual(read["rev"] as? Int, won, "host \(host): \(read)")
            }
        }
    }

    /// A batch written on host 0: every host, the writer's too, shows its two changes at the
    /// batch's one revision.
    func test_aBatchIsOneRevisionEverywhere() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get())
        let watchers = try (0..<3).map { try watch(hosts, $0, ["x", "y"]) }
        let answer = try hosts.request(0, #"{"op":"batch","ops":[{"op":"set","key":"x","value":1},{"op":"set","key":"y","value":2}]}"#)
        let rev = try XCTUnwrap(answer["rev"] as? Int, "\(answer)")
        for (host, watcher) in watchers.enumerated() {
            let events = (0..<2).map { _ in ClusterHosts.event(watcher) }
            XCTAssertEqual(events.map { $0["rev"] as? Int }, [rev, rev], "host \(host): \(events)")
            XCTAssertEqual(events.map { $0["key"] as? String }, ["x", "y"], "host \(host): \(events)")
            XCTAssertEqual(events.map { $0["new"] as? Int }, [1, 2], "host \(host): \(events)")
        }
    }

    /// A prefix that holds more than one answer may (the client takes at most 64 MiB in one) is
    /// read a page at a time, at one revision, a page too large being asked again with fewer
    /// keys: a host started on it, and one that must read everything again after a compaction,
    /// get every key.
    func test_aStateLargerThanOneAnswer_isReadInPages() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 1)
        // 72 KiB each: a first page of 1,000 keys would be over 64 MiB, and is asked again smaller.
        let value = String(repeating: "v", count: 72 << 10)
        let count = 1200
        for first in stride(from: 0, to: count, by: 13) {
            let ops = (first..<min(first + 13, count)).map { #"{"op":"set","key":"big.\#($0)","value":"\#(value)"}"# }
            let answer = try hosts.request(0, #"{"op":"batch","ops":[\#(ops.joined(separator: ","))]}"#)
            XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)")
        }
        let marker = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"last","value":1}"#)["rev"] as? Int)
        // With etcd's history kept, a host starts from an older state and applies the revisions
        // since (`aHostRestartedAfterAWatchersRevision...`); compacted, it reads the newest state.
        _ = try etcd.etcdctl(["compaction", "\(marker)"])
        let second = try ClusterHosts(etcd, count: 1, prefix: hosts.prefix)
        let stats = try second.request(0, #"{"op":"stats"}"#)
        XCTAssertEqual((stats["cluster"] as? [String: Any])?["applied_rev"] as? Int, marker, "\(stats)")
        for index in [0, 599, count - 1] {
            XCTAssertEqual((try second.request(0, #"{"op":"get","key":"big.\#(index)"}"#)["value"] as? String)?.count, value.count)
        }
        XCTAssertEqual(try second.request(0, #"{"op":"get","key":"last"}"#)["value"] as? Int, 1)

        // Stopped while the first host rewrites 300 keys three times, one revision each: 900
        // revisions, 64 MB, more than etcd (128 messages a watch) and the buffers between it and
        // the host (HTTP/2's window, the sockets') hold for a watch. (Once, 300 revisions all
        // fitted, and the host caught up from its watch.) Then etcd compacts: the second host
        // reads the whole prefix again, in pages.
        let stopped = try XCTUnwrap(second.hosts[0])
        stopped.signal(SIGSTOP)
        var changed = ""
        let writer = try hosts.client(0)
        for fill in ["w", "x", "y"] {
            changed = String(repeating: fill, count: 72 << 10)
            for first in stride(from: 0, to: 300, by: 50) {
                for index in first..<first + 50 { writer.send(#"{"op":"set","key":"big.\#(index)","value":"\#(changed)"}"# + "\n") }
                for _ in 0..<50 { XCTAssertEqual(json(writer.readLine())["ok"] as? Bool, true) }
            }
        }
        let newest = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"last","value":2}"#)["rev"] as? Int)
        _ = try etcd.etcdctl(["compaction", "\(newest)"])
        stopped.signal(SIGCONT)
        XCTAssertTrue(waitFor("the stopped host to catch up") {
            ((try? second.request(0, #"{"op":"stats"}"#))?["cluster"] as? [String: Any])?["applied_rev"] as? Int ?? 0 >= newest
        })
        XCTAssertTrue(stopped.log.contains("reading everything again"), stopped.log)
        XCTAssertEqual(try second.request(0, #"{"op":"get","key":"last"}"#)["value"] as? Int, 2)
        XCTAssertEqual(try second.request(0, #"{"op":"get","key":"big.299"}"#)["value"] as? String, changed)
        XCTAssertEqual(try second.request(0, #"{"op":"get","key":"big.300"}"#)["value"] as? String, value)
    }

    /// A host that was stopped while many large revisions were written catches up: etcd sends a
    /// watch that fell behind from its history in messages of up to 1,000 revisions, here about
    /// 87 MB, over the client's bound on a message (64 MiB); so the host watches again, asking
    /// etcd to split them, and joins them again at revision boundaries. It says so, once.
    func test_aHostFarBehindOnLargeRevisions_catchesUp() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        let stopped = try XCTUnwrap(hosts.hosts[1])
        XCTAssertEqual(try hosts.request(1, #"{"op":"set","key":"start","value":1}"#)["ok"] as? Bool, true)
        stopped.signal(SIGSTOP)
        let value = String(repeating: "v", count: 100 << 10)
        let writer = try hosts.client(0)
        var last = 0
        for first in stride(from: 0, to: 1000, by: 50) {
            for index in first..<first + 50 { writer.send(#"{"op":"set","key":"k.\#(index % 100)","value":"\#(value)\#(index)"}"# + "\n") }
            for _ in 0..<50 { last = json(writer.readLine())["rev"] as? Int ?? last }
        }
        stopped.signal(SIGCONT)
        XCTAssertTrue(waitFor("the stopped host to catch up", timeout: 120) {
            ((try? hosts.request(1, #"{"op":"stats"}"#))?["cluster"] as? [String: Any])?["applied_rev"] as? Int ?? 0 >= last
        }, hosts.logs)
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"k.99"}"#)["value"] as? String, value + "999")
        let log = stopped.log
        XCTAssertEqual(log.components(separatedBy: "watching again with etcd splitting its messages into fragments").count, 2, log)
        // Applying slower than etcd sends is no outage (a keepalive under way when the host was
        // stopped may still time out).
        XCTAssertFalse(log.contains("bytes behind"), "taken for an outage: \(log)")
    }

    /// A batch over etcd's bound on a transaction (--max-txn-ops, 128 by default) is the
    /// client's `too_large`, naming the bound; nothing of it is applied, and etcd is not taken
    /// for unavailable because of it.
    func test_aBatchOverEtcdsBounds_isTooLarge_andLeavesTheClusterConnected() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        let ops = (0..<129).map { #"{"op":"set","key":"b.\#($0)","value":\#($0)}"# }.joined(separator: ",")
        let answer = try hosts.request(0, #"{"op":"batch","ops":[\#(ops)]}"#)
        let error = try XCTUnwrap(answer["error"] as? [String: Any], "\(answer)")
        XCTAssertEqual(error["code"] as? String, "too_large", "\(answer)")
        XCTAssertTrue((error["message"] as? String ?? "").contains("--max-txn-ops"), "\(answer)")
        let cluster = try XCTUnwrap(try hosts.request(0, #"{"op":"stats"}"#)["cluster"] as? [String: Any])
        XCTAssertEqual(cluster["state"] as? String, "connected", "\(cluster)")
        XCTAssertNil(cluster["last_failure"], "\(cluster)")
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"b.0"}"#)["error"].map { ($0 as? [String: Any])?["code"] as? String },
                       "not_found")
        XCTAssertEqual(try hosts.request(0, #"{"op":"set","key":"after","value":1}"#)["ok"] as? Bool, true)
    }

    /// The binding's write is part of the transaction that changed its source: one etcd
    /// revision, though all three hosts see the change and all three hold the binding.
    func test_aBindingFiresOnce_thoughThreeHostsSeeTheChange() throws {
        // A cluster of its own: revisions are counted, and other tests' leases running out on
        // a shared one would add revisions in between.
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd)
        XCTAssertEqual(try hosts.request(0, #"{"op":"bind","from":"src","to":"dst","map":"(value ?? 0) * 2"}"#)["ok"] as? Bool, true)
        let before = try XCTUnwrap(try hosts.request(2, #"{"op":"set","key":"other","value":1}"#)["rev"] as? Int)
        let set = try hosts.request(1, #"{"op":"set","key":"src","value":21}"#)
        XCTAssertEqual(set["rev"] as? Int, before + 1)
        for index in 0..<3 {
            waitFor("dst on host \(index)") { (try? hosts.request(index, #"{"op":"get","key":"dst"}"#)["value"] as? Int) == 42 }
        }
        // No host wrote the target again: it changed once more, in the source's revision.
        let after = try XCTUnwrap(try hosts.request(2, #"{"op":"set","key":"other","value":2}"#)["rev"] as? Int)
        XCTAssertEqual(after, before + 2, "only the source's transaction in between")
        let dst = try hosts.request(0, #"{"op":"get","key":"dst"}"#)
        XCTAssertEqual(dst["rev"] as? Int, before + 1)
    }

    /// A binding made on one host while its source is set on another, at the same moment, thirty
    /// times. When the set commits first, the binding's first write was computed from a view
    /// without it: the binding depends on its source, so it is run again. When the binding commits
    /// first, the set (a put without compares) may come from a host that had not applied it: every
    /// host runs the binding again and exactly one of them writes. Whichever the order, the target
    /// ends up following the source on every host, and is written at most twice.
    func test_aBindingMadeWhileItsSourceIsSetOnAnotherHost_firesOnce() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get())
        let binder = try hosts.client(0)
        let setter = try hosts.client(1)
        let rounds = 30
        for index in 0..<rounds {
            binder.send(#"{"op":"bind","from":"src.\#(index)","to":"dst.\#(index)","map":"(value ?? 0) * 2"}"# + "\n")
            setter.send(#"{"op":"set","key":"src.\#(index)","value":\#(index + 1)}"# + "\n")
            XCTAssertEqual(json(binder.readLine())["ok"] as? Bool, true)
            XCTAssertEqual(json(setter.readLine())["ok"] as? Bool, true)
        }
        for host in 0..<3 {
            waitFor("every dst.N on host \(host) at twice src.N") {
                (0..<rounds).allSatisfy { index in
                    (try? hosts.request(host, #"{"op":"get","key":"dst.\#(index)"}"#)["value"] as? Int) == 2 * (index + 1)
                }
            }
        }
        var repaired = 0
        for index in 0..<rounds {
            let dst = try hosts.request(2, #"{"op":"get","key":"dst.\#(index)"}"#)
            let src = try hosts.request(2, #"{"op":"get","key":"src.\#(index)"}"#)
            XCTAssertLessThanOrEqual(dst["version"] as? Int ?? 99, 2, "dst.\(index) written more than twice: \(dst)")
            if dst["version"] as? Int == 2, let dstRev = dst["rev"] as? Int, let srcRev = src["rev"] as? Int, dstRev > srcRev {
                repaired += 1
            }
        }
        // Once every host has applied everything, nothing more is written: no late repair.
        let mark = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"mark","value":1}"#)["rev"] as? Int)
        for host in 0..<3 {
            waitFor("host \(host) at \(mark)") { (try? hosts.request(host, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= mark }
        }
        let next = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"mark","value":2}"#)["rev"] as? Int)
        XCTAssertEqual(next, mark + 1)
        print("sets committed after the binding by a host that had not applied it: \(repaired) of \(rounds)")
    }

    func test_sinceTakenOnOneHost_resumesOnAnother() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        let seen = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"k","value":1}"#)["rev"] as? Int)
        _ = try hosts.request(0, #"{"op":"set","key":"k","value":2}"#)
        let last = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"k","value":3}"#)["rev"] as? Int)
        waitFor("host 1 at \(last)") { (try? hosts.request(1, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= last }
        let client = try hosts.client(1)
        client.send(#"{"op":"watch","keys":["k"],"since":\#(seen)}"# + "\n")
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        XCTAssertEqual((0..<3).map { _ in ClusterHosts.event(client)["new"] as? Int }, [2, 3, nil])
    }

    /// An ephemeral key goes when its connection closes and when its host is killed, whether or not
    /// another host wrote it meanwhile: `incr` keeps a key's owner (host 1 once put such a key with
    /// its own lease and an owner naming no session, so it stayed).
    func test_anEphemeralKey_vanishesWhenItsConnectionCloses_andWhenItsHostIsKilled() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        let watcher = try watch(hosts, 1, ["eph.*"])
        for (keys, ending) in [(["eph.closed", "eph.closed-incr"], "close"), (["eph.killed", "eph.killed-incr"], "kill")] {
            let owner = try hosts.client(0)
            for key in keys {
                owner.send(#"{"op":"set","key":"\#(key)","value":1,"ephemeral":true}"# + "\n")
                XCTAssertEqual(json(owner.readLine())["ok"] as? Bool, true)
                XCTAssertEqual(ClusterHosts.event(watcher)["key"] as? String, key)
            }
            XCTAssertEqual(try hosts.request(1, #"{"op":"incr","key":"\#(keys[1])"}"#)["value"] as? Int, 2)
            XCTAssertEqual(ClusterHosts.event(watcher)["new"] as? Int, 2)
            XCTAssertEqual(try hosts.request(1, #"{"op":"describe","key":"\#(keys[1])"}"#)["ephemeral"] as? Bool, true)
            if ending == "close" { owner.shutdownWrite() } else { hosts.kill(0) }
            // Killed: etcd removes the keys when the host's lease (2 s here) runs out.
            let events = [ClusterHosts.event(watcher), ClusterHosts.event(watcher)]
            XCTAssertEqual(Set(events.compactMap { $0["key"] as? String }), Set(keys), "\(ending): \(events)\n\(hosts.logs)")
            for event in events {
                XCTAssertEqual(event["event"] as? String, "delete", "\(event)")
                XCTAssertEqual(event["reason"] as? String, "ephemeral")
            }
            withExtendedLifetime(owner) {}
        }
    }

    /// Every host's timer proposes the expiry; the first wins, the others find the key gone.
    func test_aTTLKeyExpiresOnce() throws {
        // A cluster of its own: revisions are counted, and other tests' leases running out on
        // a shared one would add revisions in between.
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd)
        let watcher = try watch(hosts, 2, ["t", "marker"])
        let set = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"t","value":1,"ttl_ms":300}"#)["rev"] as? Int)
        _ = ClusterHosts.event(watcher)
        let expired = ClusterHosts.event(watcher)
        XCTAssertEqual(expired["event"] as? String, "delete")
        XCTAssertEqual(expired["reason"] as? String, "ttl")
        XCTAssertEqual(expired["rev"] as? Int, set + 1)
        // Give the other hosts' timers time to fire: none of them adds a revision.
        usleep(500_000)
        let marker = try XCTUnwrap(try hosts.request(1, #"{"op":"set","key":"marker","value":1}"#)["rev"] as? Int)
        XCTAssertEqual(marker, set + 2, "the expiry was one transaction")
    }

    /// Hosts that speak etcd's JSON gateway (`--etcd-api json`) and hosts that speak gRPC share
    /// one state: a write on either is seen by the other's watcher at the same revision.
    func test_gatewayAndGRPCHostsShareOneState() throws {
        let grpc = try ClusterHosts(try SharedEtcd.get(), count: 1)
        let gateway = try ClusterHosts(grpc.etcd, count: 1, extra: ["--etcd-api", "json"], prefix: grpc.prefix)
        let stats = try gateway.request(0, #"{"op":"stats"}"#)
        XCTAssertEqual((stats["cluster"] as? [String: Any])?["api"] as? String, "json")
        XCTAssertEqual((try grpc.request(0, #"{"op":"stats"}"#)["cluster"] as? [String: Any])?["api"] as? String, "grpc")
        let onGateway = try watch(gateway, 0, ["g"])
        let onGRPC = try watch(grpc, 0, ["g"])
        let written = try XCTUnwrap(try grpc.request(0, #"{"op":"set","key":"g","value":1}"#)["rev"] as? Int)
        let seen = ClusterHosts.event(onGateway)
        XCTAssertEqual(seen["new"] as? Int, 1)
        XCTAssertEqual(seen["rev"] as? Int, written)
        XCTAssertEqual(ClusterHosts.event(onGRPC)["rev"] as? Int, written)
        let back = try XCTUnwrap(try gateway.request(0, #"{"op":"set","key":"g","value":2,"if_rev":\#(written)}"#)["rev"] as? Int)
        let seenBack = ClusterHosts.event(onGRPC)
        XCTAssertEqual(seenBack["new"] as? Int, 2)
        XCTAssertEqual(seenBack["rev"] as? Int, back)
    }

    /// Under a low descriptor limit a host keeps room for its connections to etcd: max_connections
    /// is lowered by them (the log says so), and as many clients as it then serves can each have
    /// a write under way at once, every one answered.
    func test_aLowDescriptorLimit_leavesRoomForTheConnectionsToEtcd() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 0)
        let config = hosts.sandbox.root + "/h0.conf"
        try hosts.sandbox.write("etcd_timeout = 10s\n", to: config)
        let obsd = try ObsdProcess(hosts.sandbox, arguments: ["--nofile=320:320", "--", try builtExecutable("obsd")]
                                   + hosts.arguments(0) + ["--config", config], executable: "/usr/bin/prlimit", name: "h0")
        defer { obsd.signal(SIGTERM) }
        XCTAssertTrue(obsd.waitUntilListening(hosts.socket(0)), obsd.log)
        XCTAssertTrue(waitFor("the connection ceiling in the log") { obsd.log.contains("serving at most") }, obsd.log)
        let line = obsd.log.split(separator: "\n").first { $0.contains("serving at most") } ?? ""
        let ceiling = try XCTUnwrap(line.split(separator: " ").last.flatMap { Int($0) }, obsd.log)
        XCTAssertLessThan(ceiling, 320 - 64 - 32, "room left for the requests under way and libcurl's idle connections")
        // Less two: the one that asks for stats, and the connection that saw it listening, which
        // may not be closed on obsd's side yet.
        let clients = try (0..<(ceiling - 2)).map { _ in try hosts.client(0) }
        let monitor = try hosts.client(0)
        for (index, client) in clients.enumerated() { client.send(#"{"op":"set","key":"d\#(index)","value":\#(index)}"# + "\n") }
        // Asked while the writes are under way (etcd takes milliseconds for them, a turn of the
        // loop microseconds): never more sent than the client's bound, the rest waiting.
        monitor.send(#"{"op":"stats"}"# + "\n")
        let cluster = try XCTUnwrap(json(monitor.readLine() ?? "")["cluster"] as? [String: Any])
        XCTAssertLessThanOrEqual(try XCTUnwrap(cluster["requests_sent"] as? Int), 64, "\(cluster)")
        for (index, client) in clients.enumerated() {
            let answer = json(client.readLine() ?? "")
            XCTAssertEqual(answer["ok"] as? Bool, true, "client \(index): \(answer)\n\(obsd.log)")
        }
        XCTAssertTrue(obsd.process.isRunning)
    }

    /// Something else writes under the prefix: obsd skips what it cannot read, reports it, and
    /// goes on.
    /// Garbage put over records the hosts hold (a value, a definition, a binding): the running
    /// hosts drop what they held, as a host that starts now never has it, rather than serve a
    /// value etcd no longer holds (and compare-and-set against it). A garbage definition over a
    /// value's name leaves the value, on running and new hosts alike.
    func test_garbageOverRecordsTheHostsHold_isDroppedEverywhere_asANewHostReadsIt() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        for request in [#"{"op":"set","key":"x","value":10}"#, #"{"op":"define","key":"y","expr":"1 + 1"}"#,
                        #"{"op":"bind","from":"a","to":"t"}"#, #"{"op":"set","key":"a","value":1}"#,
                        #"{"op":"set","key":"v","value":5}"#, #"{"op":"set","key":"p","value":3}"#,
                        #"{"op":"bind","from":"p","to":"q","two_way":true}"#] {
            XCTAssertEqual(try hosts.request(0, request)["ok"] as? Bool, true, request)
        }
        // b/p: garbage under the name of a two-way binding's other key, whose record is b/q.
        for (record, garbage) in [("k/x", "not json"), ("d/y", #"{"expr":"1 +"}"#), ("b/t", #"{"from":"a"}"#), ("d/v", "[]"),
                                  ("b/p", "{}")] {
            try hosts.etcd.etcdctl(["put", hosts.prefix + record, garbage])
        }
        let marker = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"marker","value":1}"#)["rev"] as? Int)
        waitFor("host 2 at the marker") { (try? hosts.request(1, #"{"op":"get","key":"marker"}"#)["rev"] as? Int) == marker }
        // Two new hosts: one applies the history from before the garbage, one reads the state
        // after it (`history = 1`: the read is one revision back).
        let fresh = try ClusterHosts(hosts.etcd, count: 1, prefix: hosts.prefix)
        let late = try ClusterHosts(hosts.etcd, count: 1, prefix: hosts.prefix, settings: "history = 1\n")
        func state(_ dump: [String: Any]) -> [String] {
            let keys = (dump["keys"] as? [[String: Any]] ?? []).map { "\($0["key"] ?? "")=\($0["value"] ?? $0["expr"] ?? "")" }
            let bindings = (dump["bindings"] as? [[String: Any]] ?? []).map { "\($0["from"] ?? "")->\($0["to"] ?? "")" }
            return (keys + bindings).sorted()
        }
        let expected = ["a=1", "marker=1", "p->q", "p=3", "q=3", "t=1", "v=5"]
        XCTAssertEqual(state(try hosts.request(0, #"{"op":"dump"}"#)), expected, hosts.logs)
        XCTAssertEqual(state(try hosts.request(1, #"{"op":"dump"}"#)), expected, hosts.logs)
        XCTAssertEqual(state(try fresh.request(0, #"{"op":"dump"}"#)), expected, fresh.logs)
        XCTAssertEqual(state(try late.request(0, #"{"op":"dump"}"#)), expected, late.logs)
        // Nothing left of the binding, nor of x to compare against.
        _ = try hosts.request(1, #"{"op":"set","key":"a","value":2}"#)
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"t"}"#)["value"] as? Int, 1)
        let incremented = try hosts.request(1, #"{"op":"incr","key":"x"}"#)
        XCTAssertEqual(incremented["value"] as? Int, 1, "\(incremented)")
    }

    /// A key that was a binding's `to` made the `from` of a two-way binding (a two-way binding
    /// turned round, a chain's middle key bound both ways): its old record goes, so a host that
    /// reads the prefix has the bindings the running hosts have. And a binding record put by
    /// something else over a key of a two-way binding recorded under the other key: every host,
    /// running or new, holds the later of the two, as the running hosts applied them, and the
    /// earlier record is deleted, by the running hosts or by a host that meets it at its start.
    func test_bindingsRecordedUnderOtherKeys_areTheSameOnRunningHostsAndOnAHostThatReadsThePrefix() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        for request in [#"{"op":"bind","from":"p","to":"q","map":"value * 2","unmap":"value / 2","two_way":true}"#,
                        #"{"op":"bind","from":"q","to":"p","two_way":true}"#,
                        #"{"op":"bind","from":"a","to":"b","map":"value + 1"}"#,
                        #"{"op":"bind","from":"b","to":"c","two_way":true}"#,
                        #"{"op":"bind","from":"x","to":"y","two_way":true}"#] {
            XCTAssertEqual(try hosts.request(0, request)["ok"] as? Bool, true, request)
        }
        func records() throws -> [String] {
            try hosts.etcd.etcdctl(["get", hosts.prefix + "b/", "--prefix", "--keys-only"])
                .split(separator: "\n").filter { !$0.isEmpty }.map { String($0.dropFirst(hosts.prefix.count)) }.sorted()
        }
        XCTAssertEqual(try records(), ["b/c", "b/p", "b/y"], "no record left of p <-> q nor of a -> b")
        try hosts.etcd.etcdctl(["put", hosts.prefix + "b/x", #"{"from":"z","to":"x"}"#])
        // The running hosts drop x <-> y, and delete its record.
        XCTAssertTrue(waitFor("b/y deleted") { (try? records()) == ["b/c", "b/p", "b/x"] }, "\((try? records()) ?? [])\n\(hosts.logs)")
        func bindings(_ dump: [String: Any]) -> [String] {
            (dump["bindings"] as? [[String: Any]] ?? []).map {
                "\($0["from"] ?? "")->\($0["to"] ?? "")\($0["two_way"] as? Bool == true ? " two-way" : "")\(($0["map"] as? String).map { " " + $0 } ?? "")"
            }.sorted()
        }
        var expected = ["b->c two-way", "q->p two-way", "z->x"]
        XCTAssertEqual(bindings(try hosts.request(0, #"{"op":"dump"}"#)), expected, hosts.logs)
        XCTAssertEqual(bindings(try hosts.request(1, #"{"op":"dump"}"#)), expected, hosts.logs)

        // With no host running, a record over x again; then another write, so that a host that
        // starts with `history = 1` reads both records in the state it starts from.
        hosts.kill(0)
        hosts.kill(1)
        try hosts.etcd.etcdctl(["put", hosts.prefix + "b/k", #"{"from":"x","to":"k","two_way":true}"#])
        try hosts.etcd.etcdctl(["put", hosts.prefix + "k/after", #"{"value":1}"#])
        let late = try ClusterHosts(hosts.etcd, count: 1, prefix: hosts.prefix, settings: "history = 1\n")
        expected = ["b->c two-way", "q->p two-way", "x->k two-way"]
        XCTAssertEqual(bindings(try late.request(0, #"{"op":"dump"}"#)), expected, late.logs)
        XCTAssertEqual(try late.request(0, #"{"op":"stats"}"#)["bindings"] as? Int, 3)
        // It says which it did not load, and deletes its record.
        XCTAssertTrue(late.logs.contains("the stored binding z -> x is not loaded: x <-> k, written after it, binds the same key"),
                      late.logs)
        XCTAssertTrue(waitFor("b/x deleted") { (try? records()) == ["b/c", "b/k", "b/p"] }, "\((try? records()) ?? [])\n\(late.logs)")
        XCTAssertEqual(bindings(try late.request(0, #"{"op":"dump"}"#)), expected, late.logs)
    }

    func test_garbageUnderThePrefix_isSkippedAndReported() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 1)
        try hosts.etcd.etcdctl(["put", hosts.prefix + "k/bad", "not json"])
        try hosts.etcd.etcdctl(["put", hosts.prefix + "elsewhere", "{}"])
        // Well-formed records under names no client could have written: every host would hold a
        // key no request can name, and a dump `restore` refuses.
        try hosts.etcd.etcdctl(["put", hosts.prefix + "k/bad name", #"{"value":1}"#])
        try hosts.etcd.etcdctl(["put", hosts.prefix + "d/a..b", #"{"expr":"1"}"#])
        try hosts.etcd.etcdctl(["put", hosts.prefix + "b/t", #"{"from":"*","to":"t"}"#])
        try hosts.etcd.etcdctl(["put", hosts.prefix + "m/publish", #"{"channel":"no channel","payload":1}"#])
        _ = try hosts.request(0, #"{"op":"set","key":"good","value":1}"#)
        let stats = try hosts.request(0, #"{"op":"stats"}"#)
        let cluster = try XCTUnwrap(stats["cluster"] as? [String: Any])
        XCTAssertEqual(cluster["skipped_records"] as? Int, 6)
        XCTAssertTrue(hosts.hosts[0]!.log.contains(#"skipped \#(hosts.prefix)k/bad name: key name "bad name" is not a valid name"#), hosts.logs)
        let dump = try hosts.request(0, #"{"op":"dump"}"#)
        XCTAssertEqual((dump["keys"] as? [[String: Any]])?.compactMap { $0["key"] as? String }, ["good"], "\(dump)")
        XCTAssertEqual(cluster["state"] as? String, "connected")
        XCTAssertEqual(cluster["api"] as? String, "grpc")
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"bad"}"#)["error"].map { ($0 as? [String: Any])?["code"] as? String }, "not_found")
        XCTAssertTrue(hosts.hosts[0]!.log.contains("skipped \(hosts.prefix)k/bad"), hosts.logs)
        // What a monitoring user scrapes.
        let scrape = Process()
        scrape.executableURL = URL(fileURLWithPath: try builtExecutable("obsctl"))
        scrape.arguments = ["--socket", hosts.socket(0), "stats", "--format", "prometheus"]
        let statsPipe = Pipe()
        scrape.standardOutput = statsPipe
        try scrape.run()
        scrape.waitUntilExit()
        let exposition = String(decoding: statsPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(exposition.contains("obsd_cluster_skipped_records_total 6\n"), exposition)
        XCTAssertTrue(exposition.contains("obsd_cluster_state{state=\"connected\"} 1\n"), exposition)
        // What an operator reads: the cluster's row names every member, the zeros too (the
        // members to alert on were missing from it while they were 0).
        let text = Process()
        text.executableURL = URL(fileURLWithPath: try builtExecutable("obsctl"))
        text.arguments = ["--socket", hosts.socket(0), "stats"]
        let textPipe = Pipe()
        text.standardOutput = textPipe
        try text.run()
        text.waitUntilExit()
        let rows = String(decoding: textPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let clusterRow = try XCTUnwrap(rows.split(separator: "\n").first { $0.hasPrefix("cluster ") }, rows)
        for member in ["lag_revisions", "requests_sent 0", "requests_waiting 0", "skipped_records 6", "state connected"] {
            XCTAssertTrue(clusterRow.contains(member), "\(member) missing from: \(clusterRow)")
        }
        // --check reports it with its key.
        let check = Process()
        check.executableURL = URL(fileURLWithPath: try builtExecutable("obsd"))
        check.arguments = ["--check"] + hosts.arguments(0)
        let pipe = Pipe()
        check.standardOutput = pipe
        try check.run()
        check.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(check.terminationStatus, 1, output)
        XCTAssertTrue(output.contains("\(hosts.prefix)k/bad: not JSON"), output)
    }

    /// Garbage under the prefix is counted in `skipped_records` by the hosts that ran when it
    /// was written. A host restarted later, which meets it again (in etcd's history it applies at
    /// start, or in the state it starts from), does not count it again: an operator alerting on
    /// the counter's increase would be alerted at every restart for old garbage. It reports it
    /// apart (`skipped_at_start`, distinct records) and logs it in one line; garbage written
    /// after its start counts as before.
    func test_garbageWrittenBeforeARestart_isNotCountedAgain_butReportedApart() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 1)
        try hosts.etcd.etcdctl(["put", hosts.prefix + "k/bad", "not json"])
        try hosts.etcd.etcdctl(["put", hosts.prefix + "k/bad", "still not json"])
        try hosts.etcd.etcdctl(["put", hosts.prefix + "elsewhere", "{}"])
        _ = try hosts.request(0, #"{"op":"set","key":"good","value":1}"#)
        func stats() throws -> [String: Any] { try XCTUnwrap(try hosts.request(0, #"{"op":"stats"}"#)["cluster"] as? [String: Any]) }
        XCTAssertEqual(try stats()["skipped_records"] as? Int, 3)
        XCTAssertEqual(try stats()["skipped_at_start"] as? Int, 0)

        // Restarted: it applies etcd's history, garbage and all.
        hosts.kill(0)
        try hosts.start(0)
        _ = try hosts.request(0, #"{"op":"set","key":"good","value":2}"#)
        var cluster = try stats()
        XCTAssertEqual(cluster["skipped_records"] as? Int, 0, "\(cluster)\n\(hosts.logs)")
        XCTAssertEqual(cluster["skipped_at_start"] as? Int, 2, "\(cluster)")
        XCTAssertEqual(cluster["last_skipped"] as? String, hosts.prefix + "elsewhere", "\(cluster)")
        var log = hosts.hosts[0]!.log
        XCTAssertTrue(log.contains("applied etcd's history"), log)
        XCTAssertFalse(log.contains("cluster: skipped "), log)
        XCTAssertTrue(log.contains("cluster: 2 records under \(hosts.prefix) committed before this host started cannot be read and are "
                                   + "skipped (skipped_at_start; obsd --check lists those still there): \(hosts.prefix)elsewhere, "
                                   + "\(hosts.prefix)k/bad"), log)

        // Restarted with one revision of history: it reads them in the state it starts from.
        hosts.kill(0)
        let config = hosts.sandbox.root + "/h0.history.conf"
        try hosts.sandbox.write("etcd_timeout = 5s\nephemeral_ttl = 2s\nhistory = 1\n", to: config)
        let obsd = try ObsdProcess(hosts.sandbox, arguments: hosts.arguments(0) + ["--config", config], name: "h0.history")
        XCTAssertTrue(obsd.waitUntilListening(hosts.socket(0)), obsd.log)
        cluster = try stats()
        XCTAssertEqual(cluster["skipped_records"] as? Int, 0, "\(cluster)\n\(obsd.log)")
        XCTAssertEqual(cluster["skipped_at_start"] as? Int, 2, "\(cluster)")
        XCTAssertFalse(obsd.log.contains("cluster: skipped "), obsd.log)
        // Garbage written while it runs counts, and is logged with its key (here one it met at start).
        try hosts.etcd.etcdctl(["put", hosts.prefix + "k/bad", "not json either"])
        _ = try hosts.request(0, #"{"op":"set","key":"good","value":3}"#)
        cluster = try stats()
        XCTAssertEqual(cluster["skipped_records"] as? Int, 1, "\(cluster)")
        XCTAssertEqual(cluster["skipped_at_start"] as? Int, 2, "\(cluster)")
        log = obsd.log
        XCTAssertTrue(log.contains("cluster: skipped \(hosts.prefix)k/bad: "), log)
    }

    /// A message published on host 0 reaches the channel's watches on every host, the
    /// publisher's too, once each: the next event each gets is the next message.
    func test_publish_reachesWatchersOnEveryHost() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get())
        let watchers = try (0..<3).map { try watch(hosts, $0, ["news"]) }
        let first = try hosts.request(0, #"{"op":"publish","channel":"news","payload":"hi"}"#)
        XCTAssertEqual(first["delivered"] as? Int, 1, "the publisher's host counts its own watch: \(first)")
        XCTAssertEqual(try hosts.request(2, #"{"op":"publish","channel":"news","payload":"bye"}"#)["ok"] as? Bool, true)
        for (host, watcher) in watchers.enumerated() {
            let events = (0..<2).map { _ in ClusterHosts.event(watcher) }
            XCTAssertEqual(events.map { $0["channel"] as? String }, ["news", "news"], "host \(host): \(events)")
            XCTAssertEqual(events.map { $0["payload"] as? String }, ["hi", "bye"], "host \(host): \(events)")
        }
    }

    /// A host killed with kill -9 and started again catches up with what happened meanwhile.
    func test_aHostKilledAndRestarted_catchesUp() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        _ = try hosts.request(1, #"{"op":"set","key":"k","value":1}"#)
        hosts.kill(1)
        let last = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"k","value":2}"#)["rev"] as? Int)
        try hosts.start(1)
        let answer = try hosts.request(1, #"{"op":"get","key":"k"}"#)
        XCTAssertEqual(answer["value"] as? Int, 2)
        XCTAssertEqual(answer["rev"] as? Int, last)
    }

    /// A watch resumed with `since` on a host that was restarted after that revision replays
    /// what it missed, as a host that ran through it does: the restarted host applied etcd's
    /// history before serving, so its history holds the same events (computeds, an ephemeral
    /// key's removal and its reason), line for line. etcd's newest revision at the restart is
    /// another prefix's: the host serves once it holds etcd's state, not its revision.
    func test_aHostRestartedAfterAWatchersRevision_replaysWhatItMissed_asTheOthersDo() throws {
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        let keys = #"["k","j","sum","eph"]"#
        XCTAssertEqual(try hosts.request(0, #"{"op":"define","key":"sum","expr":"($k ?? 0) + ($j ?? 0)"}"#)["ok"] as? Bool, true)
        _ = try hosts.request(0, #"{"op":"set","key":"j","value":10}"#)
        let seen = try XCTUnwrap(try hosts.request(1, #"{"op":"set","key":"k","value":1}"#)["rev"] as? Int)
        hosts.kill(1)
        _ = try hosts.request(0, #"{"op":"set","key":"k","value":2}"#)
        let owner = try hosts.client(0)
        owner.send(#"{"op":"set","key":"eph","value":"here","ephemeral":true}"# + "\n")
        XCTAssertEqual(json(owner.readLine())["ok"] as? Bool, true)
        owner.shutdownWrite()
        _ = owner.readLine()
        _ = try hosts.request(0, #"{"op":"batch","ops":[{"op":"set","key":"k","value":3},{"op":"delete","key":"j"}]}"#)
        waitFor("the ephemeral key's removal") { (try? hosts.request(0, #"{"op":"get","key":"eph"}"#)["ok"] as? Bool) == false }
        let last = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"k","value":4}"#)["rev"] as? Int)
        try hosts.etcd.etcdctl(["put", "/another-prefix-\(UInt32.random(in: 0...UInt32.max))", "x"])

        try hosts.start(1)
        // Serving as soon as it listens, with etcd's state.
        let answer = try hosts.request(1, #"{"op":"get","key":"k"}"#)
        XCTAssertEqual(answer["value"] as? Int, 4, "\(answer)\n\(hosts.logs)")
        XCTAssertEqual(answer["rev"] as? Int, last)
        let log = hosts.hosts[1]?.log ?? ""
        XCTAssertTrue(log.contains("applied etcd's history from revision"), log)
        // Another prefix's write came after the last of this one's: the log says why the host
        // stopped short of etcd's revision at its start.
        XCTAssertTrue(log.contains("to \(last); nothing under \(hosts.prefix) changed from there to revision"), log)
        XCTAssertFalse(log.contains("cannot apply etcd's history"), log)
        // Small revisions: its watch needs no fragments, which etcd 3.4 makes slowly.
        XCTAssertFalse(log.contains("fragments"), log)
        /// The lines of a watch resumed at `seen` on `index`, up to `synced`.
        func resumed(_ index: Int) throws -> [String] {
            let client = try hosts.client(index)
            client.send(#"{"op":"watch","keys":\#(keys),"since":\#(seen)}"# + "\n")
            XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
            var lines: [String] = []
            while let line = client.readLine(), json(line)["event"] as? String != "synced" { lines.append(line) }
            return lines
        }
        let ranThrough = try resumed(0), restarted = try resumed(1)
        XCTAssertEqual(restarted, ranThrough, hosts.logs)
        let events = ranThrough.map { json($0) }
        XCTAssertEqual(events.first?["rev"] as? Int, seen + 1, "\(ranThrough)")
        XCTAssertFalse(events.contains { $0["event"] as? String == "compacted" }, "\(ranThrough)")
        XCTAssertTrue(events.contains { $0["key"] as? String == "eph" && $0["reason"] as? String == "ephemeral" }, "\(ranThrough)")
        XCTAssertTrue(events.contains { $0["key"] as? String == "sum" && $0["new"] as? Int == 12 }, "\(ranThrough)")
        XCTAssertEqual(events.last?["rev"] as? Int, last)
        // A host that never ran before does the same.
        let joined = try ClusterHosts(hosts.etcd, count: 1, prefix: hosts.prefix)
        let client = try joined.client(0)
        client.send(#"{"op":"watch","keys":\#(keys),"since":\#(seen)}"# + "\n")
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        var lines: [String] = []
        while let line = client.readLine(), json(line)["event"] as? String != "synced" { lines.append(line) }
        XCTAssertEqual(lines, ranThrough, joined.logs)
    }

    /// A host started after etcd compacted its history applies what etcd still holds: a watch
    /// resumed from before the compaction gets `compacted` and a snapshot, one from after it the
    /// changes.
    func test_aHostStartedAfterACompaction_replaysFromTheOldestRevisionEtcdKeeps() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        let before = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"k","value":1}"#)["rev"] as? Int)
        hosts.kill(1)
        let compacted = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"k","value":2}"#)["rev"] as? Int)
        _ = try hosts.request(0, #"{"op":"set","key":"k","value":3}"#)
        try etcd.etcdctl(["compaction", "\(compacted)"])
        _ = try hosts.request(0, #"{"op":"set","key":"k","value":4}"#)
        try hosts.start(1)
        let old = try hosts.client(1)
        old.send(#"{"op":"watch","keys":["k"],"since":\#(before)}"# + "\n")
        XCTAssertEqual(json(old.readLine())["ok"] as? Bool, true)
        XCTAssertEqual(ClusterHosts.event(old)["event"] as? String, "compacted", hosts.logs)
        let kept = try hosts.client(1)
        kept.send(#"{"op":"watch","keys":["k"],"since":\#(compacted)}"# + "\n")
        XCTAssertEqual(json(kept.readLine())["ok"] as? Bool, true)
        XCTAssertEqual((0..<3).map { _ in ClusterHosts.event(kept)["new"] as? Int }, [3, 4, nil], hosts.logs)
        XCTAssertTrue(hosts.logs.contains("applied etcd's history from revision \(compacted)"), hosts.logs)
    }

    /// etcd with authentication on: obsd logs in with its user, the password from the environment.
    func test_etcdAuthentication_userAndPasswordFromTheEnvironment() throws {
        var options = EtcdCluster.Options()
        options.rootPassword = "s3cret"
        let etcd = try startEtcdCluster(options)
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2, extra: ["--etcd-user", "root"], environment: ["OBSD_ETCD_PASSWORD": "s3cret"])
        let watcher = try watch(hosts, 1, ["k"])
        _ = try hosts.request(0, #"{"op":"set","key":"k","value":"logged in"}"#)
        XCTAssertEqual(ClusterHosts.event(watcher)["new"] as? String, "logged in")
        // A wrong password: obsd refuses to start, saying why.
        let wrong = try ObsdProcess(hosts.sandbox, arguments: hosts.arguments(2) + ["--etcd-user", "root"],
                                    environment: ["OBSD_ETCD_PASSWORD": "wrong"], name: "wrong")
        XCTAssertEqual(wrong.waitForExit(), 1)
        XCTAssertTrue(wrong.log.contains("authentication failed"), wrong.log)
    }

    /// Moving from one host to a cluster: `obsctl dump` on the single host, `obsctl restore` on a
    /// cluster host; every host has the state, definitions and bindings included.
    func test_dumpOfASingleHost_restoredIntoTheCluster() throws {
        let single = try Sandbox()
        let old = try ObsdProcess(single, arguments: ["--socket", single.socket, "--memory"])
        XCTAssertTrue(old.waitUntilListening())
        let oldClient = try Client(single.socket)
        for line in [#"{"op":"set","key":"a","value":20}"#, #"{"op":"define","key":"f","expr":"$a * 9 / 5 + 32"}"#,
                     #"{"op":"bind","from":"a","to":"b"}"#] {
            oldClient.send(line + "\n")
            XCTAssertEqual(json(oldClient.readLine())["ok"] as? Bool, true)
        }
        oldClient.send(#"{"op":"dump"}"# + "\n")
        var dump = json(oldClient.readLine())
        dump["op"] = "restore"
        dump["id"] = nil
        dump["ok"] = nil
        let restore = String(decoding: try JSONSerialization.data(withJSONObject: dump), as: UTF8.self)
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2)
        XCTAssertEqual(try hosts.request(0, restore)["ok"] as? Bool, true)
        let rev = try XCTUnwrap(try hosts.request(0, #"{"op":"ping"}"#)["rev"] as? Int)
        waitFor("host 1 at \(rev)") { (try? hosts.request(1, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= rev }
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"f"}"#)["value"] as? Int, 68)
        XCTAssertEqual(try hosts.request(1, #"{"op":"get","key":"b"}"#)["value"] as? Int, 20)
        _ = try hosts.request(1, #"{"op":"set","key":"a","value":100}"#)
        waitFor("the binding on host 0") { (try? hosts.request(0, #"{"op":"get","key":"b"}"#)["value"] as? Int) == 100 }
    }

    /// A proxy the environment names (meant for the web) is not used for etcd's members: with
    /// every proxy variable libcurl reads pointing at a closed port, the hosts start and share
    /// writes as without them.
    func test_proxyVariablesOfTheEnvironment_areNotUsedForEtcd() throws {
        let closed = "http://127.0.0.1:9"
        let proxies = Dictionary(uniqueKeysWithValues: ["http_proxy", "https_proxy", "all_proxy", "HTTPS_PROXY", "ALL_PROXY"].map { ($0, closed) })
        let hosts = try ClusterHosts(try SharedEtcd.get(), count: 2, environment: proxies)
        let watcher = try watch(hosts, 1, ["k"])
        let rev = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"k","value":1}"#)["rev"] as? Int, hosts.logs)
        XCTAssertEqual(ClusterHosts.event(watcher)["rev"] as? Int, rev)
    }

    func test_TLS_withClientCertificates() throws {
        var options = EtcdCluster.Options()
        options.tls = true
        let etcd = try startEtcdCluster(options)
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        let watcher = try watch(hosts, 1, ["k"])
        _ = try hosts.request(0, #"{"op":"set","key":"k","value":"secret"}"#)
        XCTAssertEqual(ClusterHosts.event(watcher)["new"] as? String, "secret")
    }

    /// Renewed certificates are read at a reload, under the same rules as at start: files that
    /// break them are refused and the ones in use kept; new files are what the next connection
    /// presents (here a certificate of a CA etcd does not trust, so writes fail until the right
    /// files are back); a watch goes on over its connection meanwhile.
    func test_TLS_filesAreReadAgainAtAReload() throws {
        var options = EtcdCluster.Options()
        options.tls = true
        let etcd = try startEtcdCluster(options)
        defer { etcd.shutDown() }
        let files = try Sandbox()
        let (cert, key) = (files.root + "/client.crt", files.root + "/client.key")
        func install(_ certSource: String, _ keySource: String) throws { try installClientFiles(certSource, keySource, as: (cert, key)) }
        try install(etcd.clientCertFile!, etcd.clientKeyFile!)
        let hosts = try ClusterHosts(etcd, count: 2, timeout: "2s", clientFiles: (cert, key))
        let host = try XCTUnwrap(hosts.hosts[0])
        let watcher = try watch(hosts, 1, ["k"])
        func set(_ value: Int) throws -> [String: Any] { try hosts.request(0, "{\"op\":\"set\",\"key\":\"k\",\"value\":\(value)}") }
        func reload(until line: String, count: Int) {
            host.signal(SIGHUP)
            XCTAssertTrue(waitFor("the reload") { host.log.components(separatedBy: line).count - 1 >= count }, host.log)
        }
        XCTAssertEqual(try set(1)["ok"] as? Bool, true)

        // A key every user can read is refused; the running files stay in use.
        chmod(key, 0o644)
        reload(until: "keeping the TLS files in use", count: 1)
        XCTAssertTrue(host.log.contains("etcd_key \(key) is readable by every user"), host.log)
        chmod(key, 0o600)
        XCTAssertEqual(try set(2)["ok"] as? Bool, true)

        // Another CA's certificate: the next connection presents it, and etcd refuses it.
        let other = try TestCertificates(directory: files.root + "/other")
        try install(other.clientCertFile, other.clientKeyFile)
        reload(until: "read the TLS files again", count: 1)
        let refused = try set(3)
        XCTAssertEqual((refused["error"] as? [String: Any])?["code"] as? String, "unavailable", "\(refused)")

        // The right files again: writes go through.
        try install(etcd.clientCertFile!, etcd.clientKeyFile!)
        reload(until: "read the TLS files again", count: 2)
        XCTAssertEqual(try set(4)["ok"] as? Bool, true, hosts.logs)
        var seen: [Int] = []
        while seen.last != 4, let value = ClusterHosts.event(watcher)["new"] as? Int { seen.append(value) }
        XCTAssertEqual(seen, [1, 2, 4])
    }

    /// A reload to a client certificate etcd refuses (another CA's). Under TLS 1.3 a member
    /// refuses it after the client's side of the handshake is done, and its alert or its reset
    /// comes with libcurl's first read or write: each write (a new connection each) must fail with
    /// the TLS reason, which says nothing was written, never as an outage after sending ("may have
    /// been applied"), which one write in two did by hand, and a few in a hundred do here: hence
    /// the many writes.
    func test_TLS_aReloadToACertificateEtcdRefuses_failsEveryWriteWithTheTLSReason() throws {
        var options = EtcdCluster.Options()
        options.tls = true
        let etcd = try startEtcdCluster(options)
        defer { etcd.shutDown() }
        let files = try Sandbox()
        let (cert, key) = (files.root + "/client.crt", files.root + "/client.key")
        func install(_ certSource: String, _ keySource: String) throws { try installClientFiles(certSource, keySource, as: (cert, key)) }
        try install(etcd.clientCertFile!, etcd.clientKeyFile!)
        let hosts = try ClusterHosts(etcd, count: 1, timeout: "5s", clientFiles: (cert, key))
        let host = try XCTUnwrap(hosts.hosts[0])
        func set(_ value: Int) throws -> [String: Any] { try hosts.request(0, "{\"op\":\"set\",\"key\":\"k\",\"value\":\(value)}") }
        XCTAssertEqual(try set(0)["ok"] as? Bool, true)

        let other = try TestCertificates(directory: files.root + "/other")
        try install(other.clientCertFile, other.clientKeyFile)
        host.signal(SIGHUP)
        XCTAssertTrue(waitFor("the reload") { host.log.contains("read the TLS files again") }, host.log)
        for value in 1...150 {
            let answer = try set(value)
            let error = answer["error"] as? [String: Any] ?? [:]
            let message = error["message"] as? String ?? ""
            XCTAssertEqual(error["code"] as? String, "unavailable", "\(answer)")
            // etcd's alert is the reason, whether libcurl read it under the write or a probe did.
            XCTAssertTrue(message.contains("TLS to etcd failed") && message.contains("alert"), "write \(value): \(message)")
            XCTAssertFalse(message.contains("may have been applied") || message.contains("may still be committed"),
                           "write \(value): \(message)")
        }
        try install(etcd.clientCertFile!, etcd.clientKeyFile!)
        host.signal(SIGHUP)
        XCTAssertTrue(waitFor("the second reload") { host.log.components(separatedBy: "read the TLS files again").count - 1 >= 2 },
                      host.log)
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"k"}"#)["value"] as? Int, 0, "none of the refused writes applied")
    }

    /// With `etcd_cacert`, that CA is the only one trusted: not also the system's CAs in
    /// /etc/ssl/certs, where any public CA (or one an administrator added for something else)
    /// could vouch for a server posing as etcd. `obsd --check` runs in a mount namespace of its
    /// own whose /etc/ssl/certs holds the CA that signed etcd's certificate: trusted without
    /// `etcd_cacert` (so the system's directory is where libcurl looks), refused beside another
    /// `etcd_cacert`.
    func test_TLS_withEtcdCACert_theSystemsCAsAreNotTrusted() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else {
            throw XCTSkip("needs root and util-linux's unshare for a mount namespace")
        }
        var options = EtcdCluster.Options()
        options.tls = true
        let etcd = try startEtcdCluster(options)
        defer { etcd.shutDown() }
        let sandbox = try Sandbox()
        let systemCAs = sandbox.root + "/certs"
        try FileManager.default.createDirectory(atPath: systemCAs, withIntermediateDirectories: true)
        let etcdCA = try XCTUnwrap(etcd.caFile)
        try FileManager.default.copyItem(atPath: etcdCA, toPath: systemCAs + "/ca-certificates.crt")
        func openssl(_ arguments: [String]) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = arguments
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0, "openssl \(arguments)")
            return text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        // Where OpenSSL looks a CA up in a directory: a file named by the hash of its subject.
        try FileManager.default.copyItem(atPath: etcdCA, toPath: systemCAs + "/\(try openssl(["x509", "-hash", "-noout", "-in", etcdCA])).0")
        // Another CA, under another name (OpenSSL picks an issuer by its name: one named as etcd's
        // would be tried, fail, and hide what this test is about).
        let otherCA = sandbox.root + "/other-ca.crt"
        _ = try openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                         "-keyout", sandbox.root + "/other-ca.key", "-out", otherCA, "-days", "2", "-subj", "/CN=another CA"])

        func check(cacert: String?) throws -> ObsdProcess {
            let obsd = try builtExecutable("obsd")
            let arguments = ["--check", "--config", "/dev/null", "--cluster", "etcd", "--etcd-endpoints", etcd.endpoints[0],
                             "--etcd-cert", try XCTUnwrap(etcd.clientCertFile), "--etcd-key", try XCTUnwrap(etcd.clientKeyFile)]
                + (cacert.map { ["--etcd-cacert", $0] } ?? [])
            return try ObsdProcess(sandbox, arguments: ["--mount", "--propagation", "private", "/bin/sh", "-c",
                                                        "mount --bind \"$0\" /etc/ssl/certs && exec \"$@\"", systemCAs, obsd] + arguments,
                                   executable: "/usr/bin/unshare", name: "check")
        }
        let trusted = try check(cacert: nil)
        XCTAssertEqual(trusted.waitForExit(), 0, "the namespace's /etc/ssl/certs is not what libcurl trusts: \(trusted.output)\(trusted.log)")
        let withAnotherCA = try check(cacert: otherCA)
        XCTAssertEqual(withAnotherCA.waitForExit(), 1, "the system's CAs were trusted beside etcd_cacert: \(withAnotherCA.output)\(withAnotherCA.log)")
        let withEtcdsCA = try check(cacert: etcdCA)
        XCTAssertEqual(withEtcdsCA.waitForExit(), 0, "\(withEtcdsCA.output)\(withEtcdsCA.log)")
    }

    /// A client key every user can read stops obsd at start, and `--check` says why; so does a
    /// configuration file with etcd_password that every user can read.
    func test_TLSKeyOrPasswordEveryUserCanRead_isRefusedAtStart() throws {
        let sandbox = try Sandbox()
        let certificates = try TestCertificates(directory: sandbox.root + "/tls")
        chmod(certificates.clientKeyFile, 0o644)
        let cluster = ["--cluster", "etcd", "--etcd-endpoints", "https://127.0.0.1:1", "--etcd-cacert", certificates.caFile,
                       "--etcd-cert", certificates.clientCertFile, "--etcd-key", certificates.clientKeyFile, "--config", "/dev/null"]
        let obsd = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--state-dir", sandbox.state] + cluster)
        XCTAssertEqual(obsd.waitForExit(), 1)
        XCTAssertTrue(obsd.log.contains("etcd_key \(certificates.clientKeyFile) is readable by every user"), obsd.log)
        let check = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"] + cluster)
        XCTAssertEqual(check.waitForExit(), 1, check.output)
        XCTAssertTrue(check.output.contains("etcd_key \(certificates.clientKeyFile) is readable by every user"), check.output)

        try sandbox.write("cluster = etcd\netcd_endpoints = https://127.0.0.1:1\netcd_user = obsd\netcd_password = secret\n", to: sandbox.config)
        chmod(sandbox.config, 0o644)
        let withPassword = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--state-dir", sandbox.state, "--config", sandbox.config])
        XCTAssertEqual(withPassword.waitForExit(), 1)
        XCTAssertTrue(withPassword.log.contains("\(sandbox.config) is readable by every user"), withPassword.log)
    }
}

/// Failures of etcd members, with a cluster of their own.
final class ClusterFailureTests: XCTestCase {
    /// One member down keeps the quorum: nothing visible but latency. (The member killed is not
    /// the leader: a write in flight when the leader dies is lost by etcd and fails, see the next
    /// test.)
    func test_oneEtcdMemberKilled_nothingVisible() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        let watcher = try watch(hosts, 1, ["k"])
        try etcd.moveLeader(to: 1)
        etcd.kill(0)
        for value in 1...5 {
            let answer = try hosts.request(0, #"{"op":"set","key":"k","value":\#(value)}"#)
            XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)\n\(hosts.logs)")
            XCTAssertEqual(ClusterHosts.event(watcher)["new"] as? Int, value)
        }
        // Not an outage: no host logs one, nor shows one in its stats (a watch on the killed
        // member ends and is set up again on another, `degraded` meanwhile).
        for index in 0..<2 {
            let cluster = try hosts.request(index, #"{"op":"stats"}"#)["cluster"] as? [String: Any] ?? [:]
            XCTAssertNil(cluster["last_failure"], "\(cluster)")
            XCTAssertFalse(hosts.hosts[index]!.log.contains("etcd unavailable"), hosts.hosts[index]!.log)
        }
    }

    /// The leader killed: etcd elects another; a write in flight at that moment may fail with
    /// `unavailable` (etcd lost it, or not: its outcome is unknown), and writes work again
    /// within the timeout; watchers see every write that committed, once, in order.
    func test_leaderKilled_writesResume() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        let watcher = try watch(hosts, 1, ["k"])
        try etcd.moveLeader(to: 0)
        etcd.kill(0)
        var committed: [Int] = []
        for value in 1...5 {
            let answer = try hosts.request(0, #"{"op":"set","key":"k","value":\#(value)}"#)
            if answer["ok"] as? Bool == true {
                committed.append(value)
            } else {
                XCTAssertEqual((answer["error"] as? [String: Any])?["code"] as? String, "unavailable", "\(answer)")
            }
        }
        XCTAssertGreaterThanOrEqual(committed.count, 4, "at most the write in flight at the leader's death fails")
        var seen: [Int] = []
        while seen.last != 5 {
            guard let value = ClusterHosts.event(watcher)["new"] as? Int else { break }
            seen.append(value)
        }
        XCTAssertEqual(seen.filter { committed.contains($0) }, committed)
        XCTAssertEqual(Set(seen).count, seen.count, "no change twice")
    }

    /// A client that goes on sending while its `set` waits for etcd (every member frozen): obsd
    /// reads none of it meanwhile, so it stays in the socket, bounded by the kernel's buffers (the
    /// loop leaves the connection's input registered while the answer is pending, and takes it out
    /// when the client sends more); once etcd is back, every request is answered, in order.
    func test_requestsSentWhileAnAnswerIsPending_stayInTheSocket_thenAreAnsweredInOrder() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 1, timeout: "60s")
        XCTAssertEqual(try hosts.request(0, #"{"op":"set","key":"k","value":"warm"}"#)["ok"] as? Bool, true, hosts.logs)
        let client = try hosts.client(0)

        for member in 0..<3 { etcd.pause(member) }
        let padding = String(repeating: "x", count: 4000)
        var pending: [UInt8] = []
        var accepted = 0
        var lines = 0
        while accepted < 8 << 20 {
            if pending.isEmpty {
                pending = Array(#"{"id":\#(lines),"op":"set","key":"k","value":"\#(lines) \#(padding)"}"#.utf8) + [0x0A]
                lines += 1
            }
            let sent = pending.withUnsafeBytes { send(client.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
            if sent < 0, errno == EAGAIN {
                // The socket is full: sending goes on only if obsd reads.
                var writable = pollfd(fd: client.fd, events: Int16(POLLOUT), revents: 0)
                guard poll(&writable, 1, 500) > 0 else { break }
                continue
            }
            guard sent > 0 else { return XCTFail("send: \(String(cString: strerror(errno)))") }
            accepted += sent
            pending.removeFirst(sent)
        }
        XCTAssertLessThan(accepted, 2 << 20, "obsd read \(accepted) bytes of requests while an answer was pending")

        for member in 0..<3 { etcd.resume(member) }
        XCTAssertTrue(client.send(pending))
        for id in 0..<lines {
            let answer = json(client.readLine())
            XCTAssertEqual(answer["id"] as? Int, id, "\(answer)\n\(hosts.logs)")
            guard answer["ok"] as? Bool == true else { return XCTFail("\(answer)\n\(hosts.logs)") }
        }
        let last = try hosts.request(0, #"{"op":"get","key":"k"}"#)["value"] as? String
        XCTAssertEqual(last, "\(lines - 1) \(padding)")
    }

    /// Two members down: writes fail with `unavailable` within the timeout, reads go on on
    /// every host; when they are back, every watcher gets every change.
    func test_quorumLost_writesUnavailable_readsGoOn_thenEveryChangeArrives() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 3, timeout: "2s")
        let first = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"k","value":0}"#)["rev"] as? Int)
        let watchers = try [1, 2].map { try watch(hosts, $0, ["k"]) }
        etcd.kill(1)
        etcd.kill(2)
        let start = Date()
        let writer = try hosts.client(0)
        writer.send(#"{"op":"set","key":"k","value":1}"# + "\n")
        // Reads go on on every host, the writer's too, whether or not its write is still waiting.
        for host in 0..<3 {
            var read: [String: Any] = [:]
            XCTAssertTrue(waitFor("host \(host) to have applied \(first)") {
                read = (try? hosts.request(host, #"{"op":"get","key":"k"}"#)) ?? [:]
                return read["rev"] as? Int ?? 0 >= first
            }, "\(read)")
            XCTAssertEqual(read["value"] as? Int, 0, "reads go on, host \(host): \(read)")
        }
        let failed = json(writer.readLine())
        XCTAssertEqual((failed["error"] as? [String: Any])?["code"] as? String, "unavailable", "\(failed)")
        XCTAssertLessThan(Date().timeIntervalSince(start), 30, "bounded by etcd_timeout (2 s here), with a wide margin")
        let stats = try hosts.request(0, #"{"op":"stats"}"#)
        XCTAssertEqual((stats["cluster"] as? [String: Any])?["state"] as? String, "unavailable")
        try etcd.restart([1, 2])
        for value in 2...4 {
            waitFor("a write to succeed again") {
                (try? hosts.request(0, #"{"op":"set","key":"k","value":\#(value)}"#)["ok"] as? Bool) == true
            }
        }
        // The log says when the outage ended, as it said when it began.
        let log = hosts.hosts[0]!.log
        XCTAssertTrue(log.contains("cluster: etcd answers again"), log)
        // Each watcher, on either host, sees each committed change in order, the same as the
        // other (the failed write may have been committed after all when etcd came back: a write
        // that timed out is "unknown").
        var seen: [[Int]] = []
        for watcher in watchers {
            var values: [Int] = []
            while values.last != 4 {
                guard let value = ClusterHosts.event(watcher)["new"] as? Int else { break }
                values.append(value)
            }
            XCTAssertEqual(values.filter { $0 != 1 }, [2, 3, 4], hosts.logs)
            seen.append(values)
        }
        XCTAssertEqual(seen[0], seen[1], "both hosts' watchers")
    }

    /// Every member stopped: each connection is refused, no write can have reached etcd, and
    /// the `unavailable` says nothing of one that may still be committed. Every member frozen
    /// instead (quorum lost, connections still taken by the kernel): the write was sent into
    /// them and may be read and committed once they run again, which the message says. Two of
    /// three killed: once the member left knows it has no leader, it refuses writes "no leader"
    /// without proposing them, and those say nothing of the kind either.
    func test_everyMemberStopped_writesUnavailableWithoutMaybe_everyMemberFrozen_writesMayStillBeCommitted() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 1, timeout: "2s")
        XCTAssertEqual(try hosts.request(0, #"{"op":"set","key":"k","value":0}"#)["ok"] as? Bool, true, hosts.logs)
        func failure(_ value: Int) throws -> (code: String?, message: String) {
            let answer = try hosts.request(0, #"{"op":"set","key":"k","value":\#(value)}"#)
            let error = answer["error"] as? [String: Any] ?? [:]
            return (error["code"] as? String, error["message"] as? String ?? "\(answer)")
        }

        for member in 0..<3 { etcd.stop(member) }
        for value in 1...3 {
            let (code, message) = try failure(value)
            XCTAssertEqual(code, "unavailable", message)
            XCTAssertFalse(message.contains("may still be committed") || message.contains("may have been applied"), message)
            for endpoint in etcd.endpoints { XCTAssertTrue(message.contains(endpoint), "every endpoint tried: \(message)") }
        }
        try etcd.restart([0, 1, 2])
        XCTAssertTrue(waitFor("etcd to take writes again") {
            (try? hosts.request(0, #"{"op":"set","key":"k","value":4}"#)["ok"] as? Bool) == true
        }, hosts.logs)

        for member in 0..<3 { etcd.pause(member) }
        let (code, message) = try failure(5)
        for member in 0..<3 { etcd.resume(member) }
        XCTAssertEqual(code, "unavailable", message)
        // Said once: after the member whose answer was lost, or for the write as a whole.
        let said = message.components(separatedBy: "may have been applied").count - 1 + message.components(separatedBy: "may still be committed").count - 1
        XCTAssertEqual(said, 1, message)

        XCTAssertTrue(waitFor("etcd to take writes again") {
            (try? hosts.request(0, #"{"op":"set","key":"k","value":6}"#)["ok"] as? Bool) == true
        }, hosts.logs)
        etcd.kill(1)
        etcd.kill(2)
        var refused = ""
        XCTAssertTrue(waitFor("the member left to refuse writes for want of a leader") {
            refused = (try? failure(7).message) ?? ""
            return refused.contains("no leader")
        }, refused)
        XCTAssertFalse(refused.contains("may still be committed") || refused.contains("may have been applied"), refused)
    }

    /// A host whose watch fell behind while etcd compacted its history: its watchers get
    /// `compacted` and a snapshot, then live events. A watcher of the keys written meanwhile may
    /// instead overflow while the host applies what etcd still held (32 KB an event, faster than
    /// the test reads them), which also ends in a snapshot: never silence.
    func test_compactionUnderASlowHost_compactedAndSnapshot() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 2)
        _ = try hosts.request(0, #"{"op":"set","key":"status","value":"before"}"#)
        let watcher = try watch(hosts, 1, ["status"])
        let bulk = try watch(hosts, 1, ["big.*"])
        let missed = try watch(hosts, 1, ["mid"])
        hosts.hosts[1]!.signal(SIGSTOP)
        // Enough to fill every buffer between etcd and the stopped host, so that etcd has to
        // replay its watch from its history later.
        let value = String(repeating: "x", count: 16_384)
        let writer = try hosts.client(0)
        var last = 0
        // The key each revision wrote.
        var written: [Int: String] = [:]
        for index in 0..<1200 {
            writer.send(#"{"op":"set","key":"big.\#(index % 50)","value":"\#(value)\#(index)"}"# + "\n")
            if index % 100 == 99 {
                for answered in index - 99...index {
                    last = json(writer.readLine())["rev"] as? Int ?? last
                    written[last] = "big.\(answered % 50)"
                }
            }
        }
        // A change the stopped host cannot have had before the compaction (etcd's buffers to it
        // were full): its watcher gets `compacted` and a snapshot, not a change made up from
        // the read of everything at a revision that did not write it.
        last = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"mid","value":1}"#)["rev"] as? Int)
        try etcd.etcdctl(["compaction", "\(last)"])
        hosts.hosts[1]!.signal(SIGCONT)
        /// The events of `client` up to the `synced` after a snapshot that followed one of `ends`.
        func events(_ client: Client, until ends: Set<String>) -> [String] {
            var names: [String] = []
            var ended = false
            while true {
                guard let name = ClusterHosts.event(client)["event"] as? String else { return names + ["(nothing more)"] }
                names.append(name)
                if ends.contains(name) { ended = true }
                if name == "synced", ended { return names }
            }
        }
        let quiet = events(watcher, until: ["compacted"])
        let stats = try hosts.request(1, #"{"op":"stats"}"#)
        XCTAssertEqual(quiet, ["compacted", "initial", "synced"], "\(stats)\n\(hosts.logs)")
        XCTAssertEqual(events(missed, until: ["compacted"]), ["compacted", "initial", "synced"])
        // Before `compacted` (or `overflow`), only changes etcd's watch brought, each at the
        // revision that wrote it: none made up from the read of everything after the compaction.
        var busy: [String] = []
        var ended = false
        while true {
            let event = ClusterHosts.event(bulk)
            guard let name = event["event"] as? String else { busy.append("(nothing more)"); break }
            busy.append(name)
            if name == "compacted" || name == "overflow" { ended = true }
            if name == "synced", ended { break }
            if !ended, name == "change", let rev = event["rev"] as? Int {
                XCTAssertEqual(written[rev], event["key"] as? String, "a change before compacted that no write made: \(event)")
            }
        }
        XCTAssertEqual(busy.suffix(52).first, busy.contains("compacted") ? "compacted" : "overflow")
        XCTAssertEqual(busy.suffix(51), Array(repeating: "initial", count: 50) + ["synced"])

        let after = try hosts.request(0, #"{"op":"set","key":"big.0","value":"live"}"#)
        var live: [String: Any] = [:]
        repeat {
            live = ClusterHosts.event(bulk)
            // No event within the client's read timeout: the watch is stuck; fail rather than wait on.
            guard !live.isEmpty else { return XCTFail("host 1's watch never delivered the live change\n\(hosts.logs)") }
        } while live["event"] as? String != "change" || live["key"] as? String != "big.0" || live["new"] as? String != "live"
        XCTAssertEqual(live["rev"] as? Int, after["rev"] as? Int)
        let status = try hosts.request(0, #"{"op":"set","key":"status","value":"after"}"#)
        let change = ClusterHosts.event(watcher)
        XCTAssertEqual(change["new"] as? String, "after")
        XCTAssertEqual(change["rev"] as? Int, status["rev"] as? Int)
    }
}

/// Puts a client certificate and key where a host's configuration names them (replacing what is
/// there, as an operator renewing them does), the key readable by its owner only.
private func installClientFiles(_ certSource: String, _ keySource: String, as target: (cert: String, key: String)) throws {
    for (source, path) in [(certSource, target.cert), (keySource, target.key)] {
        try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: source, toPath: path)
    }
    chmod(target.key, 0o600)
}
