import Foundation
import TestSupport
import XCTest

/// Every command against a real obsd, output byte for byte, with its exit status.
final class CommandTests: XCTestCase {
    func test_setAndGet_printStringsRawAndOtherValuesAsJSON() throws {
        let daemon = try Daemon()
        for (key, value) in [("n", "42"), ("b", "true"), ("z", "null"), ("q", "\"x\""), ("a", "[1, 2]"),
                             ("o", "{\"b\":1,\"a\":2}"), ("s", "hello world"), ("ver", "1.2.3")] {
            XCTAssertEqual(try obsctl(daemon, ["set", key, value]), Result(status: 0, stdout: "", stderr: ""))
        }
        // Not JSON but looks like it: stored as a string, with a warning.
        XCTAssertEqual(try obsctl(daemon, ["set", "bad", "{bad"]),
                       Result(status: 0, stdout: "", stderr: """
                           obsctl: warning: '{bad' is not valid JSON (unexpected 'b', expected a member name in double quotes \
                           at byte 1), so it was taken as a string; --string takes it as a string without this warning, \
                           --json refuses it

                           """))
        XCTAssertEqual(try obsctl(daemon, ["get", "n", "b", "z", "q", "a", "o", "s", "ver", "bad"]).stdout,
                       "42\ntrue\nnull\nx\n[1,2]\n{\"a\":2,\"b\":1}\nhello world\n1.2.3\n{bad\n")
        XCTAssertEqual(try obsctl(daemon, ["set", "--string", "braces", "{a:1}"]), Result(status: 0, stdout: "", stderr: ""))
        XCTAssertEqual(try obsctl(daemon, ["get", "--json", "q", "s", "n"]).stdout, "\"x\"\n\"hello world\"\n42\n")
        try obsctl(daemon, ["set", "--string", "t", "42"])
        XCTAssertEqual(try obsctl(daemon, ["get", "--json", "t"]).stdout, "\"42\"\n")
        try obsctl(daemon, ["set", "--json", "j", "[true]"])
        XCTAssertEqual(try obsctl(daemon, ["get", "j"]).stdout, "[true]\n")
        try obsctl(daemon, ["set", "neg", "-5"])
        XCTAssertEqual(try obsctl(daemon, ["get", "neg"]).stdout, "-5\n")
    }

    func test_get_missingKeyAndComputedInError_exit1_withCodeAndMessage() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "a", "1"])
        try obsctl(daemon, ["define", "broken", "$a / 0"])
        XCTAssertEqual(try obsctl(daemon, ["get", "a", "nope", "broken"]),
                       Result(status: 1, stdout: "1\n\n\n",
                              stderr: "obsctl: not_found: no key 'nope'\nobsctl: eval_error: division by zero at 3\n"))
    }

    func test_setOptions_ifRevTTLAlwaysAndConflict() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "--if-rev", "0", "k", "1"])
        let conflict = try obsctl(daemon, ["set", "--if-rev", "0", "k", "2"])
        XCTAssertEqual(conflict.status, 1)
        XCTAssertTrue(conflict.stderr.hasPrefix("obsctl: conflict: "), conflict.stderr)
        try obsctl(daemon, ["set", "--if-rev", "1", "k", "3"])
        XCTAssertEqual(try obsctl(daemon, ["get", "k"]).stdout, "3\n")
        try obsctl(daemon, ["set", "--ttl", "1h", "t", "1"])
        XCTAssertTrue(try obsctl(daemon, ["describe", "t"]).stdout.contains("ttl:"))
        try obsctl(daemon, ["set", "--ttl", "100ms", "gone", "1"])
        waitFor("the TTL to expire") { (try? obsctl(daemon, ["get", "gone"]).status) == 1 }
        let watch = try Obsctl(daemon, ["watch", "k", "--no-initial", "-n", "1"])
        XCTAssertEqual(watch.readLine(), "{\"event\":\"synced\",\"rev\":5}")
        try obsctl(daemon, ["set", "--always", "k", "3"])
        XCTAssertEqual(watch.readLine(), "{\"event\":\"change\",\"key\":\"k\",\"old\":3,\"new\":3,\"rev\":6,\"created\":false}")
        XCTAssertEqual(watch.finish().status, 0)
    }

    func test_setDash_setsEachLineAsItArrives() throws {
        let daemon = try Daemon()
        let watch = try Obsctl(daemon, ["watch", "temp", "--no-initial", "--values"])
        daemon.waitForWatches(1)
        let sensor = try Obsctl(daemon, ["set", "temp", "-"])
        for reading in ["20.5", "21", "celsius"] {
            sensor.send(reading + "\n")
            XCTAssertEqual(watch.readLine(), reading)
        }
        XCTAssertEqual(sensor.finish(), Result(status: 0, stdout: "", stderr: ""))
    }

    /// CRLF input: each line loses its `\r`, the last one too when no newline ends it (it kept
    /// its `\r`: `"b\r"`).
    func test_setDash_CRLFLines_loseTheirCarriageReturn_theLastToo() throws {
        let daemon = try Daemon()
        XCTAssertEqual(try obsctl(daemon, ["set", "a", "-"], stdin: "x\r\ny\r\n"), Result(status: 0, stdout: "", stderr: ""))
        XCTAssertEqual(try obsctl(daemon, ["get", "--json", "a"]).stdout, "\"y\"\n")
        XCTAssertEqual(try obsctl(daemon, ["set", "b", "-"], stdin: "x\r\ny\r"), Result(status: 0, stdout: "", stderr: ""))
        XCTAssertEqual(try obsctl(daemon, ["get", "--json", "b"]).stdout, "\"y\"\n")
    }

    /// A line over the daemon's limit is answered `too_large` before the daemon closes the
    /// connection: that answer is the error (exit 1), not a lost connection, and the daemon lives on.
    func test_setDash_lineOverTheLimit_isTooLarge_notALostConnection() throws {
        let daemon = try Daemon()
        // Longer than a request line: obsctl stops reading it (InputBoundsTests has the rest).
        let line = String(repeating: "x", count: 2 << 20)
        XCTAssertEqual(try obsctl(daemon, ["set", "--string", "big", "-"], stdin: line + "\n"),
                       Result(status: 1, stdout: "", stderr: "obsctl: too_large: set: line 1 of stdin is more than 1048576 bytes, the daemon's longest request line (max_line_bytes); stopped there, every line before it was sent\n"))
        // Within it, but not its request: the daemon's answer, not a lost connection.
        let almost = String(repeating: "x", count: (1 << 20) - 4)
        XCTAssertEqual(try obsctl(daemon, ["set", "--string", "big", "-"], stdin: almost + "\n"),
                       Result(status: 1, stdout: "", stderr: "obsctl: too_large: set: line 1 of stdin: request line longer than 1048576 bytes\n"))
        XCTAssertEqual(try obsctl(daemon, ["set", "small", "1"]).status, 0)
    }

    func test_setEphemeral_holdsTheKeyUntilStdinCloses() throws {
        let daemon = try Daemon()
        let holder = try Obsctl(daemon, ["set", "--ephemeral", "lock", "me"])
        waitFor("the ephemeral key") { (try? obsctl(daemon, ["get", "lock"]).stdout) == "me\n" }
        XCTAssertTrue(holder.process.isRunning)
        XCTAssertEqual(holder.finish().status, 0)
        waitFor("the ephemeral key to go") { (try? obsctl(daemon, ["get", "lock"]).status) == 1 }
    }

    /// The key goes with the daemon's connection: a daemon restarted (its ephemeral keys lost)
    /// used to leave `set --ephemeral` running for ever without its key, so a supervisor never
    /// started it again. It now ends as soon as the connection does, with exit 2.
    func test_setEphemeral_endsWhenTheDaemonGoes() throws {
        let daemon = try Daemon()
        let holder = try Obsctl(daemon, ["set", "--ephemeral", "presence", "online"])
        waitFor("the ephemeral key") { (try? obsctl(daemon, ["get", "presence"]).stdout) == "online\n" }
        daemon.stop()
        try daemon.start()
        // stdin stays open: only the lost connection can end it.
        waitFor("obsctl to exit") { !holder.process.isRunning }
        let result = holder.finish()
        XCTAssertEqual(result.status, 2, result.description)
        XCTAssertEqual(result.stderr, "obsctl: lost the connection to \(daemon.socket) (shutdown): is obsd running?\n")
    }

    func test_delIncrDefineBindUnbind() throws {
        let daemon = try Daemon()
        XCTAssertEqual(try obsctl(daemon, ["incr", "c"]).stdout, "1\n")
        XCTAssertEqual(try obsctl(daemon, ["incr", "c", "5"]).stdout, "6\n")
        XCTAssertEqual(try obsctl(daemon, ["incr", "c", "-1.5"]).stdout, "4.5\n")
        XCTAssertEqual(try obsctl(daemon, ["incr", "c", "x"]).status, 64)
        try obsctl(daemon, ["set", "s", "text"])
        XCTAssertEqual(try obsctl(daemon, ["incr", "s"]).status, 1)
        try obsctl(daemon, ["set", "price", "3"])
        try obsctl(daemon, ["set", "qty", "2"])
        XCTAssertEqual(try obsctl(daemon, ["define", "total", "$price * $qty"]).status, 0)
        XCTAssertEqual(try obsctl(daemon, ["get", "total"]).stdout, "6\n")
        XCTAssertEqual(try obsctl(daemon, ["define", "price", "1"]).stderr,
                       "obsctl: exists: 'price' is a value key; define --replace makes it a computed key\n")
        XCTAssertEqual(try obsctl(daemon, ["define", "--replace", "price", "10"]).status, 0)
        XCTAssertEqual(try obsctl(daemon, ["get", "total"]).stdout, "20\n")
        XCTAssertEqual(try obsctl(daemon, ["define", "bad", "$a +"]).status, 1)
        XCTAssertEqual(try obsctl(daemon, ["bind", "qty", "copy", "--map", "value * 10"]).status, 0)
        XCTAssertEqual(try obsctl(daemon, ["get", "copy"]).stdout, "20\n")
        XCTAssertEqual(try obsctl(daemon, ["unbind", "copy"]).status, 0)
        XCTAssertEqual(try obsctl(daemon, ["unbind", "copy"]).status, 1)
        XCTAssertEqual(try obsctl(daemon, ["bind", "a", "b", "--unmap", "value"]).status, 64)
        XCTAssertEqual(try obsctl(daemon, ["bind", "left", "right", "--two-way"]).status, 0)
        XCTAssertEqual(try obsctl(daemon, ["del", "qty", "copy", "missing"]).status, 0)
        XCTAssertEqual(try obsctl(daemon, ["get", "qty"]).status, 1)
    }

    func test_remainingOptions() throws {
        let daemon = try Daemon()
        XCTAssertEqual(try obsctl(daemon, ["incr", "--json", "c", "2"]).stdout, "2\n")
        XCTAssertEqual(try obsctl(daemon, ["bind", "celsius", "fahrenheit", "--two-way", "--map", "value * 9 / 5 + 32",
                                           "--unmap", "(value - 32) * 5 / 9"]).status, 0)
        try obsctl(daemon, ["set", "celsius", "100"])
        XCTAssertEqual(try obsctl(daemon, ["get", "fahrenheit"]).stdout, "212\n")
        try obsctl(daemon, ["set", "fahrenheit", "32"])
        XCTAssertEqual(try obsctl(daemon, ["get", "celsius"]).stdout, "0\n")
        XCTAssertEqual(try obsctl(daemon, ["graph", "celsius"]).stdout, "celsius  value  <- fahrenheit (bind)\n")
        XCTAssertTrue(try obsctl(daemon, ["graph", "--json", "c"]).stdout.hasPrefix("{\"id\":1,\"ok\":true,\"nodes\":[{\"key\":\"c\""))
        XCTAssertTrue(try obsctl(daemon, ["describe", "--json", "c"]).stdout.hasPrefix("{\"id\":1,\"ok\":true,\"key\":\"c\",\"kind\":\"value\""))
        XCTAssertEqual(try obsctl(daemon, ["describe", "fahrenheit"]).stdout.split(separator: "\n").filter { $0.hasPrefix("binding:") },
                       ["binding:      celsius (two-way) map value * 9 / 5 + 32"])
        XCTAssertEqual(try obsctl(daemon, ["publish", "--json", "ch", "nope"]).status, 64)
        XCTAssertEqual(try obsctl(daemon, ["watch", "--json", "c", "--initial-only"]).stdout,
                       "{\"event\":\"initial\",\"key\":\"c\",\"kind\":\"value\",\"value\":2,\"rev\":1}\n")
        let holder = try Obsctl(daemon, ["set", "--ephemeral", "--ttl", "1h", "e", "1"])
        waitFor("the ephemeral key") { (try? obsctl(daemon, ["describe", "e"]).stdout.contains("ephemeral:    true\n")) ?? false }
        _ = holder.finish()
    }

    func test_eval_printsLikeGet() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "name", "obs"])
        XCTAssertEqual(try obsctl(daemon, ["eval", "upper($name) + \"!\""]).stdout, "OBS!\n")
        XCTAssertEqual(try obsctl(daemon, ["eval", "--json", "$name"]).stdout, "\"obs\"\n")
        XCTAssertEqual(try obsctl(daemon, ["eval", "[1, 2]"]).stdout, "[1,2]\n")
        XCTAssertEqual(try obsctl(daemon, ["eval", "1 +"]).status, 1)
    }

    func test_listDescribeGraphStats_alignedText_andJSON() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "price", "3"])
        try obsctl(daemon, ["set", "qty", "2"])
        try obsctl(daemon, ["define", "total", "$price * $qty"])
        try obsctl(daemon, ["bind", "total", "shown"])
        XCTAssertEqual(try obsctl(daemon, ["list"]).stdout, "price  value\nqty    value\nshown  value\ntotal  computed\n")
        XCTAssertEqual(try obsctl(daemon, ["list", "total"]).stdout, "total  computed\n")
        XCTAssertEqual(try obsctl(daemon, ["list", "--json", "qty"]).stdout,
                       "{\"id\":1,\"ok\":true,\"keys\":[{\"key\":\"qty\",\"kind\":\"value\"}]}\n")
        XCTAssertEqual(try obsctl(daemon, ["describe", "total"]).stdout, """
            key:          total
            kind:         computed
            value:        6
            expr:         $price * $qty
            deps:         price, qty
            dependents:   -
            bound to:     shown
            rev:          3
            created_rev:  3
            version:      1

            """)
        XCTAssertEqual(try obsctl(daemon, ["describe", "shown"]).stdout, """
            key:          shown
            kind:         value
            value:        6
            deps:         -
            dependents:   -
            binding:      total
            rev:          4
            created_rev:  4
            version:      1

            """)
        XCTAssertEqual(try obsctl(daemon, ["graph"]).stdout, """
            price  value
            qty    value
            shown  value     <- total (bind)
            total  computed  <- price, qty

            """)
        XCTAssertEqual(try obsctl(daemon, ["graph", "--dot"]).stdout, """
            digraph obsd {
              rankdir=LR;
              "price" [shape=box];
              "qty" [shape=box];
              "shown" [shape=box];
              "total" [shape=ellipse];
              "total" -> "shown" [style=dashed];
              "price" -> "total";
              "qty" -> "total";
            }

            """)
        let stats = try obsctl(daemon, ["stats"]).stdout
        XCTAssertTrue(stats.contains("\nkeys                  4\n"), stats)
        XCTAssertTrue(stats.hasPrefix("bindings              1\ncomputed              1\n"), stats)
        XCTAssertTrue(stats.contains("\nobsctl_version        0.1.0\n"), stats)
        XCTAssertTrue(stats.contains("\nversion               0.1.0\n"), stats)
        XCTAssertTrue(stats.contains("\nerrors                -\n"), stats)
        XCTAssertTrue(stats.contains("\nrequests              bind 1, define 1, describe 2, graph 2, list 3, set 2, stats 1\n"), stats)
        XCTAssertTrue(try obsctl(daemon, ["stats", "--json"]).stdout.hasPrefix("{\"id\":1,\"ok\":true,\"rev\":4,"))
    }

    func test_dumpRestore_roundTrip_andReplace() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "a", "1"])
        try obsctl(daemon, ["define", "b", "$a + 1"])
        try obsctl(daemon, ["bind", "a", "c"])
        let dump = try obsctl(daemon, ["dump"]).stdout
        XCTAssertTrue(dump.hasPrefix("{\"bindings\":[{\"from\":\"a\",\"to\":\"c\",\"two_way\":false}],\"keys\":["), dump)
        let other = try Daemon()
        try obsctl(other, ["set", "extra", "1"])
        XCTAssertEqual(try obsctl(other, ["restore"], stdin: dump).status, 0)
        XCTAssertEqual(try obsctl(other, ["get", "b", "extra"]).stdout, "2\n1\n")
        XCTAssertEqual(try obsctl(other, ["restore", "--replace"], stdin: dump).status, 0)
        XCTAssertEqual(try obsctl(other, ["get", "extra"]).status, 1)
        XCTAssertEqual(try obsctl(other, ["restore"], stdin: "not json").status, 64)
    }

    func test_publish_valueParsingAndStdinLines() throws {
        let daemon = try Daemon()
        let watch = try Obsctl(daemon, ["watch", "alerts", "--no-initial"])
        XCTAssertEqual(watch.readLine(), "{\"event\":\"synced\",\"rev\":0}")
        try obsctl(daemon, ["publish", "alerts", "{\"level\":2}"])
        XCTAssertEqual(watch.readLine(), "{\"event\":\"publish\",\"channel\":\"alerts\",\"payload\":{\"level\":2}}")
        try obsctl(daemon, ["publish", "alerts"])
        XCTAssertEqual(watch.readLine(), "{\"event\":\"publish\",\"channel\":\"alerts\",\"payload\":null}")
        try obsctl(daemon, ["publish", "--string", "alerts", "7"])
        XCTAssertEqual(watch.readLine(), "{\"event\":\"publish\",\"channel\":\"alerts\",\"payload\":\"7\"}")
        try obsctl(daemon, ["publish", "alerts", "-"], stdin: "one\n2\n")
        XCTAssertEqual(watch.readLines(2), ["{\"event\":\"publish\",\"channel\":\"alerts\",\"payload\":\"one\"}",
                                            "{\"event\":\"publish\",\"channel\":\"alerts\",\"payload\":2}"])
    }

    func test_ping_printsTheTimeTaken() throws {
        let daemon = try Daemon()
        let result = try obsctl(daemon, ["ping"])
        XCTAssertEqual(result.status, 0)
        XCTAssertTrue(result.stdout.hasPrefix("pong from \(daemon.socket) in "), result.stdout)
        XCTAssertTrue(result.stdout.hasSuffix(" ms (obsd 0.1.0, obsctl 0.1.0)\n"), result.stdout)
    }

    func test_exitCodes_connectAndUsage() throws {
        let missing = NSTemporaryDirectory() + "obsctl-none-\(getpid())/obsd.sock"
        XCTAssertEqual(try obsctl(nil, ["--socket", missing, "get", "x"]),
                       Result(status: 2, stdout: "", stderr: "obsctl: cannot connect to \(missing): no such file (is obsd running?)\n"))
        XCTAssertEqual(try obsctl(nil, ["get", "x"], environment: ["OBSD_SOCKET": missing]).stderr,
                       "obsctl: cannot connect to \(missing): no such file (is obsd running?)\n")
        XCTAssertEqual(try obsctl(nil, ["get", "x"], environment: ["XDG_RUNTIME_DIR": "/nonexistent-run"], socket: false).stderr,
                       getuid() == 0 ? "obsctl: cannot connect to /run/obsd/obsd.sock: no such file (is obsd running?)\n"
                                     : "obsctl: cannot connect to /nonexistent-run/obsd/obsd.sock: no such file (is obsd running?)\n")
        let usage = [(["set", "--json", "k", "{bad"], "--json: '{bad' is not valid JSON"),
                     (["--timeout", "soon", "get", "k"], "invalid duration 'soon' for --timeout (expected e.g. 250ms, 5s, 2m, 1h or 10)"),
                     (["frobnicate"], "unknown command 'frobnicate'"),
                     ([], "missing command"),
                     (["get"], "'get' needs KEY"),
                     (["unbind", "a", "b"], "unexpected argument 'b' for 'unbind'"),
                     (["get", "--bogus", "k"], "unknown option '--bogus' for 'get'"),
                     (["watch", "k", "--values", "--format", "x"], "--json, --values and --format exclude each other"),
                     (["watch", "k", "--throttle", "1x"], "invalid duration '1x' for --throttle (expected e.g. 250ms, 5s, 2m, 1h or 10)"),
                     (["watch", "k", "-n", "-1"], "invalid number '-1' for -n"),
                     (["watch", "k", "--"], "'--' must be followed by a COMMAND"),
                     (["set", "--ttl", "later", "k", "1"], "invalid duration 'later' for --ttl (expected e.g. 250ms, 5s, 2m, 1h or 10)"),
                     (["set", "--string", "--json", "k", "1"], "--string and --json exclude each other"),
                     (["completion", "tcsh"], "completion: unknown shell 'tcsh' (bash, zsh or fish)"),
                     (["--socket", "", "get", "k"], "--socket needs a path, not an empty one"),
                     (["get", "k", "--socket="], "--socket needs a path, not an empty one")]
        for (arguments, message) in usage {
            XCTAssertEqual(try obsctl(nil, arguments, environment: ["OBSD_SOCKET": missing]),
                           Result(status: 64, stdout: "", stderr: "obsctl: \(message)\nSee 'obsctl --help'.\n"), "\(arguments)")
        }
    }

    /// Numbers and durations too large for the protocol's 64-bit fields are usage errors, not a
    /// crash (they were: a Swift overflow trap, signal 4, with a backtrace on stderr); so are
    /// intervals shorter than the daemon's millisecond (they were the daemon's `bad_request`
    /// about `throttle_ms`, exit 1).
    func test_numbersAndDurationsOutOfRange_areUsageErrors_notACrash() throws {
        let missing = NSTemporaryDirectory() + "obsctl-none-\(getpid())/obsd.sock"
        let duration = " (expected e.g. 250ms, 5s, 2m, 1h or 10)"
        let endless = String(repeating: "9", count: 400)
        let usage = [(["watch", "k", "--since", "18446744073709551615"], "invalid number '18446744073709551615' for --since"),
                     (["set", "--if-rev", "9223372036854775808", "k", "1"], "invalid number '9223372036854775808' for --if-rev"),
                     (["set", "--ttl", "99999999999999h", "k", "1"], "invalid duration '99999999999999h' for --ttl" + duration),
                     (["set", "--ttl", endless, "k", "1"], "invalid duration '\(endless)' for --ttl" + duration),
                     (["watch", "k", "--throttle", "99999999999999999999"], "invalid duration '99999999999999999999' for --throttle" + duration),
                     (["--timeout", endless, "get", "k"], "invalid duration '\(endless)' for --timeout" + duration),
                     (["watch", "k", "--throttle", "0"], "--throttle must be at least 1ms, not '0'"),
                     (["watch", "k", "--debounce", "0.2ms"], "--debounce must be at least 1ms, not '0.2ms'"),
                     (["--timeout", "0", "get", "k"], "--timeout must be longer than 0"),
                     (["wait", "true", "--timeout", "0s"], "--timeout must be longer than 0")]
        for (arguments, message) in usage {
            XCTAssertEqual(try obsctl(nil, arguments, environment: ["OBSD_SOCKET": missing]),
                           Result(status: 64, stdout: "", stderr: "obsctl: \(message)\nSee 'obsctl --help'.\n"), "\(arguments)")
        }
    }

    func test_wait_exitsWhenTrue_atOnceIfAlready_and3OnTimeout() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "ready", "true"])
        XCTAssertEqual(try obsctl(daemon, ["wait", "$ready"]).status, 0)
        XCTAssertEqual(try obsctl(daemon, ["wait", "$count >= 3", "--timeout", "200ms"]),
                       Result(status: 3, stdout: "", stderr: "obsctl: timed out\n"))
        let waiter = try Obsctl(daemon, ["wait", "$count >= 3"])
        for _ in 0..<3 { try obsctl(daemon, ["incr", "count"]) }
        XCTAssertEqual(waiter.finish(), Result(status: 0, stdout: "", stderr: ""))
        XCTAssertEqual(try obsctl(daemon, ["wait", "1 +"]).status, 1)
    }

    func test_timeout_exit3_whenTheDaemonDoesNotAnswer() throws {
        // A socket that accepts connections (the kernel's backlog) but never answers.
        let path = NSTemporaryDirectory() + "obsctl-silent-\(getpid()).sock"
        unlink(path)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd); unlink(path) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        listen(fd, 8)
        XCTAssertEqual(try obsctl(nil, ["--socket", path, "--timeout", "200ms", "get", "x"]),
                       Result(status: 3, stdout: "", stderr: "obsctl: timed out\n"))
        XCTAssertEqual(try obsctl(nil, ["ping", "--socket", path, "--timeout", "0.2"]).status, 3)
    }

    func test_lostConnection_exit2() throws {
        let daemon = try Daemon()
        let watch = try Obsctl(daemon, ["watch", "k"])
        XCTAssertEqual(watch.readLine(), "{\"event\":\"synced\",\"rev\":0}")
        daemon.stop()
        let result = watch.finish()
        XCTAssertEqual(result.status, 2)
        XCTAssertEqual(result.stderr, "obsctl: lost the connection to \(daemon.socket) (shutdown): is obsd running?\n")
    }
}

