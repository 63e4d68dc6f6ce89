import Foundation
import TestSupport
import XCTest

/// Output that other programs read: one event is one line, JSON placeholders stay valid JSON,
/// and `get` keeps line N for key N.
final class PipelineOutputTests: XCTestCase {
    static let awkward = "say \"hi\"\\\nline two\r\ttab"

    func test_valuesAndFormat_neverPrintOneEventOnTwoLines() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "--string", "k", Self.awkward])
        let encoded = "\"say \\\"hi\\\"\\\\\\nline two\\r\\ttab\""
        XCTAssertEqual(try obsctl(daemon, ["watch", "k", "--values", "--initial-only"]).stdout, encoded + "\n")
        XCTAssertEqual(try obsctl(daemon, ["watch", "k", "--format", "{key}={new}", "--initial-only"]).stdout, "k=\(encoded)\n")
        XCTAssertEqual(try obsctl(daemon, ["get", "k"]).stdout, encoded + "\n")
        XCTAssertEqual(try obsctl(daemon, ["eval", "$k"]).stdout, encoded + "\n")
        // Without a line break a string still prints raw.
        try obsctl(daemon, ["set", "plain", "say \"hi\""])
        XCTAssertEqual(try obsctl(daemon, ["watch", "plain", "--values", "--initial-only"]).stdout, "say \"hi\"\n")
        // The environment of `-- COMMAND` has room for line breaks: OBS_VALUE stays raw.
        let raw = try obsctl(daemon, ["watch", "k", "--initial-only", "--", "sh", "-c", "printf %s \"$OBS_VALUE\""])
        XCTAssertEqual(raw, Result(status: 0, stdout: Self.awkward, stderr: ""))
    }

    /// `{NAME:json}` output is valid JSON for every value and every event kind, as waybar's
    /// `return-type: json` needs, and a missing field is `null`.
    func test_jsonPlaceholders_keepEveryLineValidJSON() throws {
        let daemon = try Daemon()
        let format = "{{\"text\":{new:json},\"tooltip\":{key:json},\"old\":{old:json},\"event\":{event:json},\"rev\":{rev:json}}}"
        let watch = try Obsctl(daemon, ["watch", "k", "--format", format])
        daemon.waitForWatches(1)
        try obsctl(daemon, ["set", "--string", "k", Self.awkward])
        try obsctl(daemon, ["set", "k", "{\"n\":[1,2]}"])
        try obsctl(daemon, ["set", "k", "42"])
        try obsctl(daemon, ["del", "k"])
        let lines = watch.readLines(4)
        XCTAssertEqual(lines.count, 4)
        var texts: [Any] = []
        for line in lines {
            let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8), options: [.fragmentsAllowed]) as? [String: Any], line)
            XCTAssertEqual(object["tooltip"] as? String, "k")
            texts.append(object["text"] ?? "absent")
        }
        XCTAssertEqual(texts[0] as? String, Self.awkward)
        XCTAssertEqual((texts[1] as? [String: Any])?["n"] as? [Int], [1, 2])
        XCTAssertEqual(texts[2] as? Int, 42)
        XCTAssertTrue(texts[3] is NSNull, "a delete has no new value: null")
        XCTAssertEqual(lines[3], "{\"text\":null,\"tooltip\":\"k\",\"old\":42,\"event\":\"delete\",\"rev\":4}")
        kill(watch.process.processIdentifier, SIGTERM)
        _ = watch.finish()
    }

    /// `get a b c` with `b` missing: an empty line for `b`, so `read` gets each value in its place,
    /// and status 1.
    func test_get_keepsLinePositions_forRead() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "a", "one"])
        try obsctl(daemon, ["set", "c", "three"])
        let script = "\"$OBSCTL\" get a b c | { read -r x; read -r y; read -r z; echo \"$x|$y|$z\"; }; echo \"status ${PIPESTATUS[0]}\""
        let result = try Obsctl(daemon, [], shell: script).finish()
        XCTAssertEqual(result, Result(status: 0, stdout: "one||three\nstatus 1\n", stderr: "obsctl: not_found: no key 'b'\n"))
        XCTAssertEqual(try obsctl(daemon, ["get", "--json", "b", "a"]).stdout, "\n\"one\"\n")
    }

    /// A reader that leaves while no event comes (`grep -m1`, `head -n 1` on the snapshot) ends the
    /// watch then, not at the next event, which may never come: the pipeline finishes.
    func test_watch_readerGoneWithoutAnotherEvent_endsThePipeline() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "door", "open"])
        let pipeline = try Obsctl(daemon, [], shell: "\"$OBSCTL\" watch door --values | head -n 1; echo \"status ${PIPESTATUS[0]}\"")
        // head printed the snapshot's line, so the watch was there; now head is gone.
        XCTAssertEqual(pipeline.readLine(), "open")
        daemon.waitForWatches(0)
        // An event ends a watch that did not notice, so the test fails rather than hangs.
        try obsctl(daemon, ["set", "door", "closed"])
        XCTAssertEqual(pipeline.finish(), Result(status: 0, stdout: "status 0\n", stderr: ""))
    }

    /// Output that cannot be written (a full disk) is an error, not a success with a cut file:
    /// `obsctl stats > f.tmp && mv f.tmp f` must not move it.
    func test_stdoutThatCannotBeWritten_exits1_withTheReason() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "a", "1"])
        let full = "obsctl: cannot write to stdout: No space left on device\n"
        for command in ["get a", "stats --format prometheus", "watch a --initial-only"] {
            let result = try Obsctl(daemon, [], shell: "\"$OBSCTL\" \(command) > /dev/full; echo \"status $?\"").finish()
            XCTAssertEqual(result, Result(status: 0, stdout: "status 1\n", stderr: full), command)
        }
    }

    /// A closed stdout or stdin (`>&-`, `<&-`) stays closed: the daemon's socket does not take
    /// its place, so a line is not sent to the daemon as a request (and lost, status 0), nor does
    /// `set k -` read the daemon's answers as its input (and hang).
    func test_closedStandardDescriptors_areNotTakenByTheSocket() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "a", "1"])
        let closed = "obsctl: cannot write to stdout: Bad file descriptor\n"
        for command in ["get a", "watch a --initial-only"] {
            // `timeout`: without the fix the watch waits for an answer that never comes.
            let result = try Obsctl(daemon, [], shell: "timeout 120 \"$OBSCTL\" \(command) >&-; echo \"status $?\"").finish()
            XCTAssertEqual(result, Result(status: 0, stdout: "status 1\n", stderr: closed), command)
        }
        let set = try Obsctl(daemon, [], shell: "timeout 120 \"$OBSCTL\" set b - <&-; echo \"status $?\"").finish()
        XCTAssertEqual(set, Result(status: 0, stdout: "status 0\n", stderr: ""))
        XCTAssertEqual(try obsctl(daemon, ["list"]).stdout, "a  value\n")
    }

    /// Bytes that are not UTF-8 (a Latin-1 file, a sensor's garbage) are refused, naming the line,
    /// not stored with U+FFFD in their place: what is stored is what was given, or nothing.
    func test_invalidUTF8_isRefused_notReplaced() throws {
        let daemon = try Daemon()
        let file = daemon.root + "/latin1.obs"
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data([UInt8]("set a ok\nset b caf".utf8) + [0xE9, 0x0A])))
        XCTAssertEqual(try obsctl(daemon, ["apply", file]),
                       Result(status: 64, stdout: "", stderr: "obsctl: \(file):2: not valid UTF-8\nSee 'obsctl --help'.\n"))
        XCTAssertEqual(try obsctl(daemon, ["list"]).stdout, "")
        let set = try Obsctl(daemon, [], shell: "printf 'one\\r\\ncaf\\351\\nthree\\n' | \"$OBSCTL\" set t -; echo \"status $?\"").finish()
        XCTAssertEqual(set, Result(status: 0, stdout: "status 64\n",
                                   stderr: "obsctl: set: line 2 of stdin is not valid UTF-8\nSee 'obsctl --help'.\n"))
        XCTAssertEqual(try obsctl(daemon, ["get", "t"]).stdout, "one\n")
    }

    /// An argument that is not UTF-8 is refused, not stored with U+FFFD in place of its bytes.
    func test_argumentNotUTF8_isRefused() throws {
        let daemon = try Daemon()
        let result = try Obsctl(daemon, [], shell: "\"$OBSCTL\" set c $'caf\\xe9'; echo \"status $?\"").finish()
        XCTAssertEqual(result, Result(status: 0, stdout: "status 64\n",
                                      stderr: "obsctl: argument 3 is not valid UTF-8\nSee 'obsctl --help'.\n"))
        XCTAssertEqual(try obsctl(daemon, ["list"]).stdout, "")
        XCTAssertEqual(try obsctl(daemon, ["set", "c", "café"]).status, 0)
        XCTAssertEqual(try obsctl(daemon, ["get", "c"]).stdout, "café\n")
    }
}
