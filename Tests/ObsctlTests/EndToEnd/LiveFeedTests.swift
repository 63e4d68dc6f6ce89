import Foundation
import Glibc
import ObsClient
import ObsCore
@testable import ObsWeb
import TestSupport
import XCTest

/// The page's event stream against a real obsd, read as the HTTP server reads it: what it sends
/// when the daemon goes away and comes back.
final class LiveFeedTests: XCTestCase {
    func test_resumesBySinceAfterAGoodbye_andFromOneBeforeAfterACrash() throws {
        let daemon = try Daemon(persistent: true)
        try obsctl(daemon, ["apply", "-"], stdin: "set a 1\nset b 1\n")
        let stream = FeedReader(daemon.socket)
        XCTAssertEqual(stream.next(), #"{"event":"connected","pid":\#(daemon.process!.processIdentifier),"rev":1,"version":"0.1.0"}"#)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"a","kind":"value","value":1,"rev":1}"#)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"b","kind":"value","value":1,"rev":1}"#)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":1}"#)
        try obsctl(daemon, ["set", "a", "2"])
        XCTAssertEqual(stream.next(), #"{"event":"change","key":"a","old":1,"new":2,"rev":2,"created":false}"#)

        // A restart: the daemon says goodbye; a change is made before any client is back (its
        // definitions file); the feed resumes after revision 2 and gets only that change.
        let definitions = daemon.write("set a 3\n", to: "definitions.obs")
        daemon.extraArguments = ["--config", daemon.write("definitions = \(definitions)\n", to: "obsd.conf")]
        daemon.stop()
        XCTAssertEqual(stream.next(), #"{"event":"disconnected","reason":"lost the connection to \#(daemon.socket) (shutdown): is obsd running?"}"#)
        try daemon.start()
        XCTAssertEqual(stream.next(), #"{"event":"connected","pid":\#(daemon.process!.processIdentifier),"rev":3,"since":2,"version":"0.1.0"}"#)
        XCTAssertEqual(stream.next(), #"{"event":"change","key":"a","old":2,"new":3,"rev":3,"created":false}"#)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":3}"#)

        // A crash: the last revision may have been cut, so the feed asks from one before it. The
        // restart takes revision 4 for the ephemeral keys the crashed run may have had, and its
        // history begins there, so the answer is a snapshot.
        daemon.stop(signal: SIGKILL)
        XCTAssertEqual(stream.next(), #"{"event":"disconnected","reason":"lost the connection to \#(daemon.socket): is obsd running?"}"#)
        try daemon.start()
        XCTAssertEqual(stream.next(), #"{"event":"connected","pid":\#(daemon.process!.processIdentifier),"rev":4,"since":2,"version":"0.1.0"}"#)
        XCTAssertEqual(stream.next(), #"{"event":"compacted","compact_rev":4}"#)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"a","kind":"value","value":3,"rev":3}"#)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"b","kind":"value","value":1,"rev":1}"#)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":4}"#)

        stream.feed.cancel()
        XCTAssertTrue(stream.ended(), "a cancelled feed ends its body")
    }

    /// The state put back from a backup and written past the revision the page saw before the
    /// feed is back: not behind it, so no reset, but its revisions up to there are other changes.
    /// The feed names the run it saw its revision in, which this state does not continue: the
    /// daemon answers `compacted` and a snapshot (a replay of revision 5 alone would leave `gone`
    /// shown, and `kept`'s value would only be right by chance).
    func test_aStateRestoredFromABackup_andWrittenPastTheRevisionSeen_givesASnapshot() throws {
        let daemon = try Daemon(persistent: true)
        try daemon.writtenPastABackup()
        let stream = FeedReader(daemon.socket)
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"connected""#), true)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"gone","kind":"value","value":1,"rev":2}"#)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"kept","kind":"value","value":2,"rev":4}"#)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":4}"#)
        daemon.stop()
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"disconnected""#), true)

        // The feed reconnects only when read again: the backup is back and written past 4 first.
        try daemon.restoreTheBackupAndWritePastIt()
        XCTAssertEqual(stream.next(), #"{"event":"connected","pid":\#(daemon.process!.processIdentifier),"rev":5,"since":4,"version":"0.1.0"}"#)
        XCTAssertEqual(stream.next(), #"{"event":"compacted","compact_rev":1}"#)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"kept","kind":"value","value":"d","rev":5}"#)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":5}"#)
        try obsctl(daemon, ["set", "kept", "\"e\""])
        XCTAssertEqual(stream.next(), #"{"event":"change","key":"kept","old":"d","new":"e","rev":6,"created":false}"#)
    }

    func test_aDaemonBehindTheRevisionSeen_isAnotherState_andGivesASnapshot() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["apply", "-"], stdin: "set a 1\nset b 1\n")
        try obsctl(daemon, ["set", "a", "2"])
        let stream = FeedReader(daemon.socket)
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"connected""#), true)
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"initial","key":"a""#), true)
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"initial","key":"b""#), true)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":2}"#)
        daemon.stop()
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"disconnected""#), true)
        try daemon.start()
        XCTAssertEqual(stream.next(), #"{"event":"connected","pid":\#(daemon.process!.processIdentifier),"reset":true,"rev":0,"version":"0.1.0"}"#)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":0}"#)
        try obsctl(daemon, ["set", "c", "1"])
        XCTAssertEqual(stream.next(), #"{"event":"change","key":"c","new":1,"rev":1,"created":true}"#)
    }

    /// A daemon restarted with `--memory` whose revision is not behind the one seen (its
    /// definitions file, or other clients, wrote as much before the feed was back) still holds
    /// another state: the page gets it afresh, not a replay that leaves the old keys shown as live.
    func test_aMemoryDaemonRestartedAtTheRevisionSeen_isAnotherState_andGivesASnapshot() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "a", "1"])
        let stream = FeedReader(daemon.socket)
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"connected""#), true)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"a","kind":"value","value":1,"rev":1}"#)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":1}"#)
        let definitions = daemon.write("set b 2\n", to: "definitions.obs")
        daemon.extraArguments = ["--config", daemon.write("definitions = \(definitions)\n", to: "obsd.conf")]
        daemon.stop()
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"disconnected""#), true)
        try daemon.start()
        XCTAssertEqual(stream.next(), #"{"event":"connected","pid":\#(daemon.process!.processIdentifier),"reset":true,"rev":1,"version":"0.1.0"}"#)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"b","kind":"value","value":2,"rev":1}"#)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":1}"#)
    }

    /// A daemon that stops answering (Ctrl-Z in its terminal, or stuck) keeps its socket open:
    /// without `progress` on the watch the page would stay "live" with values frozen.
    func test_aDaemonThatStopsAnswering_isADrop_andTheFeedResumesOnceItAnswers() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "a", "1"])
        let stream = FeedReader(daemon.socket, daemonSilenceSeconds: 1)
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"connected""#), true)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"a","kind":"value","value":1,"rev":1}"#)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":1}"#)
        let pid = daemon.process!.processIdentifier
        kill(pid, SIGSTOP)
        XCTAssertEqual(stream.next(), #"{"event":"disconnected","reason":"obsd has not answered for 1 s: is it stopped or stuck?"}"#)
        kill(pid, SIGCONT)
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"connected","pid":\#(pid),"rev":1,"since":0"#), true)
        try obsctl(daemon, ["set", "a", "2"])
        var last: String?
        repeat { last = stream.next() } while last != nil && last?.contains(#""new":2"#) == false
        XCTAssertEqual(last, #"{"event":"change","key":"a","old":1,"new":2,"rev":2,"created":false}"#)
    }

    func test_aPatternTheDaemonRefuses_endsTheStreamWithItsError() throws {
        let daemon = try Daemon()
        let stream = FeedReader(daemon.socket, pattern: "a..b")
        XCTAssertTrue(stream.next()?.hasPrefix(#"{"error":{"code":"bad_key","message":"#) ?? false)
        XCTAssertTrue(stream.ended())
    }

    /// A daemon at `max_connections` answers `limit` (and one that is stopping, `shutting_down`):
    /// the page is told the connection is down and the feed retries, instead of ending the stream
    /// as for a pattern the daemon refuses (the page would then stay dead).
    func test_aDaemonAtItsConnectionLimit_isADrop_andTheFeedConnectsOnceASlotIsFree() throws {
        let daemon = try Daemon(config: "max_connections = 1\n")
        try obsctl(daemon, ["set", "a", "1"])
        var holder = try daemon.holdAConnection()
        XCTAssertNotNil(holder)
        let stream = FeedReader(daemon.socket)
        let first = stream.next()
        XCTAssertEqual(first?.hasPrefix(#"{"event":"disconnected","reason":"limit: "#), true, first ?? "nothing")
        holder = nil
        XCTAssertEqual(stream.next(), #"{"event":"connected","pid":\#(daemon.process!.processIdentifier),"rev":1,"version":"0.1.0"}"#)
        XCTAssertEqual(stream.next(), #"{"event":"initial","key":"a","kind":"value","value":1,"rev":1}"#)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":1}"#)
    }

    func test_aBurstOfEvents_arrivesInFewMessages() throws {
        let daemon = try Daemon()
        let stream = FeedReader(daemon.socket)
        XCTAssertEqual(stream.next()?.hasPrefix(#"{"event":"connected""#), true)
        XCTAssertEqual(stream.next(), #"{"event":"synced","rev":0}"#)
        let batch = (1...500).map { "set k\($0) \($0)" }.joined(separator: "\n")
        try obsctl(daemon, ["apply", "-"], stdin: batch + "\n")
        let keys = (1...500).compactMap { _ in stream.next() }.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["key"] as? String
        }
        XCTAssertEqual(Set(keys), Set((1...500).map { "k\($0)" }))
        XCTAssertLessThan(stream.messages, 20, "500 events of one transaction should come in a few messages")
    }
}

/// Reads a LiveFeed as libmicrohttpd does (a buffer at a time) and splits its Server-Sent Events.
final class FeedReader {
    let feed: LiveFeed
    private var bytes: [UInt8] = []
    private var events: [String] = []
    private(set) var messages = 0

    init(_ socket: String, pattern: String = "**", daemonSilenceSeconds: Double = 30) {
        var limits = WebLimits()
        limits.keepAliveSeconds = 0.2
        limits.daemonSilenceSeconds = daemonSilenceSeconds
        feed = LiveFeed(path: socket, pattern: pattern, limits: limits, registry: DaemonCalls())
    }

    /// The next event (one line of the daemon's, or the feed's own), waiting at most `timeout`.
    func next(timeout: Double = 30) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while events.isEmpty, Date() < deadline {
            guard read() else { return nil }
        }
        return events.isEmpty ? nil : events.removeFirst()
    }

    /// Whether the body ends (within 30 s) with no more events.
    func ended() -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            guard read() else { return events.isEmpty }
        }
        return false
    }

    /// One call of `read`; false at the end of the body.
    private func read() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 1024)
        guard let count = buffer.withUnsafeMutableBytes({ feed.read(into: $0) }) else { return false }
        bytes += buffer[..<count]
        // Messages end with an empty line; the bytes are split there, never inside a character.
        while let end = bytes.indices.dropLast().first(where: { bytes[$0] == 0x0A && bytes[$0 + 1] == 0x0A }) {
            let message = String(decoding: bytes[..<end], as: UTF8.self)
            bytes.removeSubrange(...(end + 1))
            let lines = message.split(separator: "\n").filter { $0.hasPrefix("data: ") }.map { String($0.dropFirst(6)) }
            if lines.isEmpty { continue }
            messages += 1
            events += lines
        }
        return true
    }
}
