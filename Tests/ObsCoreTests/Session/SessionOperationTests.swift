import ObsCore
import XCTest

/// One test per operation of docs/protocol.md, through a session.
final class SessionOperationTests: XCTestCase {
    func test_hello_reportsServerProtocolAndRevision() {
        let client = Harness().connect()
        let response = client.request(#"{"id":"h","op":"hello","client":"test","protocol":1}"#)
        XCTAssertEqual(response["id"], "h")
        XCTAssertEqual(response["server"], "obsd")
        XCTAssertEqual(response["protocol"], 1)
        XCTAssertEqual(response["rev"], 0)
        XCTAssertNotNil(response["pid"]?.intValue)
        XCTAssertNotNil(response["version"]?.stringValue)
        // The bounds a client holds its input to (obsctl set -, restore).
        XCTAssertEqual(response["max_line_bytes"]?.intValue, 1 << 20)
        XCTAssertEqual(response["max_restore_bytes"]?.intValue, 256 << 20)
    }

    func test_ping_answersRevision() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        XCTAssertEqual(client.send(#"{"id":7,"op":"ping"}"#), [#"{"id":7,"ok":true,"rev":1}"#])
    }

    func test_get_keyAndPattern() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"sensor.a","value":1}"#)
        client.request(#"{"op":"set","key":"sensor.b.c","value":"x"}"#)
        client.request(#"{"op":"define","key":"sensor.sum","expr":"$sensor.a + 1"}"#)
        XCTAssertEqual(client.send(#"{"id":1,"op":"get","key":"sensor.a"}"#),
                       [#"{"id":1,"ok":true,"key":"sensor.a","value":1,"kind":"value","rev":1,"version":1}"#])
        XCTAssertEqual(client.send(#"{"id":2,"op":"get","pattern":"sensor.*"}"#), [
            #"{"id":2,"ok":true,"items":[{"key":"sensor.a","kind":"value","rev":1,"value":1,"version":1},{"key":"sensor.sum","kind":"computed","rev":3,"value":2,"version":1}],"rev":3}"#,
        ])
        XCTAssertEqual(client.request(#"{"op":"get","pattern":"sensor.**"}"#)["items"]?.arrayValue?.count, 3)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"nope"}"#)), "not_found")
        XCTAssertEqual(errorCode(client.request(#"{"op":"get"}"#)), "bad_request")
    }

    func test_set_ifRevTtlEphemeralAlways() {
        let harness = Harness()
        let client = harness.connect()
        XCTAssertEqual(client.request(#"{"op":"set","key":"a","value":1,"if_rev":0}"#)["rev"], 1)
        let conflict = client.request(#"{"op":"set","key":"a","value":2,"if_rev":0}"#)
        XCTAssertEqual(errorCode(conflict), "conflict")
        XCTAssertEqual(conflict["error"]?["rev"], 1)
        XCTAssertEqual(client.request(#"{"op":"set","key":"a","value":2,"if_rev":1}"#)["rev"], 2)
        let same = client.request(#"{"op":"set","key":"a","value":2}"#)
        XCTAssertEqual(same["changed"], false)
        XCTAssertEqual(same["rev"], 2)
        let always = client.request(#"{"op":"set","key":"a","value":2,"always":true}"#)
        XCTAssertEqual(always["changed"], true)
        XCTAssertEqual(always["rev"], 3)
    }

    func test_delete_reportsWhetherItExisted() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        XCTAssertEqual(client.send(#"{"id":1,"op":"delete","key":"a"}"#), [#"{"id":1,"ok":true,"rev":2,"deleted":true}"#])
        XCTAssertEqual(client.send(#"{"id":2,"op":"delete","key":"a"}"#), [#"{"id":2,"ok":true,"rev":2,"deleted":false}"#])
    }

    func test_incr_countsFromZeroAndChecksTypes() {
        let client = Harness().connect()
        XCTAssertEqual(client.send(#"{"id":1,"op":"incr","key":"n"}"#), [#"{"id":1,"ok":true,"value":1,"rev":1}"#])
        XCTAssertEqual(client.request(#"{"op":"incr","key":"n","by":2.5}"#)["value"], 3.5)
        client.request(#"{"op":"set","key":"s","value":"x"}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"incr","key":"s"}"#)), "type_mismatch")
        client.request(#"{"op":"set","key":"big","value":9223372036854775807}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"incr","key":"big"}"#)), "bad_value")
        client.request(#"{"op":"set","key":"huge","value":1.7e308}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"incr","key":"huge","by":1.7e308}"#)), "bad_value")
        XCTAssertEqual(errorCode(client.request(#"{"op":"incr","key":"n","by":"1"}"#)), "bad_request")
    }

    func test_batch_allOrNothingWithIndex() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        let failed = client.request(#"{"op":"batch","ops":[{"op":"set","key":"a","value":2},{"op":"incr","key":"b"},{"op":"set","key":"a","value":3,"if_rev":9}]}"#)
        XCTAssertEqual(errorCode(failed), "conflict")
        XCTAssertEqual(failed["error"]?["index"], 2)
        XCTAssertEqual(client.request(#"{"op":"get","key":"a"}"#)["value"], 1)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"b"}"#)), "not_found")
        XCTAssertEqual(client.request(#"{"op":"ping"}"#)["rev"], 1)
        let bad = client.request(#"{"op":"batch","ops":[{"op":"set","key":"a","value":2},{"op":"get","key":"a"}]}"#)
        XCTAssertEqual(errorCode(bad), "bad_request")
        XCTAssertEqual(bad["error"]?["index"], 1)
    }

    func test_define_replaceExistsAndParseError() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"define","key":"a","expr":"1"}"#)), "exists")
        XCTAssertEqual(client.request(#"{"op":"define","key":"a","expr":"2","replace":true}"#)["rev"], 2)
        XCTAssertEqual(client.request(#"{"op":"define","key":"a","expr":"3"}"#)["rev"], 3)
        XCTAssertEqual(errorCode(client.request(#"{"op":"set","key":"a","value":1}"#)), "read_only")
        let parse = client.request(#"{"op":"define","key":"b","expr":"1 +"}"#)
        XCTAssertEqual(errorCode(parse), "parse_error")
        XCTAssertNotNil(parse["error"]?["pos"]?.intValue)
    }

    func test_define_cycleIsRejectedWithPath() {
        let client = Harness().connect()
        client.request(#"{"op":"define","key":"a","expr":"$b + 1"}"#)
        let cycle = client.request(#"{"op":"define","key":"b","expr":"$a + 1"}"#)
        XCTAssertEqual(errorCode(cycle), "cycle")
        XCTAssertEqual(cycle["error"]?["path"], ["b", "a", "b"])
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"b"}"#)), "not_found")
        XCTAssertEqual(client.request(#"{"op":"ping"}"#)["rev"], 1)
    }

    func test_bind_mapTwoWayReplaceAndUnbind() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"c","value":10}"#)
        XCTAssertEqual(client.request(#"{"op":"bind","from":"c","to":"f","map":"value * 2"}"#)["replaced"], false)
        XCTAssertEqual(client.request(#"{"op":"get","key":"f"}"#)["value"], 20)
        let replaced = client.request(#"{"op":"bind","from":"c","to":"f","map":"value * 9 / 5 + 32","two_way":true,"unmap":"(value - 32) * 5 / 9"}"#)
        XCTAssertEqual(replaced["replaced"], true)
        XCTAssertEqual(client.request(#"{"op":"get","key":"f"}"#)["value"], 50)
        client.request(#"{"op":"set","key":"f","value":212}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"c"}"#)["value"], 100)
        XCTAssertEqual(client.request(#"{"op":"unbind","to":"f"}"#)["rev"], 5)
        XCTAssertEqual(errorCode(client.request(#"{"op":"unbind","to":"f"}"#)), "not_found")
        client.request(#"{"op":"set","key":"c","value":0}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"f"}"#)["value"], 212)
    }

    func test_bind_cycleIsRejected() {
        let client = Harness().connect()
        client.request(#"{"op":"bind","from":"a","to":"b"}"#)
        let cycle = client.request(#"{"op":"bind","from":"b","to":"a"}"#)
        XCTAssertEqual(errorCode(cycle), "cycle")
        XCTAssertEqual(cycle["error"]?["path"], ["a", "b", "a"])
        XCTAssertEqual(errorCode(client.request(#"{"op":"bind","from":"x","to":"x"}"#)), "cycle")
        client.request(#"{"op":"define","key":"c","expr":"$b"}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"bind","from":"c","to":"a"}"#)), "cycle")
        XCTAssertEqual(errorCode(client.request(#"{"op":"bind","from":"a","to":"c"}"#)), "read_only")
    }

    func test_publish_deliversToMatchingWatches() {
        let harness = Harness()
        let watcher = harness.connect(.read)
        let publisher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["chat.*"]}"#)
        watcher.request(#"{"op":"watch","keys":["chat.room"],"channels":false}"#)
        XCTAssertEqual(watcher.output.take(), [])
        XCTAssertEqual(publisher.send(#"{"id":1,"op":"publish","channel":"chat.room","payload":{"text":"hi"}}"#),
                       [#"{"id":1,"ok":true,"delivered":1}"#])
        XCTAssertEqual(watcher.output.take(), [#"{"event":"publish","watch":1,"channel":"chat.room","payload":{"text":"hi"}}"#])
        XCTAssertEqual(publisher.request(#"{"op":"publish","channel":"other"}"#)["delivered"], 0)
        XCTAssertEqual(publisher.request(#"{"op":"ping"}"#)["rev"], 0)
    }

    func test_watchAndUnwatch() {
        let harness = Harness()
        let client = harness.connect()
        XCTAssertEqual(client.request(#"{"op":"watch","keys":["a"],"initial":false}"#)["watch"], 1)
        XCTAssertEqual(client.pendingEvents, [#"{"event":"synced","watch":1,"rev":0}"#])
        XCTAssertEqual(client.send(#"{"id":2,"op":"unwatch","watch":1}"#), [#"{"id":2,"ok":true}"#])
        client.request(#"{"op":"set","key":"a","value":1}"#)
        XCTAssertEqual(client.pendingEvents, [])
        XCTAssertEqual(errorCode(client.request(#"{"op":"unwatch","watch":1}"#)), "not_found")
        XCTAssertEqual(errorCode(client.request(#"{"op":"watch","keys":["a..b"]}"#)), "bad_key")
        XCTAssertEqual(errorCode(client.request(#"{"op":"watch","keys":["a"],"mode":"sometimes"}"#)), "bad_request")
        XCTAssertEqual(errorCode(client.request(#"{"op":"watch","keys":["a"],"progress_ms":0}"#)), "bad_request")
        XCTAssertEqual(errorCode(client.request(#"{"op":"watch","keys":["a"],"throttle_ms":5,"debounce_ms":5}"#)), "bad_request")
        XCTAssertEqual(errorCode(client.request(#"{"op":"watch","keys":[]}"#)), "bad_request")
        XCTAssertEqual(errorCode(client.request(#"{"op":"watch","keys":[1]}"#)), "bad_request")
    }

    func test_list_sortedWithKinds() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"b","value":1}"#)
        client.request(#"{"op":"define","key":"a","expr":"$b"}"#)
        XCTAssertEqual(client.send(#"{"id":1,"op":"list"}"#),
                       [#"{"id":1,"ok":true,"keys":[{"key":"a","kind":"computed"},{"key":"b","kind":"value"}]}"#])
        XCTAssertEqual(client.request(#"{"op":"list","pattern":"b"}"#)["keys"]?.arrayValue?.count, 1)
    }

    func test_describe_computedAndBoundKeys() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"a","value":1,"ttl_ms":5000}"#)
        client.request(#"{"op":"define","key":"c","expr":"$a + 1"}"#)
        client.request(#"{"op":"bind","from":"a","to":"t","map":"value"}"#)
        let c = client.request(#"{"op":"describe","key":"c"}"#)
        XCTAssertEqual(c["expr"], "$a + 1")
        XCTAssertEqual(c["deps"], ["a"])
        let a = client.request(#"{"op":"describe","key":"a"}"#)
        XCTAssertEqual(a["dependents"], ["c"])
        XCTAssertEqual(a["ttl_ms"], 5000)
        let t = client.request(#"{"op":"describe","key":"t"}"#)
        XCTAssertEqual(t["binding"], ["from": "a", "map": "value", "two_way": false])
        client.request(#"{"op":"set","key":"e","value":1,"ephemeral":true}"#)
        XCTAssertEqual(client.request(#"{"op":"describe","key":"e"}"#)["ephemeral"], true)
        XCTAssertEqual(errorCode(client.request(#"{"op":"describe","key":"zz"}"#)), "not_found")
    }

    func test_graph_edgesPointTheWayValuesFlow() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"define","key":"c","expr":"$a"}"#)
        client.request(#"{"op":"bind","from":"c","to":"d"}"#)
        let graph = client.request(#"{"op":"graph"}"#)
        XCTAssertEqual(graph["nodes"]?.arrayValue?.count, 3)
        XCTAssertEqual(graph["edges"], [["from": "a", "to": "c", "type": "dep"], ["from": "c", "to": "d", "type": "bind"]])
    }

    func test_eval_evaluatesWithoutStoring() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"a","value":2}"#)
        XCTAssertEqual(client.send(#"{"id":1,"op":"eval","expr":"$a * 21"}"#), [#"{"id":1,"ok":true,"value":42}"#])
        XCTAssertEqual(errorCode(client.request(#"{"op":"eval","expr":"1 / 0"}"#)), "eval_error")
        XCTAssertEqual(errorCode(client.request(#"{"op":"eval","expr":"("}"#)), "parse_error")
        XCTAssertEqual(client.request(#"{"op":"ping"}"#)["rev"], 1)
    }

    func test_stats_countsKeysAndConnections() {
        let harness = Harness()
        let client = harness.connect()
        let other = harness.connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"define","key":"b","expr":"$a"}"#)
        client.request(#"{"op":"watch","keys":["a"]}"#)
        let stats = withExtendedLifetime(other) { client.request(#"{"op":"stats"}"#) }
        XCTAssertEqual(stats["keys"], 2)
        XCTAssertEqual(stats["computed"], 1)
        XCTAssertEqual(stats["connections"], 2)
        XCTAssertEqual(stats["watches"], 1)
        XCTAssertEqual(stats["bindings"], 0)
        for field in ["rev", "uptime_s", "events_sent", "overflows", "durability"] { XCTAssertNotNil(stats[field], field) }
    }

    /// A session dropped without `close()` is closed all the same: its watches stop, its ephemeral
    /// keys go, and it no longer counts as a connection.
    func test_droppedSession_isClosed() {
        let harness = Harness()
        let client = harness.connect()
        do {
            let dropped = harness.connect()
            dropped.request(#"{"op":"watch","keys":["a"]}"#)
            dropped.request(#"{"op":"set","key":"e","value":1,"ephemeral":true}"#)
            XCTAssertEqual(client.request(#"{"op":"stats"}"#)["watches"], 1)
        }
        let stats = client.request(#"{"op":"stats"}"#)
        XCTAssertEqual(stats["connections"], 1)
        XCTAssertEqual(stats["watches"], 0)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"e"}"#)), "not_found")
        client.request(#"{"op":"set","key":"a","value":2}"#)
    }

    func test_dumpAndRestore_roundTripAsOneTransaction() {
        let first = Harness().connect()
        first.request(#"{"op":"set","key":"a","value":{"x":[1,2]}}"#)
        first.request(#"{"op":"define","key":"b","expr":"${a}.x[1]"}"#)
        first.request(#"{"op":"bind","from":"b","to":"c"}"#)
        var dump = first.request(#"{"op":"dump"}"#)
        dump["op"] = "restore"
        dump["id"] = nil
        let second = Harness()
        let client = second.connect()
        client.request(#"{"op":"set","key":"junk","value":1}"#)
        dump["replace"] = true
        XCTAssertEqual(client.request(JSONValue.object(dump).encoded)["rev"], 2)
        XCTAssertEqual(client.request(#"{"op":"get","key":"c"}"#)["value"], 2)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"junk"}"#)), "not_found")
        XCTAssertEqual(client.request(#"{"op":"describe","key":"c"}"#)["binding"]?["from"], "b")
    }
}
