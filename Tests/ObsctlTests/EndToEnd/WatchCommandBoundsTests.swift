import Foundation
import Glibc
import TestSupport
import XCTest

/// `watch -- COMMAND` with a command slower than the events: obsctl holds a bounded queue of them,
/// then stops reading; the daemon overflows the watch and resyncs it, and the command still ends on
/// the latest value.
final class WatchCommandBoundsTests: XCTestCase {
    func test_slowCommand_boundsObsctlsMemory_andEndsOnTheLatestValue() throws {
        // A long client_timeout: the daemon must not give up on obsctl while the command blocks,
        // however slow the machine.
        let slow = try SlowCommand(config: "client_timeout = 1h\n", watchOptions: [])
        let pid = slow.watch.process.processIdentifier
        let before = processStatusKiB(pid, "VmRSS:")
        // 188 MiB of events. An obsctl that read them all would hold whatever of it the daemon did
        // not drop for being faster than obsctl's reading.
        let lastRev = slow.flood(changes: 2000)
        // Back-pressure: obsctl stopped reading, so the daemon dropped the watch's events.
        waitFor("the daemon to overflow obsctl's watch") { slow.daemon.stat("overflows") >= 1 }
        let held = processStatusKiB(pid, "VmHWM:")

        let runs = slow.openGateAndWaitFor(rev: lastRev)
        let peak = processStatusKiB(pid, "VmHWM:")
        kill(pid, SIGTERM)
        XCTAssertEqual(slow.watch.finish().stderr, "", "obsctl kept its connection")

        // obsctl's queue is 4 MiB of events (about 8 MiB as it holds them; 9 MiB more than at the
        // start, measured). Without the bound it read what the daemon sent, dropping only what
        // obsctl was too slow to take, and grew by 75 to 110 MiB.
        XCTAssertLessThan(held - before, 32 << 10, "VmRSS \(before) KiB at the start, VmHWM \(held) KiB while the command blocked")
        XCTAssertLessThan(peak - before, 32 << 10, "VmRSS \(before) KiB at the start, VmHWM \(peak) KiB at the end")
        SlowCommand.assertNothingLostSilently(runs)
        XCTAssertTrue(runs.contains { $0.kind == "initial" && $0.rev != 1 }, "the overflow was followed by a snapshot")
        XCTAssertLessThan(runs.count, 2000, "the command did not get every change: the daemon dropped some")
    }

    /// A run that blocks longer than the daemon's client_timeout while its output to obsctl is over
    /// the limit gets the connection closed (docs/cli.md); `--reconnect` resumes from what obsctl
    /// had read.
    func test_slowCommand_pastTheClientTimeout_resumesWithReconnect() throws {
        let slow = try SlowCommand(config: "client_timeout = 1s\n", watchOptions: ["--reconnect"])
        let lastRev = slow.flood(changes: 400)
        waitFor("the daemon to disconnect obsctl") { slow.daemon.log.contains("over the output limit; disconnecting") }
        let runs = slow.openGateAndWaitFor(rev: lastRev)
        kill(slow.watch.process.processIdentifier, SIGTERM)
        XCTAssertEqual(slow.watch.finish().stderr, "")
        SlowCommand.assertNothingLostSilently(runs)
    }

    /// SIGTERM (from `timeout`, a supervisor that signals obsctl alone) ends obsctl with 143 and
    /// the COMMAND it is running too, which would otherwise run on with nobody waiting for it.
    func test_sigterm_endsTheRunningCommandToo() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "k", "1"])
        let pidFile = daemon.root + "/command.pid"
        let watch = try Obsctl(daemon, ["watch", "k", "--", "sh", "-c", "echo $$ > '\(pidFile)'; exec sleep 1000 > /dev/null 2>&1"])
        XCTAssertTrue(waitFor("the command to run") {
            ((try? String(contentsOfFile: pidFile, encoding: .utf8)) ?? "").hasSuffix("\n")
        })
        let pid = try XCTUnwrap(pid_t((try String(contentsOfFile: pidFile, encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines)))
        kill(watch.process.processIdentifier, SIGTERM)
        // Ended: gone, or a zombie that nobody reaped yet (its state in /proc is Z).
        func ended() -> Bool {
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return true }
            return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
        }
        XCTAssertTrue(waitFor("the command to end", ended), "the command outlived obsctl")
        // Before finish: a command left running holds a descriptor Foundation waits on.
        kill(pid, SIGKILL)
        XCTAssertEqual(watch.finish().status, 128 + SIGTERM)
    }
}

/// A watch of one key whose COMMAND blocks on its first run (the snapshot item) until the test
/// opens a gate, and then logs each run's event kind and revision.
private final class SlowCommand {
    let daemon: Daemon
    let watch: Obsctl
    let log: String, gate: String

    init(config: String, watchOptions: [String]) throws {
        daemon = try Daemon(config: config)
        log = daemon.root + "/runs"
        gate = daemon.root + "/gate"
        let started = daemon.root + "/started"
        let script = """
            case "$OBS_EVENT" in '{"event":"initial"'*) kind=initial ;; *) kind=change ;; esac
            echo "$kind $OBS_REV" >> \(log)
            [ -e \(started) ] && exit 0
            : > \(started)
            while [ ! -e \(gate) ]; do sleep 0.01; done
            """
        try obsctl(daemon, ["set", "big", "0"])
        watch = try Obsctl(daemon, ["watch", "big"] + watchOptions + ["--", "sh", "-c", script])
        waitFor("the first run") { FileManager.default.fileExists(atPath: started) }
    }

    /// Sets the key `changes` times, to values of 48 KiB (small enough for the OBS_* variables):
    /// events of about 96 KiB, old and new value. Returns the last revision.
    func flood(changes: Int) -> Int {
        guard let client = try? Client(daemon.socket, timeout: 120) else {
            XCTFail("cannot connect")
            return 0
        }
        let padding = String(repeating: "x", count: 48 << 10)
        var lastRev = 0
        for first in stride(from: 0, to: changes, by: 50) {
            let requests = (first..<min(first + 50, changes)).map { #"{"op":"set","key":"big","value":"\#($0) \#(padding)"}"# }
            XCTAssertTrue(client.send(requests.joined(separator: "\n") + "\n"))
            for _ in requests {
                let answer = json(client.readLine())
                XCTAssertEqual(answer["ok"] as? Bool, true)
                lastRev = answer["rev"] as? Int ?? lastRev
            }
        }
        return lastRev
    }

    /// Lets the command go on, and returns its runs once one has seen revision `rev`.
    func openGateAndWaitFor(rev: Int) -> [(kind: String, rev: Int)] {
        _ = FileManager.default.createFile(atPath: gate, contents: nil)
        waitFor("the command to see the latest value", timeout: 120) {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").hasSuffix(" \(rev)\n")
        }
        let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
        return lines.map { line in
            let fields = line.split(separator: " ")
            return (String(fields[0]), Int(fields[1]) ?? -1)
        }
    }

    /// Each run saw the change right after the one before, or a snapshot item (after an overflow
    /// or a reconnection), which is the key's latest value at that time.
    static func assertNothingLostSilently(_ runs: [(kind: String, rev: Int)], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(runs.first.map { $0 == ("initial", 1) } ?? false, "\(runs.prefix(1))", file: file, line: line)
        for (previous, run) in zip(runs, runs.dropFirst()) where run.kind == "change" {
            XCTAssertEqual(run.rev, previous.rev + 1, "a change was skipped after \(previous)", file: file, line: line)
        }
    }
}
