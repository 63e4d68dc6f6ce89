import ObsCore
import XCTest

/// Every error code of docs/protocol.md, provoked through a session.
final class SessionErrorTests: XCTestCase {
    func test_badJSON_nonObjectsAndBrokenLinesAnswerWithNullID() {
        let client = Harness().connect()
        for line in ["[1,2]", "{\"op\":", "NaN", "{\"a\":1e400}", "42"] {
            let lines = client.send(line)
            XCTAssertEqual(lines.count, 1, line)
            XCTAssertTrue(lines[0].hasPrefix(#"{"id":null,"ok":false,"error":{"code":"bad_json","message":"#), lines[0])
        }
        XCTAssertEqual(client.request(#"{"op":"ping"}"#)["ok"], true)
    }

    func test_blankLinesAreIgnored() {
        let client = Harness().connect()
        XCTAssertEqual(client.send(""), [])
        XCTAssertEqual(client.send("   "), [])
        XCTAssertEqual(client.send("\r"), [])
    }

    func test_crlfIsAccepted() {
        let client = Harness().connect()
        XCTAssertEqual(client.send("{\"id\":1,\"op\":\"ping\"}\r"), [#"{"id":1,"ok":true,"rev":0}"#])
    }

    func test_badRequest_namesTheField() {
        let client = Harness().connect()
        XCTAssertEqual(client.send(#"{"id":1}"#), [#"{"id":1,"ok":false,"error":{"code":"bad_request","message":"missing field 'op'"}}"#])
        XCTAssertEqual(client.send(#"{"id":2,"op":3}"#), [#"{"id":2,"ok":false,"error":{"code":"bad_request","message":"field 'op' must be a string"}}"#])
        XCTAssertEqual(client.send(#"{"id":3,"op":"set","value":1}"#), [#"{"id":3,"ok":false,"error":{"code":"bad_request","message":"missing field 'key'"}}"#])
        XCTAssertEqual(client.send(#"{"id":4,"op":"set","key":1,"value":1}"#), [#"{"id":4,"ok":false,"error":{"code":"bad_request","message":"field 'key' must be a string"}}"#])
        XCTAssertEqual(errorCode(client.request(#"{"op":"set","key":"a","value":1,"ttl_ms":-5}"#)), "bad_request")
    }

    func test_unknownFieldsAreIgnoredAndUnknownOpsRejected() {
        let client = Harness().connect()
        XCTAssertEqual(client.send(#"{"id":1,"op":"ping","colour":"blue"}"#), [#"{"id":1,"ok":true,"rev":0}"#])
        XCTAssertEqual(client.send(#"{"id":"x","op":"fly"}"#), [#"{"id":"x","ok":false,"error":{"code":"unknown_op","message":"unknown op 'fly'"}}"#])
    }

    func test_badKey() {
        let client = Harness().connect()
        for key in ["", "a..b", ".a", "a.", "a b", "ü", String(repeating: "k", count: 257)] {
            XCTAssertEqual(errorCode(client.request(JSONValue.object(["op": "set", "key": .string(key), "value": 1]).encoded)), "bad_key", key)
        }
        XCTAssertEqual(client.request(JSONValue.object(["op": "set", "key": .string(String(repeating: "k", count: 256)), "value": 1]).encoded)["ok"], true)
        XCTAssertEqual(client.request(#"{"op":"set","key":"net.wifi-5g.ssid_2","value":1}"#)["ok"], true)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","pattern":"a.***"}"#)), "bad_key")
    }

    func test_badValue_notFound_exists_readOnly_conflict_typeMismatch() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"n","value":9223372036854775807}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"incr","key":"n"}"#)), "bad_value")
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"missing"}"#)), "not_found")
        XCTAssertEqual(errorCode(client.request(#"{"op":"define","key":"n","expr":"1"}"#)), "exists")
        client.request(#"{"op":"define","key":"c","expr":"1"}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"set","key":"c","value":1}"#)), "read_only")
        XCTAssertEqual(errorCode(client.request(#"{"op":"incr","key":"c"}"#)), "read_only")
        XCTAssertEqual(errorCode(client.request(#"{"op":"set","key":"n","value":1,"if_rev":7}"#)), "conflict")
        client.request(#"{"op":"set","key":"s","value":[1]}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"incr","key":"s"}"#)), "type_mismatch")
    }

    func test_parseError_evalError_cycle() {
        let client = Harness().connect()
        let parse = client.send(#"{"id":1,"op":"define","key":"x","expr":"1 + * 2"}"#)
        XCTAssertTrue(parse[0].contains(#""code":"parse_error""#) && parse[0].contains(#""pos":"#), parse[0])
        client.request(#"{"op":"define","key":"x","expr":"1 / $zero"}"#)
        client.request(#"{"op":"set","key":"zero","value":0}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"x"}"#)), "eval_error")
        client.request(#"{"op":"define","key":"p","expr":"$q"}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"define","key":"q","expr":"$p"}"#)), "cycle")
    }

    func test_tooLarge_lineClosesTheConnection() {
        var configuration = StoreConfiguration()
        configuration.maxLineBytes = 64
        let client = Harness(configuration: configuration).connect()
        let line = #"{"op":"set","key":"a","value":""# + String(repeating: "x", count: 64) + #""}"#
        let lines = client.send(line)
        XCTAssertEqual(lines.count, 1)
        XCTAssertTrue(lines[0].contains(#""code":"too_large""#))
        XCTAssertTrue(client.session.wantsClose)
        XCTAssertEqual(client.send(#"{"op":"ping"}"#), [])
    }

    /// The session frames what it receives: a request cut anywhere waits for its end, lines
    /// before an overlong one are answered, and nothing after it is read.
    func test_framing_requestsCutAnywhere_andLinesBeforeAnOverlongOne() {
        var configuration = StoreConfiguration()
        configuration.maxLineBytes = 64
        let client = Harness(configuration: configuration).connect()
        let bytes = Array(#"{"id":1,"op":"ping"}"#.utf8) + [0x0D, 0x0A] + Array("  \n".utf8) + Array(#"{"id":2,"op":"ping"}"#.utf8) + [0x0A]
            + Array(repeating: UInt8(ascii: "x"), count: 100) + [0x0A] + Array(#"{"id":3,"op":"ping"}"#.utf8) + [0x0A]
        for byte in bytes { [byte].withUnsafeBytes { client.session.receive(bytes: $0) } }
        let lines = client.output.take()
        XCTAssertEqual(lines.count, 3, "\(lines)")
        XCTAssertTrue(lines[0].hasPrefix(#"{"id":1,"ok":true"#))
        XCTAssertTrue(lines[1].hasPrefix(#"{"id":2,"ok":true"#))
        XCTAssertTrue(lines[2].contains(#""code":"too_large""#))
        XCTAssertTrue(client.session.wantsClose)
    }

    /// One "\r" before the newline is the line's end; a second one is part of the line, which is
    /// then not JSON (and not blank).
    func test_framing_onlyOneCarriageReturnIsStripped() {
        let client = Harness().connect()
        XCTAssertEqual(client.send("\r\r\n").count, 1)
        XCTAssertEqual(errorCode(client.request("\r\r\n")), "bad_json")
        XCTAssertEqual(client.send("\r\n"), [], "a line of one \\r is blank")
    }

    /// An id comes back exactly as sent, whatever number it is: beyond int64, with a fraction or
    /// an exponent, or -0; and an error answer carries it too.
    func test_ids_areEchoedExactlyAsSent() {
        let client = Harness().connect()
        for id in ["9223372036854775808", "-9223372036854775809", "123456789012345678901234567890", "1.50", "1e2", "-0", "0.1",
                   "9223372036854775807", "-9223372036854775808", "0", "\"text\"", "null", "true"] {
            XCTAssertEqual(client.send(#"{"id":\#(id),"op":"ping"}"#).first?.hasPrefix(#"{"id":\#(id),"ok":true"#), true, id)
            XCTAssertEqual(client.send(#"{"op":"nope", "x": {"id": 5, "s": "\"id\": 6"}, "id" : \#(id) }"#).first?
                .hasPrefix(#"{"id":\#(id),"ok":false"#), true, id)
        }
        XCTAssertEqual(client.send(#"{"\u0069d":1.0e400000000000000000,"op":"ping"}"#).first?.hasPrefix(#"{"id":null,"ok":false,"error":{"code":"bad_json""#),
                       true, "a number outside the double range is not JSON")
        XCTAssertEqual(client.send(#"{"\u0069d":12.5e1,"op":"ping"}"#).first?.hasPrefix(#"{"id":12.5e1,"ok":true"#), true)
    }

    /// A client that pipelines requests without reading its answers: once the output is over its
    /// limit, the rest of what it sent waits, unanswered and unparsed, until the output drains;
    /// then it is answered in order.
    func test_limit_answersWaitWhileTheOutputIsOverItsLimit() {
        var configuration = StoreConfiguration()
        configuration.maxOutputBytes = 1000
        let client = Harness(configuration: configuration).connect()
        XCTAssertEqual(client.request(#"{"op":"set","key":"big","value":"\#(String(repeating: "x", count: 600))"}"#)["ok"], true)
        client.output.accumulates = true
        let answers = client.send((1...20).map { #"{"id":\#($0),"op":"get","key":"big"}"# + "\n" }.joined())
        XCTAssertEqual(answers.count, 2, "answers stop once the output is over its limit")
        XCTAssertTrue(client.session.isOverflowing)
        XCTAssertTrue(client.session.holdsRequests)
        var ids = answers.compactMap { (try? JSONValue.parse($0))?.objectValue?["id"] }
        while client.session.holdsRequests {
            client.output.pendingBytes = 0
            client.session.outputDrained()
            let more = client.output.take()
            XCTAssertLessThanOrEqual(more.count, 2)
            ids += more.compactMap { (try? JSONValue.parse($0))?.objectValue?["id"] }
        }
        XCTAssertEqual(ids, (1...20).map { .int(Int64($0)) })
        XCTAssertFalse(client.session.isOverflowing)
    }

    func test_limit_watchesPerConnection() {
        var configuration = StoreConfiguration()
        configuration.maxWatchesPerConnection = 3
        let client = Harness(configuration: configuration).connect()
        for _ in 0..<3 { XCTAssertEqual(client.request(#"{"op":"watch","keys":["a"]}"#)["ok"], true) }
        XCTAssertEqual(errorCode(client.request(#"{"op":"watch","keys":["a"]}"#)), "limit")
        client.request(#"{"op":"unwatch","watch":1}"#)
        XCTAssertEqual(client.request(#"{"op":"watch","keys":["a"]}"#)["ok"], true)
    }

    func test_permissionDenied_forWritesOfReadOnlyPeers() {
        let harness = Harness()
        let reader = harness.connect(.read)
        for line in [#"{"op":"set","key":"a","value":1}"#, #"{"op":"delete","key":"a"}"#, #"{"op":"incr","key":"a"}"#,
                     #"{"op":"define","key":"a","expr":"1"}"#, #"{"op":"bind","from":"a","to":"b"}"#, #"{"op":"unbind","to":"b"}"#,
                     #"{"op":"batch","ops":[]}"#, #"{"op":"publish","channel":"c"}"#, #"{"op":"restore","keys":[]}"#]
        {
            XCTAssertEqual(errorCode(reader.request(line)), "permission_denied", line)
        }
        for line in [#"{"op":"get","pattern":"**"}"#, #"{"op":"list"}"#, #"{"op":"describe","key":"a"}"#, #"{"op":"graph"}"#,
                     #"{"op":"eval","expr":"1"}"#, #"{"op":"stats"}"#, #"{"op":"watch","keys":["a"]}"#, #"{"op":"unwatch","watch":1}"#,
                     #"{"op":"ping"}"#, #"{"op":"hello"}"#, #"{"op":"dump"}"#]
        {
            XCTAssertNotEqual(errorCode(reader.request(line)), "permission_denied", line)
        }
    }

    func test_shuttingDown() {
        let harness = Harness()
        let client = harness.connect()
        harness.store.isShuttingDown = true
        XCTAssertEqual(errorCode(client.request(#"{"op":"set","key":"a","value":1}"#)), "shutting_down")
    }

    func test_internal_whenStorageFailsNothingCommits() {
        let storage = FailingStorage()
        let store = try! Store(storage: storage, clock: ManualClock())
        let output = CaptureOutput()
        let session = Session(store: store, access: .write, output: output)
        session.receive(#"{"id":1,"op":"set","key":"a","value":1}"#)
        XCTAssertTrue(output.take()[0].contains(#""code":"internal""#))
        session.receive(#"{"id":2,"op":"get","key":"a"}"#)
        XCTAssertTrue(output.take()[0].contains(#""code":"not_found""#))
        XCTAssertEqual(store.rev, 0)
    }

    func test_idsAreEchoedAndResponsesComeInRequestOrder() {
        let client = Harness().connect()
        client.session.receive(#"{"id":"first","op":"set","key":"a","value":1}"#)
        client.session.receive(#"{"id":2.5,"op":"ping"}"#)
        client.session.receive(#"{"id":true,"op":"ping"}"#)
        client.session.receive(#"{"op":"ping"}"#)
        XCTAssertEqual(client.output.take(), [
            #"{"id":"first","ok":true,"rev":1,"changed":true}"#, #"{"id":2.5,"ok":true,"rev":1}"#,
            #"{"id":true,"ok":true,"rev":1}"#, #"{"id":null,"ok":true,"rev":1}"#,
        ])
    }
}

/// A storage whose commits always fail.
final class FailingStorage: StateStorage {
    func load() throws(ObsError) -> StoredState { StoredState() }
    func commit(_ transaction: StoredTransaction) throws(ObsError) { throw ObsError(.internal, "disk on fire") }
    func sync() throws(ObsError) {}
}
