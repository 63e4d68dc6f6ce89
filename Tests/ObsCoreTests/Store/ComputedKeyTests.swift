import ObsCore
import XCTest

/// The reactive graph of named keys, through sessions.
final class ComputedKeyTests: XCTestCase {
    ///     a
    ///    / \
    ///   b   c      d = $b + $c changes once per transaction, from the old pair to the new one
    ///    \ /
    ///     d
    func test_diamond_evaluatedOnceWithoutGlitch() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"define","key":"b","expr":"$a * 2"}"#)
        client.request(#"{"op":"define","key":"c","expr":"$a * 3"}"#)
        client.request(#"{"op":"define","key":"d","expr":"$b + $c"}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["d"],"initial":false}"#)
        client.request(#"{"op":"set","key":"a","value":2}"#)
        XCTAssertEqual(watcher.output.take(), [#"{"event":"change","watch":1,"key":"d","old":5,"new":10,"rev":5,"created":false}"#])
    }

    func test_dynamicDependencies_onlyTheBranchRead() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"flag","value":true}"#)
        XCTAssertEqual(client.request(#"{"op":"define","key":"x","expr":"$flag ? $b : $c"}"#)["deps"], ["flag", "b"])
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["x"],"initial":false}"#)
        client.request(#"{"op":"set","key":"c","value":1}"#)
        XCTAssertEqual(watcher.events().count, 0)
        client.request(#"{"op":"set","key":"b","value":7}"#)
        XCTAssertEqual(watcher.events().first?["new"], 7)
    }

    func test_missingKeyIsADependency_creatingItUpdatesTheComputed() {
        let client = Harness().connect()
        client.request(#"{"op":"define","key":"x","expr":"$later ?? \"none\""}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"x"}"#)["value"], "none")
        client.request(#"{"op":"set","key":"later","value":3}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"x"}"#)["value"], 3)
        client.request(#"{"op":"delete","key":"later"}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"x"}"#)["value"], "none")
    }

    func test_equalResultStopsPropagation() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"define","key":"positive","expr":"$a > 0"}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["positive"],"initial":false}"#)
        client.request(#"{"op":"set","key":"a","value":2}"#)
        XCTAssertEqual(watcher.events().count, 0)
    }

    func test_errorState_eventsAndRecovery() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"d","value":2}"#)
        client.request(#"{"op":"define","key":"q","expr":"10 / $d"}"#)
        client.request(#"{"op":"define","key":"r","expr":"$q + 1"}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["q","r"],"initial":false}"#)
        client.request(#"{"op":"set","key":"d","value":0}"#)
        let errors = watcher.events()
        XCTAssertEqual(errors.compactMap { $0["event"]?.stringValue }, ["error", "error"])
        XCTAssertEqual(errors.first?["error"]?["code"], "eval_error")
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"r"}"#)), "eval_error")
        client.request(#"{"op":"set","key":"d","value":5}"#)
        let recovered = watcher.events()
        XCTAssertEqual(recovered.first?["old"], 5)
        XCTAssertEqual(recovered.first?["new"], 2)
    }

    func test_defineSucceedsWhenFirstEvaluationFails() {
        let client = Harness().connect()
        XCTAssertEqual(client.request(#"{"op":"define","key":"x","expr":"$n + 1"}"#)["ok"], true)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"x"}"#)), "eval_error")
        client.request(#"{"op":"set","key":"n","value":1}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"x"}"#)["value"], 2)
    }

    ///   a = $flag ? $b : 0,  b = $a: no cycle until flag turns true; then both fail with `cycle`
    ///   and nothing loops
    func test_cycleThroughADynamicBranch_detectedDuringEvaluation() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"flag","value":false}"#)
        client.request(#"{"op":"define","key":"a","expr":"$flag ? $b : 0"}"#)
        XCTAssertEqual(client.request(#"{"op":"define","key":"b","expr":"$a"}"#)["ok"], true)
        client.request(#"{"op":"set","key":"flag","value":true}"#)
        let a = client.request(#"{"op":"get","key":"a"}"#)
        XCTAssertEqual(errorCode(a), "eval_error")
        XCTAssertTrue(a["error"]?["message"]?.stringValue?.contains("cycle") ?? false)
        client.request(#"{"op":"set","key":"flag","value":false}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"a"}"#)["value"], 0)
        XCTAssertEqual(client.request(#"{"op":"get","key":"b"}"#)["value"], 0)
    }

    func test_peek_isNotADependency() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"set","key":"b","value":1}"#)
        client.request(#"{"op":"define","key":"x","expr":"$a + peek(\"b\")"}"#)
        client.request(#"{"op":"set","key":"b","value":10}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"x"}"#)["value"], 2)
        client.request(#"{"op":"set","key":"a","value":2}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"x"}"#)["value"], 12)
    }

    func test_match_dependsOnTheSetOfMatchingKeys() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"define","key":"total","expr":"sum(values(match(\"cart.*\")))"}"#)
        client.request(#"{"op":"set","key":"cart.a","value":2}"#)
        client.request(#"{"op":"set","key":"cart.b","value":3}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"total"}"#)["value"], 5)
        client.request(#"{"op":"set","key":"cart.a","value":4}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"total"}"#)["value"], 7)
        client.request(#"{"op":"delete","key":"cart.b"}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"total"}"#)["value"], 4)
        client.request(#"{"op":"set","key":"cartx","value":100}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"total"}"#)["value"], 4)
    }

    func test_timeComputeds_reEvaluatedEverySecondWithEventsOnlyOnChange() {
        let harness = Harness()
        harness.clock.now = 1000
        let client = harness.connect()
        client.request(#"{"op":"define","key":"tens","expr":"floor(now() / 10)"}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["tens"],"initial":false}"#)
        XCTAssertNotNil(harness.store.nextDeadline)
        for _ in 0..<9 {
            harness.clock.advance(1)
            harness.store.tick()
        }
        XCTAssertEqual(watcher.events().count, 0)
        harness.clock.advance(1)
        harness.store.tick()
        XCTAssertEqual(watcher.events().first?["new"], 101)
    }

    func test_bindingFiresInTheSameTransaction() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"bind","from":"a","to":"b","map":"value + 1"}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["**"],"initial":false}"#)
        client.request(#"{"op":"set","key":"a","value":5}"#)
        let events = watcher.events()
        XCTAssertEqual(events.compactMap { $0["key"]?.stringValue }, ["a", "b"])
        XCTAssertEqual(Set(events.compactMap { $0["rev"] }), [3])
    }

    func test_twoWayBinding_noEcho() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"c","value":0}"#)
        client.request(#"{"op":"bind","from":"c","to":"f","map":"value * 2","two_way":true,"unmap":"value / 2 + 1000"}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["**"],"initial":false}"#)
        client.request(#"{"op":"set","key":"c","value":10}"#)
        XCTAssertEqual(watcher.events().map { [$0["key"]!, $0["new"]!] }, [["c", 10], ["f", 20]])
        XCTAssertEqual(client.request(#"{"op":"get","key":"c"}"#)["value"], 10, "the write the binding made does not echo back")
    }

    func test_revisionsVersionsAndCreatedRev() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"other","value":1}"#)
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"set","key":"a","value":2}"#)
        let a = client.request(#"{"op":"describe","key":"a"}"#)
        XCTAssertEqual(a["rev"], 3)
        XCTAssertEqual(a["created_rev"], 2)
        XCTAssertEqual(a["version"], 2)
    }
}
