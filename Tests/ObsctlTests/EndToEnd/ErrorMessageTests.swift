import Foundation
import Glibc
import TestSupport
import XCTest

/// What obsctl says when something is wrong: each message names the cause and what to do.
final class ErrorMessageTests: XCTestCase {
    func test_connect_tellsMissingNotASocketAndNothingListeningApart() throws {
        let daemon = try Daemon()
        let missing = daemon.root + "/none/obsd.sock"
        XCTAssertEqual(try obsctl(nil, ["--socket", missing, "get", "k"]),
                       Result(status: 2, stdout: "", stderr: "obsctl: cannot connect to \(missing): no such file (is obsd running?)\n"))
        let file = daemon.write("", to: "plain")
        XCTAssertEqual(try obsctl(nil, ["--socket", file, "get", "k"]).stderr,
                       "obsctl: cannot connect to \(file): not a socket but a regular file (is the path right?)\n")
        XCTAssertEqual(try obsctl(nil, ["--socket", daemon.root, "get", "k"]).stderr,
                       "obsctl: cannot connect to \(daemon.root): not a socket but a directory (is the path right?)\n")
        // A killed daemon leaves its socket file behind with nothing listening.
        daemon.stop(signal: SIGKILL)
        XCTAssertEqual(try obsctl(daemon, ["get", "k"]),
                       Result(status: 2, stdout: "", stderr: "obsctl: cannot connect to \(daemon.socket): nothing is listening on the socket (is obsd running?)\n"))
        let long = "/tmp/" + String(repeating: "x", count: 120)
        XCTAssertEqual(try obsctl(nil, ["--socket", long, "get", "k"]).stderr,
                       "obsctl: cannot connect to \(long): the path is longer than a Unix socket path may be (107 bytes)\n")
    }

    /// Permission denied names the directory or socket in the way, its owner, group and mode, and
    /// who obsctl runs as.
    func test_connect_permissionDenied_namesTheOwnerGroupAndCaller() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to run obsctl as another user")
        let daemon = try Daemon()
        let asNobody = "setpriv --reuid=65534 --regid=65534 --clear-groups \"$OBSCTL\" --socket \(daemon.socket) get k"
        let caller = "you are nobody (uid 65534), in groups nogroup (obsd's socket_mode, socket_group and allow settings say who may connect)"
        chmod(daemon.root, 0o700)
        var result = try Obsctl(nil, [], shell: asNobody).finish()
        XCTAssertEqual(result, Result(status: 2, stdout: "", stderr: """
            obsctl: cannot connect to \(daemon.socket): permission denied: \(daemon.root) is owned by user root and group root, mode 0700; \(caller)

            """))
        chmod(daemon.root, 0o755)
        var info = stat()
        XCTAssertEqual(stat(daemon.socket, &info), 0)
        result = try Obsctl(nil, [], shell: asNobody).finish()
        XCTAssertEqual(result, Result(status: 2, stdout: "", stderr: """
            obsctl: cannot connect to \(daemon.socket): permission denied: \(daemon.socket) is owned by user root and group root, mode \
            0\(String(info.st_mode & 0o777, radix: 8)); \(caller)

            """))
    }

    func test_didYouMean_forCommandsAndOptions() throws {
        let cases = [(["wach", "k"], "unknown command 'wach' (did you mean 'watch'?)"),
                     (["dscribe", "k"], "unknown command 'dscribe' (did you mean 'describe'?)"),
                     (["zzz"], "unknown command 'zzz'"),
                     (["watch", "k", "--valeus"], "unknown option '--valeus' for 'watch' (did you mean '--values'?)"),
                     (["watch", "k", "--recon"], "unknown option '--recon' for 'watch' (did you mean '--reconnect'?)"),
                     (["set", "--ttl=5s", "--epheral", "k", "1"], "unknown option '--epheral' for 'set' (did you mean '--ephemeral'?)"),
                     (["--sockte", "/x", "get", "k"], "unknown option '--sockte' (did you mean '--socket'?)"),
                     (["--versoin"], "unknown option '--versoin' (did you mean '--version'?)")]
        for (arguments, message) in cases {
            XCTAssertEqual(try obsctl(nil, arguments), Result(status: 64, stdout: "", stderr: "obsctl: \(message)\nSee 'obsctl --help'.\n"),
                           "\(arguments)")
        }
    }

    /// The caret sits under the daemon's `pos` (Unicode scalars; wide characters take two columns).
    func test_parseError_showsTheExpressionWithACaret() throws {
        let daemon = try Daemon()
        let cases: [([String], String)] = [
            (["define", "total", "$price * "], "expected an expression at 9\n  $price * \n           ^\n"),
            (["eval", "\"日本\" + )"], "expected an expression at 7\n  \"日本\" + )\n           ^\n"),
            (["wait", "$a &&"], "expected an expression at 5\n  $a &&\n       ^\n"),
            (["bind", "a", "b", "--map", "value +"], "expected an expression at 7\n  value +\n         ^\n"),
            (["bind", "a", "b", "--two-way", "--map", "value * 2", "--unmap", "value / "], "expected an expression at 8\n  value / \n          ^\n"),
            (["eval", "1 +\n  (2 *"], "expected an expression at 10\n    (2 *\n        ^\n"),
        ]
        for (arguments, message) in cases {
            XCTAssertEqual(try obsctl(daemon, arguments), Result(status: 1, stdout: "", stderr: "obsctl: parse_error: \(message)"),
                           "\(arguments)")
        }
    }

    func test_defineOverAValueKey_saysReplace_andACycleSaysCycleOnce() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "v", "1"])
        XCTAssertEqual(try obsctl(daemon, ["define", "v", "2"]),
                       Result(status: 1, stdout: "", stderr: "obsctl: exists: 'v' is a value key; define --replace makes it a computed key\n"))
        let file = daemon.write("define v 2\n", to: "defs.obs")
        XCTAssertEqual(try obsctl(daemon, ["apply", file]).stderr,
                       "obsctl: \(file):1: exists: 'v' is a value key; define --replace makes it a computed key\n")
        try obsctl(daemon, ["define", "a", "$b + 1"])
        XCTAssertEqual(try obsctl(daemon, ["define", "b", "$a + 1"]),
                       Result(status: 1, stdout: "", stderr: "obsctl: cycle: b -> a -> b\n"))
        try obsctl(daemon, ["bind", "x", "y"])
        XCTAssertEqual(try obsctl(daemon, ["bind", "y", "x"]).stderr, "obsctl: cycle: x -> y -> x\n")
    }

    func test_globalOptions_withEquals_beforeAndAfterTheCommand() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "k", "1"])
        for arguments in [["--socket=\(daemon.socket)", "--timeout=5s", "get", "k"], ["get", "k", "--socket=\(daemon.socket)", "--timeout=5s"],
                          ["--socket", daemon.socket, "--timeout", "5s", "get", "k"]] {
            XCTAssertEqual(try obsctl(nil, arguments), Result(status: 0, stdout: "1\n", stderr: ""), "\(arguments)")
        }
        XCTAssertEqual(try obsctl(nil, ["--timeout=soon", "get", "k"]).stderr,
                       "obsctl: invalid duration 'soon' for --timeout (expected e.g. 250ms, 5s, 2m, 1h or 10)\nSee 'obsctl --help'.\n")
        XCTAssertEqual(try obsctl(nil, ["--socket="]).stderr, "obsctl: missing command\nSee 'obsctl --help'.\n")
    }

    /// `set k {a:1}` stores a string, as the VALUE rule says, and warns that it did.
    func test_valueThatLooksLikeJSON_isStoredAsAString_withAWarning() throws {
        let daemon = try Daemon()
        let result = try obsctl(daemon, ["set", "k", "{a:1}"])
        XCTAssertEqual(result.status, 0)
        XCTAssertTrue(result.stderr.hasPrefix("obsctl: warning: '{a:1}' is not valid JSON ("), result.stderr)
        XCTAssertTrue(result.stderr.hasSuffix("so it was taken as a string; --string takes it as a string without this warning, --json refuses it\n"), result.stderr)
        XCTAssertEqual(try obsctl(daemon, ["get", "--json", "k"]).stdout, "\"{a:1}\"\n")
        XCTAssertEqual(try obsctl(daemon, ["set", "--string", "k", "{a:1}"]).stderr, "")
        XCTAssertEqual(try obsctl(daemon, ["set", "--json", "k", "{a:1}"]).status, 64)
        XCTAssertTrue(try obsctl(daemon, ["publish", "ch", "[1,"]).stderr.hasPrefix("obsctl: warning: '[1,' is not valid JSON ("))
        for plain in ["hello world", "1.2.3", "-", "x{y}"] {
            XCTAssertEqual(try obsctl(daemon, ["set", "p", plain], stdin: "").stderr, "", plain)
        }
        let file = daemon.write("set a 1\nset b {open\n", to: "defs.obs")
        let applied = try obsctl(daemon, ["apply", file])
        XCTAssertEqual(applied.status, 0)
        XCTAssertTrue(applied.stderr.hasPrefix("obsctl: \(file):2: warning: '{open' is not valid JSON ("), applied.stderr)
    }
}
