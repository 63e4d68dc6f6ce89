import Foundation
import XCTest
import ObsClient
import ObsCore
import TestSupport

/// `obsctl dump` of a state larger than a request line, restored by `obsctl restore` in parts on
/// one connection, still as one transaction; the parts' bound; parts of a connection that closes.
/// The real obsd and obsctl, with a 16 KiB line limit so that a small state needs parts.
final class RestoreInPartsTests: XCTestCase {
    private var configs: [String] = []

    override func tearDown() {
        for path in configs { try? FileManager.default.removeItem(atPath: path) }
    }

    /// An obsd whose request lines are at most 16 KiB, with `extra` settings.
    private func daemon(_ extra: String = "") throws -> Daemon {
        let path = NSTemporaryDirectory() + "obsctl-restore-\(UUID().uuidString).conf"
        try "max_line_bytes = 16K\n\(extra)".write(toFile: path, atomically: true, encoding: .utf8)
        configs.append(path)
        return try Daemon(arguments: ["--config", path])
    }

    /// 600 keys of about 100 bytes (in batches that fit a line), a computed and a binding: a dump
    /// of about 100 KB.
    private func fill(_ daemon: Daemon) throws {
        let connection = try ObsConnection(path: daemon.socket)
        for batch in 0..<12 {
            let ops: [JSONValue] = (0..<50).map { index in
                ["op": "set", "key": .string("k.\(batch).\(index)"), "value": .string(String(repeating: "v", count: 80) + "\(index)")]
            }
            try connection.request("batch", ["ops": .array(ops)])
        }
        try connection.request("set", ["key": "n", "value": 5])
        try connection.request("define", ["key": "double", "expr": "$n * 2"])
        try connection.request("bind", ["from": "n", "to": "copy"])
    }

    private func rev(_ daemon: Daemon) throws -> Int64? {
        try ObsConnection(path: daemon.socket).request("ping")["rev"]?.intValue
    }

    /// What a dump holds apart from revisions: each key's name, kind, value or expression, and the
    /// bindings.
    private func content(_ dump: String) throws -> [String] {
        let object = try XCTUnwrap(JSONValue.parse(Array(dump.utf8)).objectValue)
        let keys = try XCTUnwrap(object["keys"]?.arrayValue).map { key in
            let item = key.objectValue!
            return "\(item["key"]!.encoded) \(item["kind"]!.encoded) \((item["value"] ?? item["expr"])!.encoded)"
        }
        return keys + (object["bindings"]?.arrayValue ?? []).map(\.encoded)
    }

    func test_aDumpLargerThanARequestLine_isRestoredInParts_asOneTransaction() throws {
        let source = try daemon()
        try fill(source)
        let dump = try obsctl(source, ["dump"]).stdout
        XCTAssertGreaterThan(dump.utf8.count, 4 * 16 << 10, "the dump needs several parts")

        let target = try daemon()
        try obsctl(target, ["set", "extra", "1"])
        let watch = try Obsctl(target, ["watch", "**", "--no-initial", "--json"])
        XCTAssertEqual(watch.readLine(), #"{"event":"synced","rev":1}"#)
        let restored = try obsctl(target, ["restore", "--replace"], stdin: dump)
        XCTAssertEqual(restored.status, 0, restored.stderr)
        XCTAssertEqual(try rev(target), 2, "one transaction")
        XCTAssertEqual(try content(obsctl(target, ["dump"]).stdout), try content(dump))
        XCTAssertEqual(try obsctl(target, ["get", "extra"]).status, 1, "--replace removed what the dump does not hold")
        XCTAssertEqual(try obsctl(target, ["get", "double", "copy"]).stdout, "10\n5\n")
        // Every event of the restore carries its one revision.
        var events: [String] = []
        while events.count < 600, let line = watch.readLine() { events.append(line) }
        XCTAssertEqual(events.count, 600)
        XCTAssertEqual(Set(events.compactMap { try? JSONValue.parse(Array($0.utf8)).objectValue?["rev"]?.intValue }), [2])
    }

    /// A dump within what obsctl reads (the daemon's max_restore_bytes and a request line) whose
    /// parts still pass max_restore_bytes: the daemon refuses them, and --split restores it in
    /// two transactions.
    func test_partsOverTheirBound_areDropped_andNothingIsRestored_andSplitRestoresThem() throws {
        let source = try daemon()
        try fill(source)
        let dump = try obsctl(source, ["dump"]).stdout
        // Every part but the last (8 KiB at most) is held: more than the bound, 12 KiB under the dump.
        let bound = dump.utf8.count - (12 << 10)
        let target = try daemon("max_restore_bytes = \(bound)\n")
        let restored = try obsctl(target, ["restore"], stdin: dump)
        XCTAssertEqual(restored.status, 1)
        XCTAssertTrue(restored.stderr.hasPrefix("obsctl: too_large: restore: the parts sent add up to more than \(bound) bytes (max_restore_bytes, every connection's together)"),
                      restored.stderr)
        // It names the way that needs no setting changed.
        XCTAssertTrue(restored.stderr.hasSuffix("; obsctl restore --split restores it in as many transactions as it needs\n"), restored.stderr)
        XCTAssertEqual(try rev(target), 0)
        XCTAssertEqual(try obsctl(target, ["get", "k.0.0"]).status, 1)
        // The daemon goes on, and a restore that fits its bound works.
        let small = #"{"keys":[{"key":"a","kind":"value","value":1}],"bindings":[]}"#
        XCTAssertEqual(try obsctl(target, ["restore"], stdin: small).status, 0)
        XCTAssertEqual(try obsctl(target, ["get", "a"]).stdout, "1\n")
        try obsctl(target, ["del", "a"])
        let split = try obsctl(target, ["restore", "--split"], stdin: dump)
        XCTAssertEqual(split.status, 0, split.stderr)
        XCTAssertTrue(split.stderr.hasSuffix(" in 2 transactions\n"), split.stderr)
        XCTAssertEqual(try content(obsctl(target, ["dump"]).stdout), try content(dump))
    }

    /// One value of the dump over the daemon's max_value_bytes: refused `too_large`, with no
    /// pointer to --split, which cannot make that value smaller.
    func test_aValueOverItsLimit_isRefused_withoutPointingToSplit() throws {
        let target = try daemon("max_value_bytes = 100\n")
        let big = String(repeating: "x", count: 200)
        let dump = #"{"keys":[{"key":"a","kind":"value","value":1},{"key":"b","kind":"value","value":"\#(big)"}],"bindings":[]}"#
        let restored = try obsctl(target, ["restore"], stdin: dump)
        XCTAssertEqual(restored.status, 1)
        XCTAssertTrue(restored.stderr.hasPrefix("obsctl: too_large: value of 202 bytes is over the limit of 100"), restored.stderr)
        XCTAssertFalse(restored.stderr.contains("--split"), restored.stderr)
        XCTAssertEqual(try rev(target), 0)
    }

    /// What obsctl reads of a dump is bounded by the JSON, not by the whitespace around its
    /// tokens: a pretty-printed dump larger than the bound whose JSON is within it is restored.
    func test_aPrettyPrintedDump_isBoundedByItsJSON_notItsWhitespace() throws {
        let source = try daemon()
        try fill(source)
        let dump = try obsctl(source, ["dump"]).stdout
        let object = try JSONSerialization.jsonObject(with: Data(dump.utf8))
        let pretty = try XCTUnwrap(String(data: JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted]), encoding: .utf8))
        let target = try daemon("max_restore_bytes = \(dump.utf8.count)\n")
        XCTAssertGreaterThan(pretty.utf8.count, dump.utf8.count + (16 << 10), "more than obsctl reads, whitespace counted")
        let restored = try obsctl(target, ["restore", "--replace"], stdin: pretty)
        XCTAssertEqual(restored.status, 0, restored.stderr)
        XCTAssertEqual(try rev(target), 1, "one transaction")
        XCTAssertEqual(try content(obsctl(target, ["dump"]).stdout), try content(dump))
        // Whitespace that separates tokens still does: `1 2` is no number 12.
        let separated = try obsctl(target, ["restore"], stdin: #"{"keys":[{"key":"a","kind":"value","value":1 2}]}"#)
        XCTAssertEqual(separated.status, 64, separated.stderr)
    }

    /// The bound is for every connection's parts together, so that many connections cannot
    /// multiply it; a connection's parts leave it when the connection closes.
    func test_theBound_countsEveryConnectionsParts_untilTheyClose() throws {
        let target = try daemon("max_restore_bytes = 32K\n")
        let item: JSONValue = ["key": "a", "kind": "value", "value": .string(String(repeating: "v", count: 12_000))]
        var first: ObsConnection? = try ObsConnection(path: target.socket)
        try first!.request("restore", ["keys": [item], "more": true])
        let second = try ObsConnection(path: target.socket)
        try second.request("restore", ["keys": [item], "more": true])
        XCTAssertThrowsError(try second.request("restore", ["keys": [item], "more": true])) { error in
            XCTAssertTrue("\(error)".contains("too_large"), "\(error)")
        }
        // The second's parts were dropped; the first's still count until it closes.
        try second.request("restore", ["keys": [item], "more": true])
        XCTAssertThrowsError(try second.request("restore", ["keys": [item], "more": true]))
        first = nil
        try second.request("ping")
        var parts: JSONValue?
        for _ in 0..<1000 {
            // The daemon sees the first connection's end on its next turn.
            if let answer = try? second.request("restore", ["keys": [item], "more": true]) { parts = answer["parts"]; break }
            usleep(10_000)
        }
        XCTAssertEqual(parts, 1)
        XCTAssertEqual(try second.request("restore", ["keys": [], "more": true])["parts"], 2)
        try second.request("restore", ["keys": []])
        XCTAssertEqual(try rev(target), 1)
        XCTAssertEqual(try obsctl(target, ["get", "a"]).stdout.count, 12_001)
    }

    func test_partsOfAConnectionThatCloses_areNotRestored_andPartsAreThatConnectionsOwn() throws {
        let target = try daemon()
        var first: ObsConnection? = try ObsConnection(path: target.socket)
        let part = try first!.request("restore", ["keys": [["key": "a", "kind": "value", "value": 1]], "more": true])
        XCTAssertEqual(part["parts"], 1)
        XCTAssertEqual(part["items"], 1)
        // Another connection's restore does not take the first one's parts.
        let other = try ObsConnection(path: target.socket)
        try other.request("restore", ["keys": [["key": "b", "kind": "value", "value": 2]]])
        XCTAssertEqual(try obsctl(target, ["get", "a"]).status, 1)
        XCTAssertEqual(try obsctl(target, ["get", "b"]).stdout, "2\n")
        first = nil
        XCTAssertEqual(try rev(target), 1)
        XCTAssertEqual(try obsctl(target, ["get", "a"]).status, 1)
        // With its last part, a connection restores every part at once.
        try other.request("restore", ["keys": [["key": "c", "kind": "value", "value": 3]], "more": true])
        try other.request("restore", ["keys": [["key": "d", "kind": "value", "value": 4]], "replace": true])
        XCTAssertEqual(try rev(target), 2)
        XCTAssertEqual(try obsctl(target, ["get", "c", "d"]).stdout, "3\n4\n")
        XCTAssertEqual(try obsctl(target, ["get", "b"]).status, 1, "replace")
    }
}
