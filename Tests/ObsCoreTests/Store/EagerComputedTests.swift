import XCTest
@testable import ObsCore

/// Computed keys are `eager` computeds: the engine queues the key itself for the end of every
/// transaction that reaches it, with no observer of its own. What that must keep: one queue entry
/// per key per transaction, no freed key left in the queue, and every change evaluated with its
/// final inputs. Also two cases of a key read before it changed kind or a `match()` source left
/// behind by a failed batch, where readers kept stale values.
final class EagerComputedTests: XCTestCase {
    private func queueEntries(of node: KeyNode) -> Int {
        let address = Unmanaged.passUnretained(node as ReactiveNode).toOpaque()
        var entries = 0
        for index in 0..<engine.pendingObservers.count where engine.pendingObservers[index].toOpaque() == address {
            entries += 1
        }
        return entries
    }

    func test_aKeyRedefinedManyTimesInOneTransaction_isQueuedOnce() throws {
        let store = try Store(storage: MemoryStorage(), clock: ManualClock())
        try store.setValue(1, forKey: "x")
        try store.defineComputed("c", expression: "$x + 1")
        var entries = 0
        var queued = false
        _ = try store.transact { () throws(ObsError) in
            for n in 0..<50 { _ = try store.define("c", "$x + \(n)", replace: true) }
            let node = store.node("c", create: false)!
            entries = queueEntries(of: node)
            queued = node.flags.contains(.queued)
        }
        XCTAssertEqual(entries, 1)
        XCTAssertTrue(queued)
        XCTAssertEqual(try store.value(forKey: "c"), 50)
    }

    /// A store released inside a library `batch` while one of its computed keys is queued: the
    /// queue does not retain the key, so the engine must keep it until the batch settles.
    func test_aStoreReleasedWhileItsComputedIsQueued_leavesNoFreedKeyInTheQueue() throws {
        weak var weakNode: KeyNode?
        var keptWhileQueued = false
        var wasQueued = false
        batch {
            var store: Store? = try! Store(storage: MemoryStorage(), clock: ManualClock())
            try! store!.setValue(1, forKey: "x")
            try! store!.defineComputed("c", expression: "$x + 1")
            try! store!.setValue(2, forKey: "x")
            // No strong reference of the test's own outlives this closure.
            let address: UnsafeMutableRawPointer = {
                let node = store!.node("c", create: false)!
                weakNode = node
                return Unmanaged.passUnretained(node as ReactiveNode).toOpaque()
            }()
            store = nil
            wasQueued = (0..<engine.pendingObservers.count).contains { engine.pendingObservers[$0].toOpaque() == address }
            keptWhileQueued = weakNode != nil
        }
        XCTAssertTrue(wasQueued, "the scenario needs the key queued when its store goes")
        XCTAssertTrue(keptWhileQueued, "a freed key was left in the engine's queue")
        XCTAssertNil(weakNode, "released once the batch settled")
    }

    /// A computed redefined in a batch, then a key it reads written in the same batch: the event
    /// carries the value of the new definition over the final input.
    func test_redefinedThenItsInputWritten_inOneBatch_theEventHasTheFinalValue() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"set","key":"x","value":1}"#)
        client.request(#"{"op":"define","key":"c","expr":"$x + 1"}"#)
        let watcher = harness.connect(.read)
        watcher.request(#"{"op":"watch","keys":["c"],"initial":false}"#)
        client.request(#"{"op":"batch","ops":[{"op":"define","key":"c","expr":"$x + 2","replace":true},{"op":"set","key":"x","value":5}]}"#)
        XCTAssertEqual(watcher.events().map { $0["new"] }, [7])
        XCTAssertEqual(client.request(#"{"op":"get","key":"c"}"#)["value"], 7)
    }

    /// The same with a binding writing during the flush and a clock read: the last event of the
    /// redefined key is its final value.
    func test_redefinedOverAChainWithABinding_theLastEventIsTheFinalValue() {
        let harness = Harness()
        let client = harness.connect()
        client.request(#"{"op":"bind","from":"c2","to":"v"}"#)
        for (key, expr) in [("c1", "($a ?? 0) + 1"), ("c2", "$c1 * 2"), ("c3", "($c2 ?? 0) + ($b ?? 0)"),
                            ("c4", "($c3 ?? 0) > 5 ? $c1 : $b"), ("c5", "($v ?? 0) + 1"), ("c6", "floor(now()) % 5 + ($a ?? 0)")] {
            client.request(JSONValue.object(["op": "define", "key": .string(key), "expr": .string(expr)]).encoded)
        }
        let watcher = harness.connect(.read)
        watcher.request(#"{"op":"watch","keys":["c6"],"initial":false}"#)
        client.request(#"{"op":"batch","ops":[{"expr":"($c5 ?? 0) + ($c4 ?? 0)","key":"c6","op":"define","replace":true},{"key":"b","op":"set","value":0},{"key":"a","op":"set","value":3}]}"#)
        let final = client.request(#"{"op":"get","key":"c6"}"#)["value"]
        XCTAssertNotNil(final)
        XCTAssertEqual(watcher.events().last?["new"], final)
    }

    /// A key written and then defined in one batch, its expression giving the value just written:
    /// its readers last saw it missing, so they recompute.
    func test_writtenThenDefinedInOneBatch_toTheSameValue_itsReadersRecompute() {
        let client = Harness().connect()
        client.request(#"{"op":"set","key":"x","value":1}"#)
        client.request(#"{"op":"define","key":"r","expr":"($c ?? 0) + 10"}"#)
        client.request(#"{"op":"batch","ops":[{"op":"set","key":"c","value":2},{"op":"define","key":"c","expr":"$x * 2","replace":true}]}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"c"}"#)["value"], 2)
        XCTAssertEqual(client.request(#"{"op":"get","key":"r"}"#)["value"], 12)
    }

    /// A failed batch that defined a `match()` computed leaves its pattern's source behind; a
    /// computed defined later over the same pattern still follows the keys it matches.
    func test_aMatchSourceLeftByAFailedBatch_stillReachesLaterReaders() {
        let client = Harness().connect()
        client.request(#"{"op":"define","key":"c4","expr":"1"}"#)
        let failed = client.request(#"{"op":"batch","ops":[{"op":"set","key":"k.2","value":0},{"op":"define","key":"c4","expr":"sum(values(match(\"k.*\")))","replace":true},{"op":"set","key":"c4","value":2}]}"#)
        XCTAssertEqual(failed["ok"], false)
        client.request(#"{"op":"define","key":"c3","expr":"len(keys(match(\"k.*\")))"}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"c3"}"#)["value"], 0)
        client.request(#"{"op":"set","key":"k.2","value":2}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"c3"}"#)["value"], 1)
        client.request(#"{"op":"set","key":"k.3","value":3}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"c3"}"#)["value"], 2)
    }
}
