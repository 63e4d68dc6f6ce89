import Foundation
import ObsClient
import ObsCore
import TestSupport
import XCTest

/// `obsctl watch` and every option, against a real obsd.
final class WatchTests: XCTestCase {
    func test_defaultOutput_isTheDaemonsEventMinusWatch() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "a", "1"])
        let watch = try Obsctl(daemon, ["watch", "a", "ch"])
        XCTAssertEqual(watch.readLines(2), ["{\"event\":\"initial\",\"key\":\"a\",\"kind\":\"value\",\"value\":1,\"rev\":1}",
                                            "{\"event\":\"synced\",\"rev\":1}"])
        try obsctl(daemon, ["set", "a", "two"])
        try obsctl(daemon, ["publish", "ch", "[1]"])
        try obsctl(daemon, ["del", "a"])
        XCTAssertEqual(watch.readLines(3), ["{\"event\":\"change\",\"key\":\"a\",\"old\":1,\"new\":\"two\",\"rev\":2,\"created\":false}",
                                            "{\"event\":\"publish\",\"channel\":\"ch\",\"payload\":[1]}",
                                            "{\"event\":\"delete\",\"key\":\"a\",\"old\":\"two\",\"rev\":3}"])
    }

    func test_values_newValueRaw_emptyLineForDelete() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "x", "start"])
        let watch = try Obsctl(daemon, ["watch", "x", "--values", "-n", "3"])
        XCTAssertEqual(watch.readLine(), "start")
        try obsctl(daemon, ["set", "x", "{\"a\":1}"])
        try obsctl(daemon, ["del", "x"])
        try obsctl(daemon, ["set", "x", "back"])
        XCTAssertEqual(watch.finish(), Result(status: 0, stdout: "{\"a\":1}\n\nback\n", stderr: ""))
    }

    /// Every placeholder, doubled braces, and braces that are no placeholder: printed as they
    /// are, one that reads as a placeholder (`{unknown}`, a typo most likely) with a warning once.
    func test_format_everyPlaceholder_andBraces() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "vol", "0.4"])
        let format = #"{event}|{key}|{new}|{old}|{rev}|{channel}|{payload}|{{literal}}|{unknown}|{"a":1}"#
        let watch = try Obsctl(daemon, ["watch", "vol", "bar.*", "--format", format, "-n", "3"])
        XCTAssertEqual(watch.readLine(), #"initial|vol|0.4||1|||{literal}|{unknown}|{"a":1}"#)
        try obsctl(daemon, ["set", "vol", "\"loud\""])
        try obsctl(daemon, ["publish", "bar.click", "{\"b\":1}"])
        try obsctl(daemon, ["del", "vol"])
        XCTAssertEqual(watch.finish(), Result(status: 0, stdout: #"""
            change|vol|loud|0.4|2|||{literal}|{unknown}|{"a":1}
            publish|||||bar.click|{"b":1}|{literal}|{unknown}|{"a":1}
            delete|vol||loud|3|||{literal}|{unknown}|{"a":1}

            """#, stderr: """
            obsctl: warning: --format: {unknown} is no placeholder, so it is printed as it is (placeholders: {key} {new} \
            {old} {rev} {event} {channel} {payload} {time} {run}; {{ for a brace)

            """))
    }

    func test_time_placeholder_isISO8601() throws {
        let daemon = try Daemon()
        let watch = try Obsctl(daemon, ["watch", "ch", "--format", "{time}", "-n", "1"])
        daemon.waitForWatches(1)
        try obsctl(daemon, ["publish", "ch"])
        let line = watch.readLine() ?? ""
        XCTAssertNotNil(ISO8601DateFormatter().date(from: line.replacingOccurrences(of: #"\.\d+"#, with: "", options: .regularExpression)), line)
    }

    func test_initialOnly_printsTheSnapshotAndExits0() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "s.a", "1"])
        try obsctl(daemon, ["set", "s.b", "\"two\""])
        XCTAssertEqual(try obsctl(daemon, ["watch", "s.*", "--initial-only", "--values"]),
                       Result(status: 0, stdout: "1\ntwo\n", stderr: ""))
        XCTAssertEqual(try obsctl(daemon, ["watch", "s.a", "--initial-only"]).stdout,
                       "{\"event\":\"initial\",\"key\":\"s.a\",\"kind\":\"value\",\"value\":1,\"rev\":1}\n")
    }

    func test_noInitial_and_since() throws {
        let daemon = try Daemon()
        for value in ["1", "2", "3"] { try obsctl(daemon, ["set", "k", value]) }
        XCTAssertEqual(try obsctl(daemon, ["watch", "k", "--no-initial", "--initial-only"]).stdout, "")
        XCTAssertEqual(try obsctl(daemon, ["watch", "k", "--since", "1", "--values", "-n", "2"]).stdout, "2\n3\n")
        XCTAssertEqual(try obsctl(daemon, ["watch", "k", "--since", "x"]).status, 64)
    }

    func test_timeout_exit3_whenNothingArrives_andBoundsTheWholeWaitWithN() throws {
        let daemon = try Daemon()
        XCTAssertEqual(try obsctl(daemon, ["watch", "k", "--no-initial", "--timeout", "200ms"]),
                       Result(status: 3, stdout: "{\"event\":\"synced\",\"rev\":0}\n", stderr: "obsctl: timed out\n"))
        let watch = try Obsctl(daemon, ["watch", "k", "--values", "-n", "5", "--timeout", "1s"])
        daemon.waitForWatches(1)
        try obsctl(daemon, ["set", "k", "1"])
        let result = watch.finish()
        XCTAssertEqual(result, Result(status: 3, stdout: "1\n", stderr: "obsctl: timed out\n"))
    }

    func test_latestThrottleDebounce_deliverTheFinalValue() throws {
        let daemon = try Daemon()
        for option in [["--latest"], ["--throttle", "50ms"], ["--debounce", "50ms"]] {
            try obsctl(daemon, ["set", "k", "0"])
            let watch = try Obsctl(daemon, ["watch", "k", "--no-initial", "--values"] + option)
            daemon.waitForWatches(1)
            for value in 1...5 { try obsctl(daemon, ["set", "k", "\(value)"]) }
            var last: String?
            waitFor("the final value with \(option)") {
                last = watch.readLine()
                return last == "5" || last == nil
            }
            XCTAssertEqual(last, "5")
            kill(watch.process.processIdentifier, SIGTERM)
            _ = watch.finish()
            daemon.waitForWatches(0)
        }
    }

    func test_pipelineIntoHead_endsCleanly() throws {
        let daemon = try Daemon()
        let pipeline = try Obsctl(daemon, [], shell: "\"$OBSCTL\" watch x --values | head -n 3; echo \"status ${PIPESTATUS[0]}\"")
        daemon.waitForWatches(1)
        var value = 0
        // head exits after three lines; obsctl notices at its next write and exits quietly.
        waitFor("obsctl to leave") {
            value += 1
            _ = try? obsctl(daemon, ["set", "x", "\(value)"])
            return (try? obsctl(daemon, ["stats", "--json"]).stdout.contains("\"watches\":0")) ?? false
        }
        let result = pipeline.finish()
        XCTAssertEqual(result.stdout, "1\n2\n3\nstatus 0\n")
        XCTAssertEqual(result.stderr, "")
    }

    func test_reconnect_acrossADaemonRestart_losesAndRepeatsNothing() throws {
        let daemon = try Daemon(persistent: true)
        try obsctl(daemon, ["set", "n", "0"])
        let watch = try Obsctl(daemon, ["watch", "n", "--reconnect", "--values"])
        XCTAssertEqual(watch.readLine(), "0")
        for value in 1...3 { try obsctl(daemon, ["set", "n", "\(value)"]) }
        XCTAssertEqual(watch.readLines(3), ["1", "2", "3"])
        daemon.stop()
        try daemon.start()
        for value in 4...6 { try obsctl(daemon, ["set", "n", "\(value)"]) }
        XCTAssertEqual(watch.readLines(3), ["4", "5", "6"])
        // A crash, not a goodbye: the connection just drops.
        daemon.stop(signal: SIGKILL)
        try daemon.start()
        try obsctl(daemon, ["set", "n", "7"])
        XCTAssertEqual(watch.readLine(), "7")
        kill(watch.process.processIdentifier, SIGTERM)
        XCTAssertEqual(watch.finish().stdout, "")
    }

    /// A daemon with `--memory` restarted holds another state, even once its revision is past the
    /// one the watch saw (here written while the watchers are stopped, so before any is back):
    /// `--reconnect` says `reset`, gives the new snapshot, and deletes the key that is gone. A
    /// status bar on that key (`--values`) prints an empty line instead of keeping the old value;
    /// `--format` prints the reset like any event; COMMAND gets the deletes, not the reset.
    func test_reconnect_toAMemoryDaemonRestarted_resetsAndDeletesTheKeysGone() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "r.gone", "1"])
        try obsctl(daemon, ["set", "r.kept", "\"old\""])
        let json = try Obsctl(daemon, ["watch", "r.*", "--reconnect"])
        let values = try Obsctl(daemon, ["watch", "r.gone", "--reconnect", "--values"])
        let format = try Obsctl(daemon, ["watch", "r.*", "--reconnect", "--format", "{event}:{key}={new}"])
        let command = try Obsctl(daemon, ["watch", "r.*", "--reconnect", "--", "cat"])
        // It printed no key, so it has none to delete; but it gets the new state's snapshot.
        let noInitial = try Obsctl(daemon, ["watch", "r.*", "--reconnect", "--no-initial", "--values"])
        XCTAssertEqual(json.readLines(3).last, #"{"event":"synced","rev":2}"#)
        XCTAssertEqual(values.readLine(), "1")
        XCTAssertEqual(format.readLines(2).count, 2)
        XCTAssertEqual(command.readLines(2).count, 2)
        daemon.waitForWatches(5)

        let pids = [json, values, format, command, noInitial].map(\.process.processIdentifier)
        for pid in pids { kill(pid, SIGSTOP) }
        daemon.stop()
        try daemon.start()
        try obsctl(daemon, ["set", "r.kept", "\"new\""])
        try obsctl(daemon, ["set", "r.fresh", "1"])
        try obsctl(daemon, ["set", "other", "1"])
        for pid in pids { kill(pid, SIGCONT) }

        let lines = json.readLines(5)
        XCTAssertEqual(lines.first, #"{"event":"reset","rev":3,"reason":"obsd restarted with its state in memory"}"#)
        XCTAssertEqual(lines.dropFirst().prefix(2).sorted(), [#"{"event":"initial","key":"r.fresh","kind":"value","value":1,"rev":2}"#,
                                                             #"{"event":"initial","key":"r.kept","kind":"value","value":"new","rev":1}"#])
        XCTAssertEqual(lines.dropFirst(3), [#"{"event":"synced","rev":3}"#, #"{"event":"delete","key":"r.gone","rev":3,"reason":"reset"}"#])
        XCTAssertEqual(values.readLine(), "", "r.gone is gone")
        let formatted = format.readLines(4)
        XCTAssertEqual(formatted.first, "reset:=")
        XCTAssertEqual(formatted.dropFirst().prefix(2).sorted(), ["initial:r.fresh=1", "initial:r.kept=new"])
        XCTAssertEqual(formatted.last, "delete:r.gone=")
        let runs = command.readLines(3)
        XCTAssertEqual(runs.prefix(2).sorted(), [#"{"event":"initial","key":"r.fresh","kind":"value","value":1,"rev":2}"#,
                                                  #"{"event":"initial","key":"r.kept","kind":"value","value":"new","rev":1}"#])
        XCTAssertEqual(runs.last, #"{"event":"delete","key":"r.gone","rev":3,"reason":"reset"}"#)
        XCTAssertEqual(noInitial.readLines(2).sorted(), ["1", "new"])

        // The watch goes on from the new state.
        try obsctl(daemon, ["set", "r.gone", "2"])
        XCTAssertEqual(json.readLine(), #"{"event":"change","key":"r.gone","new":2,"rev":4,"created":true}"#)
        XCTAssertEqual(values.readLine(), "2")
        XCTAssertEqual(format.readLine(), "change:r.gone=2")
        XCTAssertEqual(command.readLine(), #"{"event":"change","key":"r.gone","new":2,"rev":4,"created":true}"#)
        XCTAssertEqual(noInitial.readLine(), "2")
        for watch in [json, values, format, command, noInitial] {
            kill(watch.process.processIdentifier, SIGTERM)
            XCTAssertEqual(watch.finish().stdout, "")
        }
    }

    /// A daemon whose revision is below the one the watch saw (`--memory` restarted, a restored
    /// backup) holds another state too: reset, snapshot, delete; and a change after it, at a
    /// revision the old state had passed, is printed, not taken for one already delivered.
    func test_reconnect_toADaemonBehindTheRevisionSeen_resetsAndGoesOn() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "gone", "1"])
        for value in ["1", "2", "3"] { try obsctl(daemon, ["set", "kept", value]) }
        let watch = try Obsctl(daemon, ["watch", "gone", "kept", "--reconnect"])
        XCTAssertEqual(watch.readLines(3).last, #"{"event":"synced","rev":4}"#)
        let values = try Obsctl(daemon, ["watch", "gone", "--reconnect", "--values"])
        XCTAssertEqual(values.readLine(), "1")
        daemon.waitForWatches(2)
        for pid in [watch, values].map(\.process.processIdentifier) { kill(pid, SIGSTOP) }
        daemon.stop()
        try daemon.start()
        try obsctl(daemon, ["set", "kept", "\"new\""])
        for pid in [watch, values].map(\.process.processIdentifier) { kill(pid, SIGCONT) }
        XCTAssertEqual(watch.readLines(4), [#"{"event":"reset","rev":1,"reason":"obsd's revision went back from 4 to 1"}"#,
                                            #"{"event":"initial","key":"kept","kind":"value","value":"new","rev":1}"#,
                                            #"{"event":"synced","rev":1}"#,
                                            #"{"event":"delete","key":"gone","rev":1,"reason":"reset"}"#])
        XCTAssertEqual(values.readLine(), "")
        try obsctl(daemon, ["set", "kept", "\"newer\""])
        try obsctl(daemon, ["set", "gone", "\"back\""])
        XCTAssertEqual(watch.readLines(2), [#"{"event":"change","key":"kept","old":"new","new":"newer","rev":2,"created":false}"#,
                                            #"{"event":"change","key":"gone","new":"back","rev":3,"created":true}"#])
        XCTAssertEqual(values.readLine(), "back")
        for process in [watch, values] {
            kill(process.process.processIdentifier, SIGTERM)
            XCTAssertEqual(process.finish().stdout, "")
        }
    }

    /// A durable daemon restarted holds the state it left, though it is another process: the watch
    /// resumes (no reset, no snapshot), with the change made before it was back.
    func test_reconnect_toADurableDaemonRestarted_resumesWithoutAReset() throws {
        let daemon = try Daemon(persistent: true)
        try obsctl(daemon, ["set", "a", "1"])
        try obsctl(daemon, ["set", "b", "1"])
        let watch = try Obsctl(daemon, ["watch", "a", "b", "--reconnect"])
        XCTAssertEqual(watch.readLines(3).last, #"{"event":"synced","rev":2}"#)
        daemon.waitForWatches(1)
        kill(watch.process.processIdentifier, SIGSTOP)
        let pid = daemon.process?.processIdentifier
        daemon.stop()
        try daemon.start()
        XCTAssertNotEqual(daemon.process?.processIdentifier, pid)
        try obsctl(daemon, ["set", "a", "2"])
        kill(watch.process.processIdentifier, SIGCONT)
        // Whether the daemon replays the change or (its history starting afresh) answers
        // `compacted` and a snapshot, no reset comes before the change.
        var seen: [String] = []
        while seen.count < 6, let line = watch.readLine() {
            seen.append(line)
            if json(line)["key"] as? String == "a", json(line)["event"] as? String == "change" { break }
        }
        XCTAssertEqual(seen.last.map { json($0)["new"] as? Int }, 2, "\(seen)")
        XCTAssertFalse(seen.contains { json($0)["event"] as? String == "reset" }, "\(seen)")
        try obsctl(daemon, ["set", "b", "2"])
        var line = watch.readLine()
        while let current = line, json(current)["key"] as? String != "b" { line = watch.readLine() }
        XCTAssertEqual(json(line)["new"] as? Int, 2)
        kill(watch.process.processIdentifier, SIGTERM)
        XCTAssertEqual(watch.finish().stdout, "")
    }

    /// A durable daemon whose state was restored from a backup, and written past the revision the
    /// watch saw before the watch is back: not behind it, so no reset, but its revisions up to there
    /// are other changes. The resume names the run the watch saw its revision in, which this state
    /// does not continue: `compacted` and a snapshot, and obsctl's delete for the key the backup
    /// lacks. (A replay of revision 5 alone would leave `gone` printed, and nothing would say so.)
    func test_reconnect_toAStateRestoredFromABackup_andWrittenPastTheRevisionSeen_getsASnapshot() throws {
        let daemon = try Daemon(persistent: true)
        try daemon.writtenPastABackup()
        let watch = try Obsctl(daemon, ["watch", "gone", "kept", "--reconnect"])
        XCTAssertEqual(watch.readLines(3).last, #"{"event":"synced","rev":4}"#)
        daemon.waitForWatches(1)
        kill(watch.process.processIdentifier, SIGSTOP)
        try daemon.restoreTheBackupAndWritePastIt()
        kill(watch.process.processIdentifier, SIGCONT)
        XCTAssertEqual(watch.readLines(4), [#"{"event":"compacted","compact_rev":1}"#,
                                            #"{"event":"initial","key":"kept","kind":"value","value":"d","rev":5}"#,
                                            #"{"event":"synced","rev":5}"#,
                                            #"{"event":"delete","key":"gone","rev":5,"reason":"compacted"}"#])
        try obsctl(daemon, ["set", "kept", "\"e\""])
        XCTAssertEqual(watch.readLine(), #"{"event":"change","key":"kept","old":"d","new":"e","rev":6,"created":false}"#)
        kill(watch.process.processIdentifier, SIGTERM)
        XCTAssertEqual(watch.finish().stdout, "")
    }

    /// A script that keeps the last revision itself keeps the run it came from too (`{run}`,
    /// OBS_RUN), and resumes with `--since REV --run RUN`: a daemon that holds another state at
    /// that very revision (here one with its state in memory, started again and written up to it)
    /// gives the snapshot, where `--since` alone replays nothing and the key's value the script
    /// printed stays wrong.
    func test_sinceWithTheRunItCameFrom_givesASnapshotFromAnotherStateAtThatRevision() throws {
        let daemon = try Daemon()
        let hello = try ObsConnection(path: daemon.socket).request("hello", deadline: monotonicNow() + 10)
        let run = try XCTUnwrap(hello["run"]?.stringValue)
        let watch = try Obsctl(daemon, ["watch", "k", "--no-initial", "--format", "{rev} {run} {new}"])
        daemon.waitForWatches(1)
        try obsctl(daemon, ["set", "k", "\"old\""])
        try obsctl(daemon, ["set", "k", "\"kept\""])
        XCTAssertEqual(watch.readLines(2), ["1 \(run) old", "2 \(run) kept"])
        let command = try obsctl(daemon, ["watch", "k", "--initial-only", "--", "sh", "-c", #"echo "$OBS_REV $OBS_RUN""#])
        XCTAssertEqual(command.stdout, "2 \(run)\n", command.stderr)
        kill(watch.process.processIdentifier, SIGTERM)
        _ = watch.finish()

        daemon.stop()
        try daemon.start()
        try obsctl(daemon, ["set", "other", "1"])
        try obsctl(daemon, ["set", "k", "\"new\""])
        // --initial-only: up to the first `synced`, that of the snapshot or of the replay.
        let format = ["--format", "{event} {new}", "--initial-only"]
        XCTAssertEqual(try obsctl(daemon, ["watch", "k", "--since", "2", "--run", run] + format),
                       Result(status: 0, stdout: "initial new\n", stderr: ""), "another state at revision 2: the snapshot")
        XCTAssertEqual(try obsctl(daemon, ["watch", "k", "--since", "2"] + format), Result(status: 0, stdout: "", stderr: ""),
                       "taken on trust: nothing to replay after 2")
        XCTAssertEqual(try obsctl(daemon, ["watch", "k", "--run", run]),
                       Result(status: 64, stdout: "", stderr: "obsctl: --run goes with --since\nSee 'obsctl --help'.\n"))
    }

    /// A daemon killed with an ephemeral key: the restart takes a revision for the keys it lost, so
    /// the resumed watch gets `compacted` and a snapshot without the key, and obsctl prints a
    /// delete of its own for it (the daemon has no event to replay); `--values` its empty line.
    func test_reconnect_afterACrash_deletesTheEphemeralKeysTheDaemonLost() throws {
        let daemon = try Daemon(persistent: true)
        try obsctl(daemon, ["set", "p.kept", "1"])
        let values = try Obsctl(daemon, ["watch", "p.here", "--reconnect", "--values"])
        let owner = try Obsctl(daemon, ["set", "--ephemeral", "p.here", "-"])
        owner.send("on\n")
        // Printed from the snapshot or as a change: either way the key is there now.
        XCTAssertEqual(values.readLine(), "on")
        let watch = try Obsctl(daemon, ["watch", "p.*", "--reconnect"])
        XCTAssertEqual(watch.readLines(3), [#"{"event":"initial","key":"p.here","kind":"value","value":"on","rev":2}"#,
                                            #"{"event":"initial","key":"p.kept","kind":"value","value":1,"rev":1}"#,
                                            #"{"event":"synced","rev":2}"#])
        daemon.waitForWatches(2)
        daemon.stop(signal: SIGKILL)
        try daemon.start()
        // Revision 3 is the restart's: what the watch had printed of p.kept stands, p.here is gone.
        XCTAssertEqual(watch.readLines(3), [#"{"event":"compacted","compact_rev":3}"#, #"{"event":"synced","rev":3}"#,
                                            #"{"event":"delete","key":"p.here","rev":3,"reason":"compacted"}"#])
        XCTAssertEqual(values.readLine(), "")
        try obsctl(daemon, ["set", "p.kept", "2"])
        XCTAssertEqual(watch.readLine(), #"{"event":"change","key":"p.kept","old":1,"new":2,"rev":4,"created":false}"#)
        for process in [watch, values, owner] { kill(process.process.processIdentifier, SIGTERM) }
    }

    /// A daemon killed while obsctl prints the first snapshot, with an ephemeral key obsctl printed
    /// from it: no revision was seen, so nothing resumes; the snapshot taken again does not list
    /// the key (the crash took it), and obsctl prints its delete, as after `compacted`.
    func test_reconnect_afterAFirstSnapshotCutByACrash_deletesTheEphemeralKeyItPrinted() throws {
        let daemon = try Daemon(persistent: true)
        let owner = try Obsctl(daemon, ["set", "--ephemeral", "a.here", "-"])
        owner.send("on\n")
        XCTAssertTrue(waitFor("the ephemeral key") { (try? obsctl(daemon, ["get", "a.here"]).stdout) == "on\n" })
        // 40,000 keys of 100 bytes: a snapshot of about 6 MB, many times what the socket, the
        // pipe to the test and obsctl's reads hold while the test reads nothing.
        let writer = try Client(daemon.socket)
        let value = String(repeating: "v", count: 100)
        for batch in 0..<40 {
            XCTAssertTrue(writer.send((0..<1000).map { #"{"op":"set","key":"k.\#(batch).\#($0)","value":"\#(value)"}"# + "\n" }.joined()))
            for _ in 0..<1000 { XCTAssertEqual(json(writer.readLine())["ok"] as? Bool, true) }
        }
        let watch = try Obsctl(daemon, ["watch", "**", "--reconnect"])
        XCTAssertEqual(watch.readLine(), #"{"event":"initial","key":"a.here","kind":"value","value":"on","rev":1}"#)
        daemon.waitForWatches(1)
        daemon.stop(signal: SIGKILL)
        try daemon.start()
        // What was left of the first snapshot, then the second one, whole: its `synced` is the
        // first one obsctl prints.
        var snapshot: [[String: Any]] = []
        while let line = watch.readLine() {
            snapshot.append(json(line))
            if snapshot.last?["event"] as? String == "synced" { break }
        }
        XCTAssertEqual(snapshot.last?["rev"] as? Int, 40002, "the restart's revision")
        XCTAssertEqual(snapshot.filter { $0["event"] as? String != "initial" }.count, 1)
        // Then the delete obsctl makes, before the change made after it.
        try obsctl(daemon, ["set", "z", "1"])
        XCTAssertEqual(watch.readLines(2), [#"{"event":"delete","key":"a.here","rev":40002,"reason":"compacted"}"#,
                                            #"{"event":"change","key":"z","new":1,"rev":40003,"created":true}"#])
        for process in [watch, owner] { kill(process.process.processIdentifier, SIGTERM) }
        withExtendedLifetime(writer) {}
    }

    /// `-n` over a reset: the reset counts nothing, the new state's snapshot counts each key whose
    /// value differs from the one printed (`a`, the same, does not; `c`, new, does), and each
    /// delete the stream makes counts once (`b`): two of three, so obsctl ends at the next change.
    func test_reconnect_n_countsAResetsSnapshotAndDeletesOnce() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "a", "1"])
        try obsctl(daemon, ["set", "b", "1"])
        let watch = try Obsctl(daemon, ["watch", "a", "b", "c", "--reconnect", "--values", "-n", "3", "--timeout", "60s"])
        XCTAssertEqual(watch.readLines(2), ["1", "1"])
        daemon.waitForWatches(1)
        kill(watch.process.processIdentifier, SIGSTOP)
        daemon.stop()
        try daemon.start()
        try obsctl(daemon, ["set", "a", "1"])
        try obsctl(daemon, ["set", "c", "1"])
        kill(watch.process.processIdentifier, SIGCONT)
        XCTAssertEqual(watch.readLines(3), ["1", "1", ""], "the snapshot (a, c) and b's delete")
        try obsctl(daemon, ["set", "a", "2"])
        XCTAssertEqual(watch.finish(), Result(status: 0, stdout: "2\n", stderr: ""))
    }

    /// A daemon at `max_connections` answers `limit`: with `--reconnect`, a status bar waits for a
    /// free connection as it waits for a daemon not running yet, rather than exiting for good;
    /// without it, the refusal ends obsctl at once.
    func test_reconnect_waitsOutADaemonAtItsConnectionLimit() throws {
        let daemon = try Daemon(config: "max_connections = 1\n")
        try obsctl(daemon, ["set", "k", "first"])
        var holder = try daemon.holdAConnection()
        XCTAssertNotNil(holder)
        let refused = try obsctl(daemon, ["watch", "k"])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.stderr.contains("limit"), refused.stderr)

        let watch = try Obsctl(daemon, ["watch", "k", "--reconnect", "--values"])
        waitFor("the notice") { watch.stderr.contains("waiting for obsd (--reconnect): limit") }
        XCTAssertTrue(watch.process.isRunning, watch.stderr)
        holder = nil
        XCTAssertEqual(watch.readLine(), "first")
        kill(watch.process.processIdentifier, SIGTERM)
        XCTAssertEqual(watch.finish().stdout, "")
    }

    /// A status bar started before obsd: `--reconnect` waits for the daemon (one notice, however
    /// many attempts), and `--timeout` still bounds the wait.
    func test_reconnect_waitsForADaemonNotRunningYet() throws {
        let daemon = try Daemon(persistent: true)
        daemon.stop()
        let watch = try Obsctl(daemon, ["watch", "k", "--reconnect", "--values"])
        let notice = "obsctl: waiting for obsd (--reconnect): cannot connect to \(daemon.socket): no such file (is obsd running?)\n"
        waitFor("the notice") { watch.stderr == notice }
        XCTAssertTrue(watch.process.isRunning)
        try daemon.start()
        try obsctl(daemon, ["set", "k", "up"])
        XCTAssertEqual(watch.readLine(), "up")
        daemon.stop()
        waitFor("the second notice") { watch.stderr.split(separator: "\n").count == 2 }
        try daemon.start()
        try obsctl(daemon, ["set", "k", "again"])
        XCTAssertEqual(watch.readLine(), "again")
        kill(watch.process.processIdentifier, SIGTERM)
        XCTAssertEqual(watch.finish().stderr.split(separator: "\n").count, 2, "one notice per outage")

        let missing = daemon.root + "/none/obsd.sock"
        XCTAssertEqual(try obsctl(nil, ["watch", "k", "--reconnect", "--timeout", "300ms", "--socket", missing]),
                       Result(status: 3, stdout: "", stderr: """
                           obsctl: waiting for obsd (--reconnect): cannot connect to \(missing): no such file (is obsd running?)
                           obsctl: timed out

                           """))
        XCTAssertEqual(try obsctl(nil, ["watch", "k", "--socket", missing]).status, 2, "without --reconnect it fails at once")
    }

    /// `--reconnect --timeout` waits for the daemon until the timeout, not less: it used to give
    /// up as soon as its next pause (doubling up to 2 s) would end past it, so `--timeout 5s`
    /// stopped after about 3.2 s, and a daemon that started in the seconds left was missed.
    func test_reconnect_waitsForADaemonNotRunningYet_untilTheTimeoutItself() throws {
        let missing = NSTemporaryDirectory() + "/obsctl-\(UUID().uuidString.prefix(8))/obsd.sock"
        let started = monotonicNow()
        let result = try obsctl(nil, ["watch", "k", "--reconnect", "--timeout", "5s", "--socket", missing])
        let elapsed = monotonicNow() - started
        XCTAssertEqual(result.status, 3, result.description)
        XCTAssertGreaterThanOrEqual(elapsed, 5, "gave up before its --timeout")
    }

    func test_command_getsTheEventOnStdinAndInTheEnvironment() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "k", "\"old\""])
        let script = "printf '%s|%s|%s|%s|%s|' \"$OBS_KEY\" \"$OBS_VALUE\" \"$OBS_OLD\" \"$OBS_REV\" \"$OBS_CHANNEL\"; cat; [ \"$OBS_VALUE\" != fail ]"
        let watch = try Obsctl(daemon, ["watch", "k", "ch", "--no-initial", "-n", "3", "--", "sh", "-c", script])
        daemon.waitForWatches(1)
        try obsctl(daemon, ["set", "k", "new"])
        try obsctl(daemon, ["publish", "ch", "fail"])
        try obsctl(daemon, ["del", "k"])
        let result = watch.finish()
        XCTAssertEqual(result.stdout, """
            k|new|old|2||{"event":"change","key":"k","old":"old","new":"new","rev":2,"created":false}
            |fail|||ch|{"event":"publish","channel":"ch","payload":"fail"}
            k||new|3||{"event":"delete","key":"k","old":"new","rev":3}

            """)
        XCTAssertEqual(result.stderr, "obsctl: sh exited with status 1\n")
        XCTAssertEqual(result.status, 0)
    }

    /// A value too long for one environment variable (128 KiB) no longer keeps the command from
    /// starting: the variables it would overfill are empty and named in OBS_TOO_LARGE, and the
    /// event is whole on stdin.
    func test_command_ofAnEventTooLargeForTheEnvironment_runsWithTheEventOnStdin() throws {
        let daemon = try Daemon()
        let big = String(repeating: "x", count: 200_000)
        let script = "printf '%s|%s|%s|%s|' \"$OBS_TOO_LARGE\" \"${#OBS_VALUE}\" \"${#OBS_EVENT}\" \"$OBS_KEY\"; wc -c"
        let watch = try Obsctl(daemon, ["watch", "k", "--no-initial", "-n", "2", "--", "sh", "-c", script])
        daemon.waitForWatches(1)
        let connection = try ObsConnection(path: daemon.socket)
        try connection.request("set", ["key": "k", "value": .string(big)])
        try connection.request("set", ["key": "k", "value": "small"])
        let result = watch.finish()
        let line = #"{"event":"change","key":"k","new":"\#(big)","rev":1,"created":true}"#
        let second = #"{"event":"change","key":"k","old":"\#(big)","new":"small","rev":2,"created":false}"#
        XCTAssertEqual(result.stdout, "OBS_EVENT OBS_VALUE|0|0|k|\(line.utf8.count + 1)\nOBS_EVENT OBS_OLD|5|0|k|\(second.utf8.count + 1)\n")
        XCTAssertEqual(result.stderr, "")
        XCTAssertEqual(result.status, 0)
    }

    /// A value holding a NUL character cannot be passed in the environment (a variable ends at
    /// its first NUL): it was passed cut there (`a` for "a\u{0}b"). It is left empty and named
    /// in OBS_TOO_LARGE, as a value too long is; the event is whole on stdin (`\u0000`).
    func test_command_ofAValueWithANUL_namesIt_ratherThanPassItCut() throws {
        let daemon = try Daemon()
        let script = "printf '%s|%s|%s|' \"$OBS_TOO_LARGE\" \"$OBS_VALUE\" \"$OBS_KEY\"; cat"
        let watch = try Obsctl(daemon, ["watch", "k", "--no-initial", "-n", "1", "--", "sh", "-c", script])
        daemon.waitForWatches(1)
        let connection = try ObsConnection(path: daemon.socket)
        try connection.request("set", ["key": "k", "value": .string("a\u{0}b")])
        let result = watch.finish()
        XCTAssertEqual(result.stdout, #"OBS_VALUE||k|{"event":"change","key":"k","new":"a\u0000b","rev":1,"created":true}"# + "\n")
        XCTAssertEqual(result.stderr, "")
        XCTAssertEqual(result.status, 0)
    }

    func test_command_thatCannotRun_stopsTheWatchAtOnce() throws {
        let daemon = try Daemon()
        // Before watching: nothing to wait for, a usage error.
        for (command, reason) in [("/nonexistent/notify", "No such file or directory"), ("nosuchcommand-obsctl", "command not found in PATH"),
                                  (daemon.root, "not an executable file")] {
            XCTAssertEqual(try obsctl(daemon, ["watch", "k", "--", command]),
                           Result(status: 64, stdout: "", stderr: "obsctl: cannot run '\(command)': \(reason)\nSee 'obsctl --help'.\n"))
        }
        // A command removed while the watch runs stops it at the next event, instead of a warning per event.
        let script = daemon.write("#!/bin/sh\nexit 0\n", to: "notify")
        chmod(script, 0o755)
        let watch = try Obsctl(daemon, ["watch", "k", "--no-initial", "--", script])
        daemon.waitForWatches(1)
        try FileManager.default.removeItem(atPath: script)
        try obsctl(daemon, ["set", "k", "1"])
        XCTAssertEqual(watch.finish(), Result(status: 64, stdout: "", stderr: "obsctl: cannot run '\(script)': No such file or directory\nSee 'obsctl --help'.\n"))
    }

    func test_command_slowWithLatest_neverOverlaps_andCoalesces() throws {
        let daemon = try Daemon()
        let gate = daemon.root + "/gate"
        let log = daemon.root + "/runs"
        // Each run records its start and end, then waits until the test opens the gate.
        let script = "echo \"start $OBS_VALUE\" >> \(log); while [ ! -e \(gate) ]; do sleep 0.01; done; echo \"end $OBS_VALUE\" >> \(log)"
        let watch = try Obsctl(daemon, ["watch", "k", "--no-initial", "--latest", "--", "sh", "-c", script])
        daemon.waitForWatches(1)
        try obsctl(daemon, ["set", "k", "1"])
        waitFor("the first run") { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("start 1") }
        for value in 2...6 { try obsctl(daemon, ["set", "k", "\(value)"]) }
        // The five changes arrive while run 1 is still going (synced and six changes sent); they
        // must become one run with 6.
        waitFor("the daemon to send the events") { daemon.stat("events_sent") >= 7 }
        _ = FileManager.default.createFile(atPath: gate, contents: nil)
        waitFor("the second run") { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("end 6") }
        kill(watch.process.processIdentifier, SIGTERM)
        _ = watch.finish()
        XCTAssertEqual(try String(contentsOfFile: log, encoding: .utf8), "start 1\nend 1\nstart 6\nend 6\n")
    }
}
