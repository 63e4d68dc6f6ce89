// Hostile input over the real socket: random bytes, mutated valid requests and well-formed ones,
// on many connections at once; and every field of every operation with every wrong type. Every
// line that is not blank gets exactly one answer with a stable error code, and obsd keeps running.
import Foundation
import Glibc
@testable import ObsCore
import TestSupport
import XCTest

final class HostileInputTests: XCTestCase {
    /// Requests of every operation, for mutating.
    private static let corpus = [
        #"{"id":1,"op":"set","key":"a.b","value":{"x":[1,2.5,"s",null,true]},"ttl_ms":60000}"#,
        #"{"id":2,"op":"get","key":"a.b"}"#, #"{"id":3,"op":"get","pattern":"a.**"}"#,
        #"{"id":4,"op":"incr","key":"n","by":2}"#, #"{"id":5,"op":"delete","key":"a.b"}"#,
        #"{"id":6,"op":"define","key":"c","expr":"($n ?? 0) * 2 + len(keys('a.*'))"}"#,
        #"{"id":7,"op":"bind","from":"n","to":"m","map":"value + 1","two_way":false}"#,
        #"{"id":8,"op":"unbind","to":"m"}"#, #"{"id":9,"op":"publish","channel":"ch.x","payload":[1,{"a":"b"}]}"#,
        #"{"id":10,"op":"batch","ops":[{"op":"set","key":"p","value":1},{"op":"incr","key":"p"}]}"#,
        #"{"id":11,"op":"watch","keys":["a.*","n"],"mode":"latest","throttle_ms":10}"#, #"{"id":12,"op":"unwatch","watch":1}"#,
        #"{"id":13,"op":"list","pattern":"**"}"#, #"{"id":14,"op":"describe","key":"c"}"#, #"{"id":15,"op":"graph"}"#,
        #"{"id":16,"op":"eval","expr":"now() > 0 ? 'yes' : 'no'"}"#, #"{"id":17,"op":"stats"}"#, #"{"id":18,"op":"ping"}"#,
        #"{"id":19,"op":"hello","client":"fuzz","protocol":1}"#, #"{"id":20,"op":"dump"}"#,
        #"{"id":21,"op":"set","key":"e","value":"\u00e9\ud83d\ude00","ephemeral":true,"if_rev":0}"#,
        #"{"id":22,"op":"restore","keys":[{"key":"r","kind":"value","value":1}],"bindings":[]}"#,
    ]

    /// One generated line (no "\n" inside).
    private static func line(_ random: inout SplitMix64) -> [UInt8] {
        switch Int.random(in: 0..<10, using: &random) {
        case 0..<3:
            return (0..<Int.random(in: 0...120, using: &random)).map { _ in
                let byte = UInt8.random(in: 0...255, using: &random)
                return byte == 0x0A ? 0x0D : byte
            }
        case 3..<8:
            var bytes = Array(corpus.randomElement(using: &random)!.utf8)
            for _ in 0..<Int.random(in: 1...3, using: &random) where !bytes.isEmpty {
                let at = Int.random(in: 0..<bytes.count, using: &random)
                switch Int.random(in: 0..<5, using: &random) {
                case 0: bytes[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &random)
                case 1: bytes.remove(at: at)
                case 2: bytes.insert(Array("{}[]\",:\\ 0-e.9tfnu\r\t".utf8).randomElement(using: &random)!, at: at)
                case 3: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + 12)], at: at)
                default: bytes = Array(bytes.prefix(at))
                }
            }
            return bytes.map { $0 == 0x0A ? 0x20 : $0 }
        case 8:
            return Array(["", "   ", "\t", "\r", "\r\r", " \r", "{}", "[]", "null", "1e400", "NaN", "{\"op\":1}"]
                .randomElement(using: &random)!.utf8)
        default:
            return Array(corpus.randomElement(using: &random)!.utf8)
        }
    }

    /// Whether the protocol ignores the line: blank once one "\r" at its end is dropped.
    private static func isBlank(_ line: [UInt8]) -> Bool {
        let body = line.last == 0x0D ? line.dropLast() : line[...]
        return body.allSatisfy { $0 == 0x20 || $0 == 0x09 }
    }

    func test_fuzzedFramingAndDecoding_onManyConnections_everyLineAnswered() throws {
        let seed = Hostile.seed()
        let connections = Hostile.pick(quick: 8, long: 32)
        let duration = Hostile.pick(quick: 8.0, long: 300.0)
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox, ["--memory"])
        let before = obsd.residentKiB
        let tally = Tally()
        let group = DispatchGroup()
        let deadline = Date().addingTimeInterval(duration)
        for connection in 0..<connections {
            let client = try Client(sandbox.socket, timeout: 30)
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                var random = SplitMix64(seed: seed &+ UInt64(connection))
                while Date() < deadline {
                    let lines = (0..<50).map { _ in Self.line(&random) }
                    let expected = lines.filter { !Self.isBlank($0) }.count
                    guard client.send(lines.flatMap { $0 + [0x0A] }) else { return tally.count("send failed") }
                    tally.count("lines", by: lines.count)
                    var answers = 0
                    while answers < expected {
                        guard let text = client.readLine() else { return tally.count("unanswered", by: expected - answers) }
                        let answer = json(text)
                        if answer["event"] != nil { continue }
                        answers += 1
                        guard let ok = answer["ok"] as? Bool else {
                            tally.count("not a response")
                            continue
                        }
                        let code = ok ? "ok" : (errorCode(text) ?? "no code")
                        tally.count(code)
                        if !ok, !ObsError.Code.all.map(\.rawValue).contains(code) { tally.count("unknown code") }
                    }
                }
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + duration + 120), .success)
        XCTAssertEqual(tally["unanswered"], 0)
        XCTAssertEqual(tally["send failed"], 0)
        XCTAssertEqual(tally["not a response"], 0)
        XCTAssertEqual(tally["unknown code"], 0)
        XCTAssertEqual(tally["internal"], 0, "no input is a bug")
        XCTAssertEqual(try Client(sandbox.socket).request(#"{"op":"ping"}"#)?["ok"] as? Bool, true, "obsd is alive")
        let codes = tally.all.filter { !["lines"].contains($0.key) }.sorted { $0.value > $1.value }
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        Hostile.report("fuzzed lines", seed: seed,
                       "\(tally["lines"]) lines on \(connections) connections in \(Int(duration)) s: \(codes); RSS \(before / 1024) -> \(obsd.residentKiB / 1024) MiB")
    }

    /// Every field of every operation, given each JSON type it does not accept: `bad_request`
    /// naming the field, every time.
    func test_everyFieldOfEveryOperation_withEveryWrongType_isBadRequestNamingIt() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox, ["--memory"])
        let client = try Client(sandbox.socket)
        let samples: [String: String] = ["string": #""k""#, "integer": "3", "negative": "-3", "double": "2.5", "bool": "true",
                                         "null": "null", "array": "[]", "object": "{}"]
        /// A valid value of each declared type, for the other fields.
        func valid(_ type: FieldType) -> String {
            switch type {
            case .string: #""k""#
            case .bool: "true"
            case .integer: "0"
            case .number: "1"
            case .array: "[]"
            case .object: "{}"
            case .any: "1"
            }
        }
        var sent = 0
        var failures: [String] = []
        for operation in Operations.all {
            for field in operation.fields where field.type != .any {
                for (name, sample) in samples where !field.type.accepts((try? JSONValue.parse(sample)) ?? .null) {
                    var members = [#""op":"\#(operation.name)""#]
                    for other in operation.fields where other.required || other.name == field.name {
                        members.append(#""\#(other.name)":\#(other.name == field.name ? sample : valid(other.type))"#)
                    }
                    let request = "{" + members.joined(separator: ",") + "}"
                    let answer = client.request(request)
                    sent += 1
                    let message = (answer?["error"] as? [String: Any])?["message"] as? String ?? ""
                    if (answer?["error"] as? [String: Any])?["code"] as? String != "bad_request" || !message.contains("'\(field.name)'") {
                        failures.append("\(request) (\(name)) -> \(answer.map { "\($0)" } ?? "no answer")")
                    }
                }
            }
        }
        for id in ["[]", "{}", #"[1,{"a":2}]"#] {
            sent += 1
            if errorCode(client.send(#"{"id":\#(id),"op":"ping"}"# + "\n") ? client.readLine() : nil) != "bad_request" { failures.append("id \(id)") }
        }
        XCTAssertEqual(failures, [])
        XCTAssertEqual(client.request(#"{"op":"ping"}"#)?["ok"] as? Bool, true)
        XCTAssertTrue(obsd.process.isRunning)
        Hostile.report("wrong types", "\(Operations.all.count) operations, \(sent) requests with one field of a wrong type: \(sent - failures.count) answered bad_request naming the field")
    }
}
