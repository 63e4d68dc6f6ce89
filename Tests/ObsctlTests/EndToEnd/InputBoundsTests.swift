import Foundation
import Glibc
import ObsClient
import ObsCore
import XCTest

/// obsctl holds no more of its input than the daemon could take: a line of `set -`/`publish -`
/// up to a request line, a definitions file up to 64 MiB, a dump up to what one restore holds.
/// Past that it stops with `too_large` (exit 1) and changes nothing more. The real obsd and
/// obsctl; an endless input comes from `cat /dev/zero`, and obsctl runs under a 1 GiB
/// address-space limit, so that holding it all ends in a crash rather than in a slow machine.
/// The long timeouts only guard against a hang.
final class InputBoundsTests: XCTestCase {
    /// `command`, an obsctl command line, run with what `input` (a shell command) writes on its
    /// stdin and at most 1 GiB of address space. The shell becomes obsctl (exec), so that the
    /// hang guard's kill reaches obsctl itself, and the input's writer then ends by EPIPE. What the
    /// writer says of that goes to /dev/null: with SIGPIPE ignored, `cat` reports the broken pipe on
    /// stderr, which is not obsctl's. (The test process ignores SIGPIPE once a test ran a daemon in
    /// it, InProcessDaemonTests say; its children inherit that, and a shell cannot undo it.)
    private func bounded(_ daemon: Daemon, _ input: String, _ command: String) throws -> Result {
        try Obsctl(daemon, [], shell: "ulimit -v 1048576 && exec \"$OBSCTL\" \(command) < <({ \(input); } 2>/dev/null)").finish(timeout: 120)
    }

    private func rev(_ daemon: Daemon) throws -> Int64? {
        try ObsConnection(path: daemon.socket).request("ping")["rev"]?.intValue
    }

    func test_setFromStdin_aLineLongerThanARequestLine_stopsThere_afterEveryLineBeforeIt() throws {
        let daemon = try Daemon(config: "max_line_bytes = 64K\n")
        let tooLong = { (line: Int) in
            "obsctl: too_large: set: line \(line) of stdin is more than 65536 bytes, the daemon's longest request line (max_line_bytes); stopped there, every line before it was sent\n"
        }
        // An endless line after two.
        let endless = try bounded(daemon, "{ printf 'one\\ntwo\\n'; cat /dev/zero; }", "set k -")
        XCTAssertEqual(endless, Result(status: 1, stdout: "", stderr: tooLong(3)))
        XCTAssertEqual(try obsctl(daemon, ["get", "k"]).stdout, "two\n")
        XCTAssertEqual(try rev(daemon), 2, "each line before it set once")

        // A long line that ends: what follows it is not read.
        let long = try bounded(daemon, "{ printf 'three\\n'; head -c 200000 /dev/zero; printf '\\nfour\\n'; }", "set k -")
        XCTAssertEqual(long, Result(status: 1, stdout: "", stderr: tooLong(2)))
        XCTAssertEqual(try obsctl(daemon, ["get", "k"]).stdout, "three\n")
        XCTAssertEqual(try rev(daemon), 3)

        // A line within the bound whose request is not: the daemon's answer, naming the line.
        let request = try bounded(daemon, "{ printf 'five\\n'; head -c 65530 /dev/zero | tr '\\0' x; printf '\\nsix\\n'; }", "set k -")
        XCTAssertEqual(request, Result(status: 1, stdout: "", stderr: "obsctl: too_large: set: line 2 of stdin: request line longer than 65536 bytes\n"))
        XCTAssertEqual(try obsctl(daemon, ["get", "k"]).stdout, "five\n")

        // Lines that fit go, long or short, \r\n or \n.
        let fits = try bounded(daemon, "{ printf 'seven\\r\\n'; head -c 60000 /dev/zero | tr '\\0' y; printf '\\r\\n'; }", "set k -")
        XCTAssertEqual(fits, Result(status: 0, stdout: "", stderr: ""))
        XCTAssertEqual(try obsctl(daemon, ["get", "k"]).stdout, String(repeating: "y", count: 60000) + "\n")
        XCTAssertEqual(try rev(daemon), 6)
    }

    func test_publishFromStdin_anEndlessLine_stopsThere_afterTheLinesBeforeIt() throws {
        let daemon = try Daemon(config: "max_line_bytes = 64K\n")
        let watch = try Obsctl(daemon, ["watch", "news", "-n", "1", "--format", "{payload}"])
        daemon.waitForWatches(1)
        let endless = try bounded(daemon, "{ printf 'before\\n'; cat /dev/zero; }", "publish news -")
        XCTAssertEqual(endless, Result(status: 1, stdout: "", stderr: "obsctl: too_large: publish: line 2 of stdin is more than 65536 bytes, the daemon's longest request line (max_line_bytes); stopped there, every line before it was sent\n"))
        XCTAssertEqual(watch.finish(), Result(status: 0, stdout: "before\n", stderr: ""))
    }

    /// `set --ephemeral` holds its key until stdin closes, reading and dropping what comes: a
    /// line without end (2 GiB of zero bytes) is never held, and does not end the wait before
    /// stdin does (Swift's readLine, out of memory, returned nil as at the end). The writer
    /// marks that it wrote it all; obsctl sees the end of stdin only after that.
    func test_setEphemeral_readsStdinToItsEnd_withoutHoldingIt() throws {
        let daemon = try Daemon()
        let written = daemon.root + "/written"
        let result = try bounded(daemon, "head -c 2147483648 /dev/zero && touch '\(written)'", "set --ephemeral e 1")
        XCTAssertEqual(result, Result(status: 0, stdout: "", stderr: ""))
        XCTAssertTrue(FileManager.default.fileExists(atPath: written), "obsctl read stdin to its end")
        XCTAssertEqual(try rev(daemon), 2, "the key was set, then went with obsctl's connection")
        XCTAssertEqual(try obsctl(daemon, ["get", "e"]).status, 1)
    }

    func test_apply_aDefinitionsFileOverItsBound_isRefused_withoutReadingItAll() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "kept", "1"])
        let endless = try bounded(daemon, "cat /dev/zero", "apply -")
        XCTAssertEqual(endless, Result(status: 1, stdout: "", stderr: "obsctl: too_large: apply: the definitions file on stdin is more than the 67108864 bytes read at most\n"))
        // A regular file says its size: refused before a byte is read (a sparse file: no data).
        let path = daemon.root + "/big.obs"
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: nil))
        XCTAssertEqual(truncate(path, 65 << 20), 0)
        let big = try bounded(daemon, "true", "apply '\(path)'")
        XCTAssertEqual(big, Result(status: 1, stdout: "", stderr: "obsctl: too_large: apply: definitions file \(path) is 68157440 bytes, more than the 67108864 bytes read at most\n"))
        XCTAssertEqual(try rev(daemon), 1, "nothing applied")
    }

    func test_restore_aDumpOverWhatOneRestoreHolds_isRefused_withoutReadingItAll_andChangesNothing() throws {
        let daemon = try Daemon(config: "max_line_bytes = 16K\nmax_restore_bytes = 32K\n")
        try obsctl(daemon, ["set", "kept", "1"])
        let before = try obsctl(daemon, ["dump"]).stdout
        let refusal = Result(status: 1, stdout: "", stderr: "obsctl: too_large: restore: the dump on stdin is more than the 49152 bytes read at most: the daemon's max_restore_bytes and max_line_bytes together, the most one restore holds\n")
        for (input, command) in [("cat /dev/zero", "restore --replace"), ("cat /dev/zero", "restore --split"),
                                 ("head -c 10000000 /dev/zero", "restore --replace")] {
            XCTAssertEqual(try bounded(daemon, input, command), refusal, "\(input) | obsctl \(command)")
        }
        XCTAssertEqual(try obsctl(daemon, ["dump"]).stdout, before)
        XCTAssertEqual(try rev(daemon), 1)
    }
}
