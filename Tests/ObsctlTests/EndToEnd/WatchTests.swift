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

    func test_format_everyPlaceholder_andBraces() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "vol", "0.4"])
        let format = "{event}|{key}|{new}|{old}|{rev}|{channel}|{payload}|{{literal}}|{unknown}"
        let watch = try Obsctl(daemon, ["watch", "vol", "bar.*", "--format", format, "-n", "3"])
        XCTAssertEqual(watch.readLine(), "initial|vol|0.4||1|||{literal}|{unknown}")
        try obsctl(daemon, ["set", "vol", "\"loud\""])
        try obsctl(daemon, ["publish", "bar.click", "{\"b\":1}"])
        try obsctl(daemon, ["del", "vol"])
        XCTAssertEqual(watch.finish(), Result(status: 0, stdout: """
            change|vol|loud|0.4|2|||{literal}|{unknown}
            publish|||||bar.click|{"b":1}|{literal}|{unknown}
            delete|vol||loud|3|||{literal}|{unknown}

            """, stderr: ""))
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
