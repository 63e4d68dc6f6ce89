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
}
