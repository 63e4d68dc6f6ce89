import Foundation
import Glibc
import ObsClient
import ObsCore
@testable import ObsctlCore
import XCTest

/// `--reconnect` across a connection cut in the middle of a transaction's events: the watch asks
/// for that revision again and drops what it already delivered. The daemon here is a scripted
/// one, so the cut falls exactly between two events of one transaction.
final class WatchResumeTests: XCTestCase {
    /// A scripted daemon on a socket in a new directory of its own (the caller removes it).
    private func scriptedDaemon(_ name: String) throws -> (directory: URL, path: String, server: ScriptedServer) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("obs-\(name)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("s.sock").path
        return (directory, path, try ScriptedServer(path: path))
    }

    func test_reconnect_afterACutInsideATransaction_losesAndRepeatsNothing() throws {
        let (directory, path, server) = try scriptedDaemon("resume")
        defer { try? FileManager.default.removeItem(at: directory) }
        let requests = Log<String>()
        let serving = Thread {
            // First connection: a snapshot, then revision 5 cut after its first event, no goodbye.
            server.serve { request in
                requests.append(request)
                return [#"{"id":null,"ok":true,"watch":1}"#,
                        #"{"event":"initial","watch":1,"key":"a","kind":"value","value":1,"rev":4}"#,
                        #"{"event":"synced","watch":1,"rev":4}"#,
                        #"{"event":"change","watch":1,"key":"a","old":1,"new":2,"rev":5,"created":false}"#]
            }
            // Second: the replay of revision 5 (both keys), then revision 6.
            server.serve(keepOpen: true, hello: Hello(rev: 6)) { request in
                requests.append(request)
                return [#"{"id":null,"ok":true,"watch":1}"#,
                        #"{"event":"change","watch":1,"key":"a","old":1,"new":2,"rev":5,"created":false}"#,
                        #"{"event":"change","watch":1,"key":"b","old":1,"new":3,"rev":5,"created":false}"#,
                        #"{"event":"synced","watch":1,"rev":5}"#,
                        #"{"event":"change","watch":1,"key":"c","new":9,"rev":6,"created":true}"#]
            }
        }
        serving.start()

        var options = WatchOptions(keys: ["**"])
        options.reconnect = true
        let stream = try WatchStream(path: path, options: options, deadline: monotonicNow() + 30)
        var changes: [String] = []
        while changes.count < 3, let event = try stream.next(deadline: monotonicNow() + 30) {
            if event.kind == "change" { changes.append("\(event["key"]!.stringValue!)@\(event["rev"]!)") }
        }
        stream.cancel()
        server.stop()

        XCTAssertEqual(changes, ["a@5", "b@5", "c@6"])
        XCTAssertEqual(requests.entries.count, 2)
        XCTAssertFalse(requests.entries[0].contains("since"))
        XCTAssertTrue(requests.entries[1].contains(#""since":4"#), requests.entries[1])
    }

    /// `watch -n`'s count across a connection cut in the middle of an overflow's resync: the keys
    /// the cut snapshot did not reach are not deletes. Here `b` is still there (the second
    /// connection replays nothing for it), so only `a`'s change counts.
    func test_reconnect_duringAResync_countsNoKeyItDidNotListAsDeleted() throws {
        let (directory, path, server) = try scriptedDaemon("resync")
        defer { try? FileManager.default.removeItem(at: directory) }
        let serving = Thread {
            // First connection: a snapshot, a change, an overflow and a resync cut after `a`.
            server.serve { _ in
                [#"{"id":null,"ok":true,"watch":1}"#,
                 #"{"event":"initial","watch":1,"key":"a","kind":"value","value":1,"rev":3}"#,
                 #"{"event":"initial","watch":1,"key":"b","kind":"value","value":1,"rev":4}"#,
                 #"{"event":"synced","watch":1,"rev":4}"#,
                 #"{"event":"change","watch":1,"key":"a","old":1,"new":2,"rev":5,"created":false}"#,
                 #"{"event":"overflow","watch":1,"from_rev":6,"to_rev":6}"#,
                 #"{"event":"initial","watch":1,"key":"a","kind":"value","value":2,"rev":5}"#]
            }
            // Second: revision 6 changed nothing watched; then a change of `a`.
            server.serve(keepOpen: true, hello: Hello(rev: 7)) { _ in
                [#"{"id":null,"ok":true,"watch":1}"#,
                 #"{"event":"synced","watch":1,"rev":6}"#,
                 #"{"event":"change","watch":1,"key":"a","old":2,"new":3,"rev":7,"created":false}"#]
            }
        }
        serving.start()

        var options = WatchOptions(keys: ["**"])
        options.reconnect = true
        let stream = try WatchStream(path: path, options: options, deadline: monotonicNow() + 30)
        var count = WatchCount()
        var counted: [String] = []
        var reconnections: [String] = []
        while counted.last != "change a@7", let event = try stream.next(deadline: monotonicNow() + 30) {
            let name = "\(event.kind)\(event["key"].map { " \($0.stringValue ?? "")" } ?? "")@\(event["rev"]?.intValue.map(String.init) ?? "")"
            if event.followsReconnection { reconnections.append(name) }
            if count.count(event) > 0 { counted.append(name) }
        }
        stream.cancel()
        server.stop()

        XCTAssertEqual(reconnections, ["synced@6"], "the first event of the second connection")
        XCTAssertEqual(counted, ["change a@5", "change a@7"], "b, not listed by the cut resync, was not counted as deleted")
    }
}

extension WatchResumeTests {
    /// A reset whose snapshot is cut short: the stream makes one `reset`, starts the snapshot again
    /// on the next connection (the same daemon: no second reset), and once it completes deletes the
    /// keys delivered before the reset (and in the cut snapshot) that it did not list. `-n` counts
    /// the new key of the snapshot and each delete once. The watch asked for no snapshot; after a
    /// reset the stream asks for one all the same, and never for `since`.
    func test_reset_whoseSnapshotIsCut_startsItAgain_andDeletesTheKeysGoneOnce() throws {
        let (directory, path, server) = try scriptedDaemon("reset")
        defer { try? FileManager.default.removeItem(at: directory) }
        let requests = Log<String>()
        let serving = Thread {
            // The first daemon: a, b and a change of c, then a crash.
            server.serve(hello: Hello(rev: 4, pid: 1000, durability: "memory")) { request in
                requests.append(request)
                return [#"{"id":null,"ok":true,"watch":1}"#,
                        #"{"event":"change","watch":1,"key":"a","new":1,"rev":2,"created":true}"#,
                        #"{"event":"change","watch":1,"key":"b","new":1,"rev":3,"created":true}"#,
                        #"{"event":"change","watch":1,"key":"c","new":1,"rev":4,"created":true}"#]
            }
            // Another process with its state in memory, past revision 4: its snapshot is cut.
            server.serve(hello: Hello(rev: 9, pid: 2000, durability: "memory")) { request in
                requests.append(request)
                return [#"{"id":null,"ok":true,"watch":1}"#,
                        #"{"event":"initial","watch":1,"key":"a","kind":"value","value":1,"rev":1}"#]
            }
            // The same process again: the whole snapshot, then a change.
            server.serve(keepOpen: true, hello: Hello(rev: 9, pid: 2000, durability: "memory")) { request in
                requests.append(request)
                return [#"{"id":null,"ok":true,"watch":1}"#,
                        #"{"event":"initial","watch":1,"key":"a","kind":"value","value":1,"rev":1}"#,
                        #"{"event":"initial","watch":1,"key":"d","kind":"value","value":5,"rev":9}"#,
                        #"{"event":"synced","watch":1,"rev":9}"#,
                        #"{"event":"change","watch":1,"key":"d","old":5,"new":6,"rev":10,"created":false}"#]
            }
        }
        serving.start()

        var options = WatchOptions(keys: ["**"])
        options.reconnect = true
        options.initial = false
        let stream = try WatchStream(path: path, options: options, deadline: monotonicNow() + 30)
        var count = WatchCount()
        var lines: [String] = []
        var counted: [String] = []
        while lines.last?.contains(#""rev":10"#) != true, let event = try stream.next(deadline: monotonicNow() + 30) {
            lines.append((event.followsReconnection ? "* " : "") + event.line)
            if count.count(event) > 0 { counted.append("\(event.kind) \(event["key"]?.stringValue ?? "")") }
        }
        stream.cancel()
        server.stop()

        XCTAssertEqual(lines, [
            #"{"event":"change","key":"a","new":1,"rev":2,"created":true}"#,
            #"{"event":"change","key":"b","new":1,"rev":3,"created":true}"#,
            #"{"event":"change","key":"c","new":1,"rev":4,"created":true}"#,
            #"* {"event":"reset","rev":9,"reason":"obsd restarted with its state in memory"}"#,
            #"{"event":"initial","key":"a","kind":"value","value":1,"rev":1}"#,
            #"* {"event":"initial","key":"a","kind":"value","value":1,"rev":1}"#,
            #"{"event":"initial","key":"d","kind":"value","value":5,"rev":9}"#,
            #"{"event":"synced","rev":9}"#,
            #"{"event":"delete","key":"b","rev":9,"reason":"reset"}"#,
            #"{"event":"delete","key":"c","rev":9,"reason":"reset"}"#,
            #"{"event":"change","key":"d","old":5,"new":6,"rev":10,"created":false}"#,
        ])
        XCTAssertEqual(counted, ["change a", "change b", "change c", "initial d", "delete b", "delete c", "change d"])
        XCTAssertEqual(requests.entries.count, 3)
        XCTAssertTrue(requests.entries[0].contains(#""initial":false"#), requests.entries[0])
        for request in requests.entries.dropFirst() {
            XCTAssertFalse(request.contains("since"), request)
            XCTAssertFalse(request.contains("initial"), request)
        }
    }

    /// The rule itself: nothing followed, nothing to reset; a revision gone back; another process
    /// of a daemon in memory; a durable daemon's new process (or a pid unknown) resumes.
    func test_reconnectionRule() {
        func reason(rev: UInt64, pid: Int64?, last: UInt64?, lastPid: Int64?, durability: String, cluster: Bool = false) -> String? {
            Reconnection.resetReason(rev: rev, pid: pid, lastRevision: last, lastPid: lastPid) {
                Reconnection.Kept(durability: durability, cluster: cluster)
            }
        }
        XCTAssertNil(reason(rev: 0, pid: 2, last: nil, lastPid: 1, durability: "memory"))
        XCTAssertEqual(reason(rev: 3, pid: 1, last: 7, lastPid: 1, durability: "normal"), "obsd's revision went back from 7 to 3")
        XCTAssertEqual(reason(rev: 9, pid: 2, last: 7, lastPid: 1, durability: "memory"), "obsd restarted with its state in memory")
        XCTAssertNil(reason(rev: 7, pid: 2, last: 7, lastPid: 1, durability: "normal"))
        XCTAssertNil(reason(rev: 9, pid: 1, last: 7, lastPid: 1, durability: "memory"))
        XCTAssertNil(reason(rev: 9, pid: nil, last: 7, lastPid: 1, durability: "memory"))
        // A host of a cluster behind the revision seen (restarted, catching up) holds the
        // cluster's state: the watch resumes there.
        XCTAssertNil(reason(rev: 3, pid: 2, last: 7, lastPid: 1, durability: "normal", cluster: true))
        XCTAssertNil(reason(rev: 3, pid: 1, last: 7, lastPid: 1, durability: "normal", cluster: true))
        // A daemon that does not answer `stats` is behind all the same.
        XCTAssertEqual(Reconnection.resetReason(rev: 3, pid: 1, lastRevision: 7, lastPid: 1) { nil },
                       "obsd's revision went back from 7 to 3")
    }
}

/// What a scripted daemon answers to `hello` and `stats` (a `reconnect` stream asks before it watches).
private struct Hello {
    var rev = 0
    var pid = 1000
    var durability = "normal"
}

/// A Unix-socket server that answers `hello` and `stats` as `Hello` says, and then each
/// connection's first other line with a scripted list of lines.
private final class ScriptedServer: @unchecked Sendable {
    private let listener: Int32
    /// Connections kept open: added by the serving thread, closed by `stop` on the test's.
    private let lock = NSLock()
    private var open: [Int32] = []

    init(path: String) throws {
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: Array(path.utf8) + [0])
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(listener, 4) == 0 else { throw POSIXError(.EADDRINUSE) }
    }

    /// Accepts one connection, answers its `hello` and `stats`, reads its first other line, writes
    /// the script's lines; closes it unless `keepOpen`.
    func serve(keepOpen: Bool = false, hello: Hello = Hello(), _ script: (String) -> [String]) {
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return }
        func send(_ lines: [String]) {
            let reply = lines.map { $0 + "\n" }.joined()
            _ = reply.utf8CString.withUnsafeBufferPointer { write(connection, $0.baseAddress, $0.count - 1) }
        }
        while true {
            var request: [UInt8] = []
            var byte: UInt8 = 0
            while read(connection, &byte, 1) == 1, byte != UInt8(ascii: "\n") { request.append(byte) }
            let line = String(decoding: request, as: UTF8.self)
            if line.contains(#""op":"hello""#) {
                send([#"{"id":null,"ok":true,"server":"obsd","rev":\#(hello.rev),"pid":\#(hello.pid)}"#])
            } else if line.contains(#""op":"stats""#) {
                send([#"{"id":null,"ok":true,"durability":"\#(hello.durability)"}"#])
            } else {
                send(script(line))
                break
            }
        }
        if keepOpen { lock.withLock { open.append(connection) } } else { close(connection) }
    }

    func stop() {
        lock.withLock { open.forEach { close($0) } }
        close(listener)
    }
}

private final class Log<Element: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [Element] = []
    func append(_ element: Element) { lock.lock(); storage.append(element); lock.unlock() }
    var entries: [Element] { lock.lock(); defer { lock.unlock() }; return storage }
}
