import ObsCore
import XCTest

/// One test per guarantee a watch gives (every mode, every start).
final class WatchGuaranteeTests: XCTestCase {
    func test_patterns_starMatchesOneSegmentAndDoubleStarAny() {
        let harness = Harness()
        let writer = harness.connect()
        let one = harness.connect()
        let any = harness.connect()
        let all = harness.connect()
        one.request(#"{"op":"watch","keys":["sensor.*"],"initial":false}"#)
        any.request(#"{"op":"watch","keys":["sensor.**"],"initial":false}"#)
        all.request(#"{"op":"watch","keys":["**"],"initial":false}"#)
        for key in ["sensor", "sensor.a", "sensor.a.b", "other"] {
            writer.request(JSONValue.object(["op": "set", "key": .string(key), "value": 1]).encoded)
        }
        XCTAssertEqual(one.events().compactMap { $0["key"]?.stringValue }, ["sensor.a"])
        XCTAssertEqual(any.events().compactMap { $0["key"]?.stringValue }, ["sensor", "sensor.a", "sensor.a.b"])
        XCTAssertEqual(all.events().compactMap { $0["key"]?.stringValue }, ["sensor", "sensor.a", "sensor.a.b", "other"])
    }

    ///   a ─┐
    ///      ├─ sum (computed)      one batch writes b, a, c: the watch of "**" gets a, b, c, sum
    ///   b ─┘                      contiguously, in key order, all with the batch's revision
    func test_eventsOfOneTransaction_contiguousOrderedByKeyWithOneRevision() {
        let harness = Harness()
        let writer = harness.connect()
        writer.request(#"{"op":"define","key":"sum","expr":"$a + $b"}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["**"],"initial":false}"#)
        writer.request(#"{"op":"batch","ops":[{"op":"set","key":"b","value":2},{"op":"set","key":"a","value":1},{"op":"set","key":"c","value":3}]}"#)
        let events = watcher.events()
        XCTAssertEqual(events.compactMap { $0["key"]?.stringValue }, ["a", "b", "c", "sum"])
        XCTAssertEqual(Set(events.compactMap { $0["rev"] }), [2])
        XCTAssertEqual(events.last?["new"], 3)
    }

    func test_noDuplicates_whenSeveralPatternsOfOneWatchMatch() {
        let harness = Harness()
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a.b","a.*","**"],"initial":false}"#)
        harness.connect().request(#"{"op":"set","key":"a.b","value":1}"#)
        XCTAssertEqual(watcher.events().count, 1)
    }

    func test_initial_snapshotThenSyncedThenChangesAfterIt() {
        let harness = Harness()
        let writer = harness.connect()
        writer.request(#"{"op":"set","key":"k.b","value":2}"#)
        writer.request(#"{"op":"set","key":"k.a","value":1}"#)
        let watcher = harness.connect()
        XCTAssertEqual(watcher.send(#"{"id":1,"op":"watch","keys":["k.*"]}"#), [
            #"{"id":1,"ok":true,"watch":1}"#,
            #"{"event":"initial","watch":1,"key":"k.a","kind":"value","value":1,"rev":2}"#,
            #"{"event":"initial","watch":1,"key":"k.b","kind":"value","value":2,"rev":1}"#,
            #"{"event":"synced","watch":1,"rev":2}"#,
        ])
        writer.request(#"{"op":"set","key":"k.a","value":5}"#)
        XCTAssertEqual(watcher.output.take(), [#"{"event":"change","watch":1,"key":"k.a","old":1,"new":5,"rev":3,"created":false}"#])
    }

    func test_since_replaysHistoryThenSynced() {
        let harness = Harness()
        let writer = harness.connect()
        for value in 1...4 { writer.request(#"{"op":"set","key":"a","value":\#(value)}"#) }
        writer.request(#"{"op":"set","key":"b","value":1}"#)
        let watcher = harness.connect()
        XCTAssertEqual(watcher.send(#"{"id":1,"op":"watch","keys":["a"],"since":2}"#), [
            #"{"id":1,"ok":true,"watch":1}"#,
            #"{"event":"change","watch":1,"key":"a","old":2,"new":3,"rev":3,"created":false}"#,
            #"{"event":"change","watch":1,"key":"a","old":3,"new":4,"rev":4,"created":false}"#,
            #"{"event":"synced","watch":1,"rev":5}"#,
        ])
    }

    func test_sinceOlderThanHistory_compactedThenSnapshot() {
        var configuration = StoreConfiguration()
        configuration.historyRevisions = 3
        let harness = Harness(configuration: configuration)
        let writer = harness.connect()
        for value in 1...6 { writer.request(#"{"op":"set","key":"a","value":\#(value)}"#) }
        let watcher = harness.connect()
        XCTAssertEqual(watcher.send(#"{"id":1,"op":"watch","keys":["a"],"since":2}"#), [
            #"{"id":1,"ok":true,"watch":1}"#,
            #"{"event":"compacted","watch":1,"compact_rev":3}"#,
            #"{"event":"initial","watch":1,"key":"a","kind":"value","value":6,"rev":6}"#,
            #"{"event":"synced","watch":1,"rev":6}"#,
        ])
        XCTAssertEqual(watcher.send(#"{"id":2,"op":"watch","keys":["a"],"since":3}"#).count, 5)
    }

    func test_unwatch_thenNothingMore() {
        let harness = Harness()
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a"],"throttle_ms":100,"progress_ms":50}"#)
        harness.connect().request(#"{"op":"set","key":"a","value":1}"#)
        harness.connect().request(#"{"op":"set","key":"a","value":2}"#)
        watcher.request(#"{"op":"unwatch","watch":1}"#)
        _ = watcher.output.take()
        harness.clock.advance(1)
        harness.store.tick()
        harness.connect().request(#"{"op":"publish","channel":"a"}"#)
        XCTAssertEqual(watcher.output.take(), [])
    }

    func test_overflow_stopsQueuingThenOverflowEventAndSnapshotWhenDrained() {
        var configuration = StoreConfiguration()
        configuration.maxOutputBytes = 200
        let harness = Harness(configuration: configuration)
        let writer = harness.connect()
        let slow = harness.connect()
        slow.request(#"{"op":"watch","keys":["a"],"initial":false}"#)
        slow.output.accumulates = true
        for value in 1...20 { writer.request(#"{"op":"set","key":"a","value":\#(value)}"#) }
        let queued = slow.output.take()
        XCTAssertLessThan(queued.count, 20)
        XCTAssertGreaterThan(queued.count, 0)
        let lastQueued = try! JSONValue.parse(queued.last!)["new"]!.intValue!
        slow.output.pendingBytes = 0
        slow.session.outputDrained()
        XCTAssertEqual(slow.output.take(), [
            #"{"event":"overflow","watch":1,"from_rev":\#(lastQueued + 1),"to_rev":20}"#,
            #"{"event":"initial","watch":1,"key":"a","kind":"value","value":20,"rev":20}"#,
            #"{"event":"synced","watch":1,"rev":20}"#,
        ])
        writer.request(#"{"op":"set","key":"a","value":21}"#)
        XCTAssertEqual(slow.events().count, 1)
        XCTAssertEqual(writer.request(#"{"op":"stats"}"#)["overflows"], 1)
    }

    func test_otherClientsAreNotSlowedByASlowOne() {
        var configuration = StoreConfiguration()
        configuration.maxOutputBytes = 100
        let harness = Harness(configuration: configuration)
        let slow = harness.connect()
        let fast = harness.connect()
        slow.request(#"{"op":"watch","keys":["a"],"initial":false}"#)
        fast.request(#"{"op":"watch","keys":["a"],"initial":false}"#)
        slow.output.accumulates = true
        for value in 1...10 { harness.connect().request(#"{"op":"set","key":"a","value":\#(value)}"#) }
        XCTAssertEqual(fast.events().count, 10)
    }

    func test_latest_replacesPendingEventAndKeepsOldAsLastSeen() {
        let harness = Harness()
        let writer = harness.connect()
        writer.request(#"{"op":"set","key":"a","value":0}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a"],"mode":"latest","initial":false}"#)
        watcher.output.pendingBytes = 1
        for value in 1...5 { writer.request(#"{"op":"set","key":"a","value":\#(value)}"#) }
        XCTAssertEqual(watcher.output.take(), [])
        watcher.output.pendingBytes = 0
        watcher.session.outputDrained()
        XCTAssertEqual(watcher.output.take(), [#"{"event":"change","watch":1,"key":"a","old":0,"new":5,"rev":6,"created":false}"#])
        watcher.output.pendingBytes = 1
        writer.request(#"{"op":"set","key":"a","value":6}"#)
        writer.request(#"{"op":"set","key":"a","value":5}"#)
        watcher.output.pendingBytes = 0
        watcher.session.outputDrained()
        XCTAssertEqual(watcher.output.take(), [], "back to the value the client last saw: nothing")
    }

    func test_throttle_firstAtOnceThenLatestAtEndOfInterval() {
        let harness = Harness()
        let writer = harness.connect()
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a"],"throttle_ms":100,"initial":false}"#)
        writer.request(#"{"op":"set","key":"a","value":1}"#)
        XCTAssertEqual(watcher.events().compactMap { $0["new"] }, [1])
        writer.request(#"{"op":"set","key":"a","value":2}"#)
        writer.request(#"{"op":"set","key":"a","value":3}"#)
        harness.clock.advance(0.05)
        harness.store.tick()
        XCTAssertEqual(watcher.events().count, 0)
        harness.clock.advance(0.06)
        harness.store.tick()
        let events = watcher.events()
        XCTAssertEqual(events.compactMap { $0["new"] }, [3])
        XCTAssertEqual(events.first?["old"], 1)
        writer.request(#"{"op":"set","key":"a","value":4}"#)
        writer.request(#"{"op":"set","key":"a","value":3}"#)
        harness.clock.advance(0.2)
        harness.store.tick()
        XCTAssertEqual(watcher.events().count, 0, "equal after the burst: nothing")
    }

    func test_debounce_onlyAfterQuiet() {
        let harness = Harness()
        let writer = harness.connect()
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a"],"debounce_ms":100,"initial":false}"#)
        for value in 1...3 {
            writer.request(#"{"op":"set","key":"a","value":\#(value)}"#)
            harness.clock.advance(0.06)
            harness.store.tick()
        }
        XCTAssertEqual(watcher.events().count, 0)
        XCTAssertNotNil(harness.store.nextDeadline)
        harness.clock.advance(0.05)
        harness.store.tick()
        let events = watcher.events()
        XCTAssertEqual(events.count, 1)
        XCTAssertEqual(events.first?["new"], 3)
        XCTAssertNil(events.first?["old"])
        XCTAssertEqual(events.first?["created"], true)
    }

    func test_progress_afterQuietPeriodCarriesRevision() {
        let harness = Harness()
        let writer = harness.connect()
        writer.request(#"{"op":"set","key":"other","value":1}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a"],"progress_ms":1000}"#)
        harness.clock.advance(0.5)
        harness.store.tick()
        XCTAssertEqual(watcher.output.take(), [])
        XCTAssertEqual(harness.store.nextDeadline, harness.clock.monotonic + 0.5)
        writer.request(#"{"op":"set","key":"other","value":2}"#)
        harness.clock.advance(0.5)
        harness.store.tick()
        XCTAssertEqual(watcher.output.take(), [#"{"event":"progress","watch":1,"rev":2}"#])
        harness.clock.advance(0.9)
        harness.store.tick()
        XCTAssertEqual(watcher.output.take(), [])
    }

    func test_eventBodyIsSharedByEveryWatcher() {
        let harness = Harness()
        let first = harness.connect()
        let second = harness.connect()
        first.request(#"{"op":"watch","keys":["a"],"initial":false}"#)
        second.request(#"{"op":"watch","keys":["**"],"initial":false}"#)
        second.request(#"{"op":"watch","keys":["a"],"initial":false}"#)
        first.output.lines.removeAll()
        second.output.lines.removeAll()
        harness.connect().request(#"{"op":"set","key":"a","value":1}"#)
        let lines = first.output.lines + second.output.lines
        XCTAssertEqual(lines.count, 3)
        let bodies = lines.map { line in line.body.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) } }
        XCTAssertEqual(Set(bodies).count, 1, "one encoding, shared")
        XCTAssertEqual(second.output.lines.map(\.text), [
            #"{"event":"change","watch":1,"key":"a","new":1,"rev":1,"created":true}"#,
            #"{"event":"change","watch":2,"key":"a","new":1,"rev":1,"created":true}"#,
        ])
    }

    func test_ttl_expiryIsADeleteWithItsOwnRevision() {
        let harness = Harness()
        let writer = harness.connect()
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a"],"initial":false}"#)
        writer.request(#"{"op":"set","key":"a","value":1,"ttl_ms":1500}"#)
        _ = watcher.output.take()
        harness.clock.advance(1)
        harness.store.tick()
        XCTAssertEqual(watcher.output.take(), [])
        XCTAssertEqual(harness.store.nextDeadline!, harness.clock.monotonic + 0.5, accuracy: 1e-6)
        harness.clock.advance(0.5)
        harness.store.tick()
        XCTAssertEqual(watcher.output.take(), [#"{"event":"delete","watch":1,"key":"a","old":1,"rev":2,"reason":"ttl"}"#])
        XCTAssertEqual(harness.storage.state.keys, [])
    }

    func test_ephemeral_removedWhenTheOwnerCloses() {
        let harness = Harness()
        let owner = harness.connect()
        let watcher = harness.connect()
        owner.request(#"{"op":"set","key":"p.a","value":1,"ephemeral":true}"#)
        owner.request(#"{"op":"set","key":"p.b","value":2,"ephemeral":true}"#)
        XCTAssertEqual(harness.storage.state.keys, [], "ephemeral keys are not persisted")
        watcher.request(#"{"op":"watch","keys":["p.*"],"initial":false}"#)
        owner.session.close()
        XCTAssertEqual(watcher.output.take(), [
            #"{"event":"delete","watch":1,"key":"p.a","old":1,"rev":3,"reason":"ephemeral"}"#,
            #"{"event":"delete","watch":1,"key":"p.b","old":2,"rev":3,"reason":"ephemeral"}"#,
        ])
    }
}

extension MemoryStorage {
    var state: StoredState { try! load() }
}

final class WatchDetailTests: XCTestCase {
    func test_latest_heldWhileOutputBusy_sentByTickOnceItEmpties() {
        let harness = Harness()
        let writer = harness.connect()
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a"],"mode":"latest","initial":false}"#)
        watcher.output.pendingBytes = 10
        writer.request(#"{"op":"set","key":"a","value":1}"#)
        writer.request(#"{"op":"set","key":"a","value":2}"#)
        harness.clock.advance(1)
        harness.store.tick()
        XCTAssertEqual(watcher.output.take(), [])
        watcher.output.pendingBytes = 0
        harness.clock.advance(1)
        harness.store.tick()
        XCTAssertEqual(watcher.output.take(), [#"{"event":"change","watch":1,"key":"a","new":2,"rev":2,"created":true}"#])
    }

    func test_snapshotOfAComputedInError_carriesTheError() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"define","key":"bad","expr":"1 / 0"}"#)
        let lines = client.send(#"{"id":1,"op":"watch","keys":["bad"]}"#)
        XCTAssertEqual(lines.count, 3)
        XCTAssertTrue(lines[1].hasPrefix(#"{"event":"initial","watch":1,"key":"bad","kind":"computed","error":{"code":"eval_error","message":"#), lines[1])
        XCTAssertTrue(lines[1].hasSuffix(#"},"rev":1}"#), lines[1])
    }

    func test_goodbye_hasNoWatchField() {
        let client = Harness().connect()
        client.session.goodbye(reason: "shutdown")
        XCTAssertEqual(client.output.take(), [#"{"event":"goodbye","reason":"shutdown"}"#])
    }

    func test_deleteAndRecreateInOneBatch_isOneChange() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        let watcher = harness.connect()
        watcher.request(#"{"op":"watch","keys":["a"],"initial":false}"#)
        client.request(#"{"op":"batch","ops":[{"op":"delete","key":"a"},{"op":"set","key":"a","value":2}]}"#)
        XCTAssertEqual(watcher.output.take(), [#"{"event":"change","watch":1,"key":"a","old":1,"new":2,"rev":2,"created":false}"#])
    }
}
