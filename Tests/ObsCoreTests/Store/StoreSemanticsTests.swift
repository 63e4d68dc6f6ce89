import ObsCore
import XCTest

/// Further rules of the store: `always`, kinds changing, bindings from computeds, restarts.
final class StoreSemanticsTests: XCTestCase {
    func test_always_sendsAChangeWithEqualOldAndNew() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a"],"initial":false}"#)
        client.request(#"{"op":"set","key":"a","value":1,"always":true}"#)
        XCTAssertEqual(watcher.output.take(), [#"{"event":"change","watch":1,"key":"a","old":1,"new":1,"rev":2,"created":false}"#])
    }

    func test_selfReference_isACycle() {
        let client = Harness().connect()
        let response = client.request(#"{"op":"define","key":"a","expr":"($a ?? 0) + 1"}"#)
        XCTAssertEqual(errorCode(response), "cycle")
        XCTAssertEqual(response["error"]?["path"], ["a", "a"])
    }

    func test_redefinition_dropsOldDependencies() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"x","value":1}"#)
        client.request(#"{"op":"set","key":"y","value":10}"#)
        client.request(#"{"op":"define","key":"c","expr":"$x"}"#)
        client.request(#"{"op":"define","key":"c","expr":"$y"}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["c"],"initial":false}"#)
        client.request(#"{"op":"set","key":"x","value":2}"#)
        XCTAssertEqual(watcher.events().count, 0)
        client.request(#"{"op":"set","key":"y","value":11}"#)
        XCTAssertEqual(watcher.events().first?["new"], 11)
    }

    func test_deletedComputed_canBecomeAValueKeyAndReadersFollow() {
        let client = Harness().connect()
        client.request(#"{"op":"define","key":"c","expr":"5"}"#)
        client.request(#"{"op":"define","key":"d","expr":"$c * 2"}"#)
        XCTAssertEqual(client.request(#"{"op":"delete","key":"c"}"#)["deleted"], true)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"d"}"#)), "eval_error")
        client.request(#"{"op":"set","key":"c","value":7}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"d"}"#)["value"], 14)
    }

    func test_bindingFromAComputed_followsItInTheSameTransaction() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"define","key":"c","expr":"$a * 10"}"#)
        client.request(#"{"op":"bind","from":"c","to":"t"}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["**"],"initial":false}"#)
        let rev = client.request(#"{"op":"set","key":"a","value":2}"#)["rev"]
        let events = watcher.events()
        XCTAssertEqual(events.map { $0["key"]! }, ["a", "c", "t"])
        XCTAssertEqual(Set(events.map { $0["rev"]! }), [rev!])
        XCTAssertEqual(client.request(#"{"op":"get","key":"t"}"#)["value"], 20)
    }

    func test_ephemeralKeyTakenOverByAnotherSessionSurvivesTheFirstClosing() {
        let harness = Harness()
        let first = harness.connect()
        let second = harness.connect()
        first.request(#"{"op":"set","key":"e","value":1,"ephemeral":true}"#)
        second.request(#"{"op":"set","key":"e","value":2}"#)
        first.session.close()
        XCTAssertEqual(second.request(#"{"op":"get","key":"e"}"#)["value"], 2)
        XCTAssertEqual(harness.storage.state.keys.map(\.key), ["e"])
    }

    func test_restart_expiredTTLKeyIsDeletedAtTheFirstTick() {
        let storage = MemoryStorage()
        let first = Harness(storage: storage)
        first.connect().request(#"{"op":"set","key":"t","value":1,"ttl_ms":1000}"#)
        let second = Harness(storage: storage)
        second.clock.now = first.clock.now + 5
        second.store.tick()
        XCTAssertEqual(errorCode(second.connect().request(#"{"op":"get","key":"t"}"#)), "not_found")
        XCTAssertEqual(second.store.rev, 2)
    }

    func test_restore_withoutReplaceKeepsOtherKeys() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"keep","value":1}"#)
        client.request(#"{"op":"restore","keys":[{"key":"a","kind":"value","value":2},{"key":"b","kind":"computed","expr":"$a + 1"}]}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"b"}"#)["value"], 3)
        XCTAssertEqual(client.request(#"{"op":"get","key":"keep"}"#)["value"], 1)
        XCTAssertEqual(client.request(#"{"op":"ping"}"#)["rev"], 2)
    }

    func test_batch_sameKeyTwice_oneEventFromFirstOldToLastNew() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a"],"initial":false}"#)
        client.request(#"{"op":"batch","ops":[{"op":"set","key":"a","value":2},{"op":"incr","key":"a"},{"op":"set","key":"a","value":7}]}"#)
        XCTAssertEqual(watcher.output.take(), [#"{"event":"change","watch":1,"key":"a","old":1,"new":7,"rev":2,"created":false}"#])
        let back = client.request(#"{"op":"batch","ops":[{"op":"set","key":"a","value":3},{"op":"set","key":"a","value":7}]}"#)
        XCTAssertEqual(back["rev"], 2, "back to where it was: nothing commits")
        XCTAssertEqual(watcher.output.take(), [])
    }

    func test_bindingDoesNotWriteWhileSourceIsInError() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"d","value":1}"#)
        client.request(#"{"op":"define","key":"q","expr":"1 / $d"}"#)
        client.request(#"{"op":"bind","from":"q","to":"t"}"#)
        client.request(#"{"op":"set","key":"d","value":0}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"t"}"#)["value"], 1)
    }
}

final class StoreLifetimeTests: XCTestCase {
    func test_ttlHeartbeat_extendsTheDeadlineWithoutAnEvent() {
        let harness = Harness()
        let client = harness.connect()
        let watcher = harness.connect()
        client.request(#"{"op":"set","key":"alive","value":true,"ttl_ms":1000}"#)
        watcher.request(#"{"op":"watch","keys":["alive"],"initial":false}"#)
        for _ in 0..<5 {
            harness.clock.advance(0.8)
            harness.store.tick()
            XCTAssertEqual(client.request(#"{"op":"set","key":"alive","value":true,"ttl_ms":1000}"#)["changed"], true)
        }
        XCTAssertEqual(watcher.events().count, 0)
        harness.clock.advance(1.1)
        harness.store.tick()
        XCTAssertEqual(watcher.events().map { $0["reason"] }, ["ttl"])
    }

    func test_storeGoesAwayWithItsGraph() {
        weak var weakStore: Store?
        do {
            let harness = Harness()
            let client = harness.connect()
            client.request(#"{"op":"set","key":"a","value":1}"#)
            client.request(#"{"op":"define","key":"b","expr":"$a + 1"}"#)
            XCTAssertEqual(client.request(#"{"op":"bind","from":"b","to":"c"}"#)["ok"], true)
            client.session.close()
            weakStore = harness.store
        }
        XCTAssertNil(weakStore)
    }
}

final class BindingCycleTests: XCTestCase {
    ///   a --bind(+1)--> b --read--> c = $flag ? $b : 0 --bind--> a
    /// Accepted while flag is false (c does not read b); once it is true the cycle closes through
    /// the branch, and the transaction still ends.
    func test_cycleThroughABindingAndADynamicBranch_terminates() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"flag","value":false}"#)
        client.request(#"{"op":"set","key":"a","value":0}"#)
        client.request(#"{"op":"bind","from":"a","to":"b","map":"value + 1"}"#)
        client.request(#"{"op":"define","key":"c","expr":"$flag ? $b : 0"}"#)
        XCTAssertEqual(client.request(#"{"op":"bind","from":"c","to":"a"}"#)["ok"], true)
        XCTAssertEqual(client.request(#"{"op":"set","key":"flag","value":true}"#)["ok"], true)
        XCTAssertEqual(client.request(#"{"op":"ping"}"#)["ok"], true)
    }
}
