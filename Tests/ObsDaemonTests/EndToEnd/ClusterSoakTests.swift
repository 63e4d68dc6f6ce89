// A soak of cluster mode: three obsd hosts on a 3-member etcd cluster, two writers on every host
// doing every kind of write (increments, sets, deletes, batches, compare-and-set, ephemeral keys,
// TTL keys, a binding's source, a binding and a computed made and removed), a watcher of every key on every host that resumes with `since` when its
// host goes away, and failures meanwhile: a host killed with kill -9 and started again, an etcd
// member killed and restarted, a host stopped for a moment. At the end every host holds one state;
// every counter holds every acknowledged increment and at most those whose outcome was unknown;
// the binding's target is its source; the computed is its inputs' sum; and every watcher saw, for
// every revision it watched through, the very events the others saw.
//
// OBSD_CLUSTER_SOAK=SECONDS sets how long writes and failures go on: 20 by default (CI), longer
// by hand.
import Foundation
import Glibc
import TestSupport
import XCTest

/// What the writers learned, shared between their threads.
private final class Ledger: @unchecked Sendable {
    private let lock = NSLock()
    /// Per counter: increments acknowledged, and those whose outcome is unknown (`unavailable`,
    /// or the connection broke before the answer).
    private(set) var acknowledged: [String: Int] = [:]
    private(set) var unknown: [String: Int] = [:]
    /// Answers with an error no failure here explains.
    private(set) var unexpected: [String] = []
    private(set) var answers = 0

    func counted(_ key: String, acknowledged: Bool) {
        lock.withLock {
            if acknowledged { self.acknowledged[key, default: 0] += 1 } else { unknown[key, default: 0] += 1 }
        }
    }

    func answered(_ line: String?, allowing allowed: Set<String> = []) {
        lock.withLock {
            answers += 1
            guard let line else { return }
            let object = json(line)
            guard object["ok"] as? Bool == false, let code = (object["error"] as? [String: Any])?["code"] as? String else { return }
            if code != "unavailable", !allowed.contains(code), unexpected.count < 20 { unexpected.append(line) }
        }
    }

    func snapshot() -> (acknowledged: [String: Int], unknown: [String: Int], unexpected: [String], answers: Int) {
        lock.withLock { (acknowledged, unknown, unexpected, answers) }
    }
}

/// A watcher of every key on one host: the events of every revision it watched through, and the
/// revisions it did not (a `compacted` or `overflow` gap, which a snapshot closes).
private final class Watcher: @unchecked Sendable {
    let socket: String
    private let lock = NSLock()
    /// Event lines by revision, without the `watch` field (a watch's number is its host's own).
    private var events: [Int: [String]] = [:]
    /// The revision after which it watched, and the newest it got.
    private var first = 0
    private(set) var last = 0
    /// Revisions it missed and was told so: (after, up to], from `compacted` or `overflow` to
    /// the `synced` of the snapshot that followed.
    private var gaps: [(after: Int, upTo: Int)] = []
    private(set) var resumes = 0
    private(set) var compacted = 0
    private(set) var overflows = 0
    private var stopped = false
    /// Every line received, with the connection's number, for a failure's message.
    private var received: [String] = []
    private var connections = 0

    init(socket: String) {
        self.socket = socket
    }

    func stop() { lock.withLock { stopped = true } }
    var isStopped: Bool { lock.withLock { stopped } }

    /// Watches until stopped, connecting again (with `since`) whenever its host goes away.
    func run() {
        while !isStopped {
            guard let client = try? Client(socket, timeout: 1) else {
                usleep(50_000)
                continue
            }
            let since = lock.withLock { last }
            let resumed = since > 0
            client.send(resumed ? #"{"op":"watch","keys":["**"],"since":\#(since)}"# + "\n" : #"{"op":"watch","keys":["**"]}"# + "\n")
            guard let answer = client.readLine(), json(answer)["ok"] as? Bool == true else { continue }
            lock.withLock {
                if resumed { resumes += 1 }
                connections += 1
                received.append("#\(connections) \(answer) (since \(since))")
            }
            var gapFrom: Int?
            while !isStopped {
                guard let line = client.readLine() else {
                    // Nothing to read within the read timeout (its host stopped, say), or its
                    // host went away.
                    if client.timedOut { continue }
                    break
                }
                let event = json(line)
                let name = event["event"] as? String ?? ""
                lock.withLock {
                    received.append("#\(connections) \(line)")
                    switch name {
                    case "synced":
                        let rev = event["rev"] as? Int ?? 0
                        if first == 0, last == 0 { first = rev }
                        if let from = gapFrom { gaps.append((from, rev)) }
                        gapFrom = nil
                        last = max(last, rev)
                    case "compacted", "overflow":
                        if name == "compacted" { compacted += 1 } else { overflows += 1 }
                        gapFrom = last
                    case "change", "delete", "error":
                        guard gapFrom == nil, let rev = event["rev"] as? Int else { break }
                        let stripped = line.replacingOccurrences(of: #""watch":\d+,"#, with: "", options: .regularExpression)
                        events[rev, default: []].append(stripped)
                        last = max(last, rev)
                    default:
                        break
                    }
                }
            }
        }
    }

    /// Whether it watched through `rev`: after its first revision, up to its last, outside gaps.
    func watched(_ rev: Int) -> Bool {
        lock.withLock { rev > first && rev <= last && !gaps.contains { rev > $0.after && rev <= $0.upTo } }
    }

    func lines(at rev: Int) -> [String] { lock.withLock { events[rev] ?? [] } }

    /// The lines received around `rev`, as they came, for a failure's message.
    func receivedLines(around rev: Int) -> String {
        lock.withLock {
            let near = received.indices.filter { index in
                let line = received[index]
                return (rev - 2...rev + 2).contains { line.contains("\"rev\":\($0)") || line.contains("\"rev\":\($0),") }
            }
            guard let low = near.min(), let high = near.max() else { return "(nothing near)" }
            return received[max(0, low - 3)...min(received.count - 1, high + 3)].joined(separator: "\n    ")
                + "\n    first \(first), last \(last), gaps \(gaps)"
        }
    }
    var revisions: Set<Int> { lock.withLock { Set(events.keys) } }
    var range: (first: Int, last: Int) { lock.withLock { (first, last) } }
}

final class ClusterSoakTests: XCTestCase {
    private static let counters = (0..<4).map { "c.\($0)" }

    func test_soak_writesAndFailures_leaveOneState_andEveryWatcherSawTheSameChanges() throws {
        let seconds = Double(ProcessInfo.processInfo.environment["OBSD_CLUSTER_SOAK"] ?? "") ?? 20
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let hosts = try ClusterHosts(etcd, count: 3)
        let sockets = (0..<3).map { hosts.socket($0) }
        let sum = Self.counters.map { "($\($0) ?? 0)" }.joined(separator: " + ")
        for setup in [#"{"op":"define","key":"total","expr":"\#(sum)"}"#, #"{"op":"bind","from":"src","to":"dst"}"#,
                      #"{"op":"set","key":"cas","value":0}"#] {
            XCTAssertEqual(try hosts.request(0, setup)["ok"] as? Bool, true, setup)
        }

        let watchers = sockets.map { Watcher(socket: $0) }
        let watching = DispatchGroup()
        for watcher in watchers { DispatchQueue.global().async(group: watching) { watcher.run() } }
        for watcher in watchers { waitFor("a watcher's start") { watcher.range.first > 0 } }

        let ledger = Ledger()
        let stop = Flag()
        let writing = DispatchGroup()
        for (host, socket) in sockets.enumerated() {
            for writer in 0..<2 {
                let seed = UInt64(host * 2 + writer + 1)
                DispatchQueue.global().async(group: writing) {
                    Self.write(socket, name: "w\(host).\(writer)", seed: seed, ledger: ledger, until: stop)
                }
            }
        }

        // Failures, one every few seconds, in turn.
        let deadline = Date().addingTimeInterval(seconds)
        var round = 0
        while Date() < deadline {
            usleep(2_500_000)
            switch round % 3 {
            case 0:
                let index = 1 + round / 3 % 2
                hosts.kill(index)
                usleep(500_000)
                try hosts.start(index)
            case 1:
                let member = round / 3 % 3
                etcd.kill(member)
                usleep(1_000_000)
                try etcd.restart(member)
            default:
                let index = round / 3 % 3
                hosts.hosts[index]?.signal(SIGSTOP)
                usleep(1_000_000)
                hosts.hosts[index]?.signal(SIGCONT)
            }
            round += 1
        }
        stop.set()
        XCTAssertEqual(writing.wait(timeout: .now() + 60), .success, "the writers did not stop")

        // Every host applies the last write; then one state everywhere.
        let end = try XCTUnwrap(try hosts.request(0, #"{"op":"set","key":"end","value":true}"#)["rev"] as? Int, hosts.logs)
        for index in 0..<3 {
            XCTAssertTrue(waitFor("host \(index) at revision \(end)", timeout: 60) {
                (try? hosts.request(index, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= end
            }, hosts.logs)
        }
        for watcher in watchers { waitFor("a watcher at revision \(end)", timeout: 60) { watcher.range.last >= end } }
        for watcher in watchers { watcher.stop() }
        XCTAssertEqual(watching.wait(timeout: .now() + 30), .success, "the watchers did not stop")

        // Dumps as of one revision: a killed host's ephemeral keys may still be going (its lease
        // runs out up to 2 s after the kill).
        var dumps: [[String: Any]] = []
        waitFor("three dumps at one revision") {
            dumps = (0..<3).map { (try? hosts.request($0, #"{"op":"dump"}"#)) ?? [:] }
            return Set(dumps.map { $0["rev"] as? Int ?? -1 }).count == 1
        }
        let values = dumps.map { dump in
            Dictionary(uniqueKeysWithValues: (dump["keys"] as? [[String: Any]] ?? []).map {
                ($0["key"] as? String ?? "", "\($0["value"] ?? $0["expr"] ?? "")@\($0["rev"] ?? "")")
            })
        }
        XCTAssertFalse(values[0].isEmpty, "\(dumps[0])")
        for index in 1..<3 {
            let differing = Set(values[index].keys).union(values[0].keys).filter { values[index][$0] != values[0][$0] }.sorted()
            XCTAssertEqual(differing, [], "host \(index)'s state is not host 0's: "
                           + differing.prefix(10).map { "\($0): \(values[index][$0] ?? "none") against \(values[0][$0] ?? "none")" }.joined(separator: ", "))
        }

        let written = ledger.snapshot()
        XCTAssertEqual(written.unexpected, [], "answers with errors no failure explains")
        var total = 0
        for counter in Self.counters {
            let value = try XCTUnwrap(try hosts.request(0, #"{"op":"get","key":"\#(counter)"}"#)["value"] as? Int)
            let acknowledged = written.acknowledged[counter] ?? 0, unknown = written.unknown[counter] ?? 0
            XCTAssertTrue(value >= acknowledged && value <= acknowledged + unknown,
                          "\(counter) is \(value): \(acknowledged) increments acknowledged, \(unknown) unknown")
            total += value
        }
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"total"}"#)["value"] as? Int, total)
        let source = try hosts.request(0, #"{"op":"get","key":"src"}"#)["value"] as? Int
        XCTAssertEqual(try hosts.request(0, #"{"op":"get","key":"dst"}"#)["value"] as? Int, source)
        // The binding made and removed again and again works as made at the end.
        XCTAssertEqual(try hosts.request(1, #"{"op":"bind","from":"src2","to":"dst2"}"#)["ok"] as? Bool, true)
        let last = try XCTUnwrap(try hosts.request(2, #"{"op":"set","key":"src2","value":"last"}"#)["rev"] as? Int)
        for index in 0..<3 {
            waitFor("host \(index) at revision \(last)") { (try? hosts.request(index, #"{"op":"ping"}"#)["rev"] as? Int) ?? 0 >= last }
            XCTAssertEqual(try hosts.request(index, #"{"op":"get","key":"dst2"}"#)["value"] as? String, "last")
        }

        // The watchers: every revision two of them watched through has the same events in both.
        var compared = 0
        let revisions = watchers.reduce(into: Set<Int>()) { $0.formUnion($1.revisions) }
        for rev in revisions.sorted() {
            let seeing = watchers.filter { $0.watched(rev) }
            guard let reference = seeing.first else { continue }
            for other in seeing.dropFirst() where other.lines(at: rev) != reference.lines(at: rev) {
                let around = { (watcher: Watcher) in (rev - 2...rev + 1).map { "\($0): \(watcher.lines(at: $0))" }.joined(separator: "\n  ") }
                XCTFail("revision \(rev) differs:\n\(reference.socket) saw\n  \(around(reference))\n\(other.socket) saw\n  \(around(other))"
                        + "\n\(reference.socket) received\n    \(reference.receivedLines(around: rev))\n\(other.socket) received\n    \(other.receivedLines(around: rev))")
            }
            compared += seeing.count > 1 ? 1 : 0
        }
        // A host restarted holds etcd's history: its watcher resumes without a snapshot.
        XCTAssertEqual(watchers.map(\.compacted), [0, 0, 0], "watchers got `compacted`")
        let summary = "soak: \(seconds) s, \(round) failures, \(written.answers) answers, revisions up to \(end), "
            + "\(compared) compared across watchers, resumes \(watchers.map(\.resumes)), overflows \(watchers.map(\.overflows)), "
            + "increments acknowledged \(written.acknowledged.values.reduce(0, +)), unknown \(written.unknown.values.reduce(0, +))"
        print(summary)
        XCTAssertGreaterThan(compared, 100, summary)
        XCTAssertGreaterThan(watchers[1].resumes + watchers[2].resumes, 0, summary)
    }

    /// One writer: a connection to its host (made again when the host goes away), and a random
    /// write each turn.
    private static func write(_ socket: String, name: String, seed: UInt64, ledger: Ledger, until stop: Flag) {
        var random = SplitMix64(seed: seed)
        var client: Client?
        var ephemeralSet = false
        /// Sends `line` and returns the answer; nil when the connection broke (it is dropped).
        func request(_ line: String) -> String? {
            if client == nil {
                client = try? Client(socket, timeout: 10)
                ephemeralSet = false
            }
            guard let connection = client, connection.send(line + "\n"), let answer = connection.readLine() else {
                client = nil
                return nil
            }
            return answer
        }
        while !stop.isSet {
            let choice = random.next() % 100
            switch choice {
            case 0..<30:
                let counter = counters[Int(random.next() % UInt64(counters.count))]
                let answer = request(#"{"op":"incr","key":"\#(counter)"}"#)
                ledger.counted(counter, acknowledged: answer.map { json($0)["ok"] as? Bool == true } ?? false)
                ledger.answered(answer)
                if answer == nil { usleep(50_000) }
            case 30..<48:
                ledger.answered(request(#"{"op":"set","key":"k.\#(random.next() % 20)","value":\#(random.next() % 1000)}"#))
            case 48..<54:
                ledger.answered(request(#"{"op":"delete","key":"k.\#(random.next() % 20)"}"#))
            case 54..<62:
                let ops = (0..<3).map { _ in
                    random.next() % 3 == 0 ? #"{"op":"delete","key":"k.\#(random.next() % 20)"}"#
                        : #"{"op":"set","key":"k.\#(random.next() % 20)","value":\#(random.next() % 1000)}"#
                }
                ledger.answered(request(#"{"op":"batch","ops":[\#(ops.joined(separator: ","))]}"#))
            case 62..<69:
                guard let read = request(#"{"op":"get","key":"cas"}"#), let rev = json(read)["rev"] as? Int,
                      let value = json(read)["value"] as? Int else { continue }
                ledger.answered(request(#"{"op":"set","key":"cas","value":\#(value + 1),"if_rev":\#(rev)}"#), allowing: ["conflict"])
            case 69..<77:
                ledger.answered(request(#"{"op":"set","key":"src","value":\#(random.next() % 1000)}"#))
            case 77..<83:
                guard !ephemeralSet else { continue }
                let answer = request(#"{"op":"set","key":"e.\#(name)","value":"\#(random.next())","ephemeral":true}"#)
                ledger.answered(answer)
                ephemeralSet = answer.map { json($0)["ok"] as? Bool == true } ?? false
            case 83..<88:
                // Expires once, on whichever host's timer comes first.
                let ttl = 100 + random.next() % 400
                ledger.answered(request(#"{"op":"set","key":"t.\#(random.next() % 5)","value":1,"ttl_ms":\#(ttl)}"#))
            case 88..<91:
                // A binding made and removed while other writers set its source: the writes its
                // hosts had not applied it for are repaired (`bindingsUnseen`).
                ledger.answered(request(random.next() % 2 == 0 ? #"{"op":"bind","from":"src2","to":"dst2"}"#
                                            : #"{"op":"unbind","to":"dst2"}"#), allowing: ["not_found"])
            case 91..<95:
                ledger.answered(request(#"{"op":"set","key":"src2","value":\#(random.next() % 1000)}"#))
            case 95..<97:
                ledger.answered(request(random.next() % 2 == 0 ? #"{"op":"define","key":"twice","expr":"($k.1 ?? 0) * 2","replace":true}"#
                                            : #"{"op":"delete","key":"twice"}"#), allowing: ["not_found"])
            default:
                // The connection closes: its ephemeral key goes.
                client = nil
            }
        }
    }
}

/// A flag set once, read by many threads.
private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
