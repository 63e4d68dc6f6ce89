@testable import ObsCore
import XCTest
import TestSupport

/// What the store hands its storage, restarts, and the limits of StoreConfiguration.
final class PersistenceAndLimitTests: XCTestCase {
    func test_everyCommittedTransactionIsCommittedToStorageBeforeTheResponse() {
        let storage = RecordingStorage()
        let store = try! Store(storage: storage, clock: ManualClock())
        let output = CaptureOutput()
        let session = Session(store: store, access: .write, output: output)
        storage.onCommit = { XCTAssertEqual(output.lines.count, 0, "committed before the response is written") }
        session.receive(#"{"id":1,"op":"batch","ops":[{"op":"set","key":"a","value":1},{"op":"define","key":"b","expr":"$a"},{"op":"bind","from":"a","to":"c"}]}"#)
        XCTAssertEqual(storage.transactions.count, 1)
        let transaction = storage.transactions[0]
        XCTAssertEqual(transaction.rev, 1)
        XCTAssertEqual(transaction.putKeys.map(\.key).sorted(), ["a", "c"])
        XCTAssertEqual(transaction.putDefinitions.map(\.key), ["b"])
        XCTAssertEqual(transaction.putBindings, [StoredBinding(from: "a", to: "c")])
        XCTAssertTrue(output.lines[0].needsSync, "a strict daemon holds this response until sync")
        output.lines.removeAll()
        storage.onCommit = nil
        session.receive(#"{"id":2,"op":"set","key":"a","value":1}"#)
        XCTAssertEqual(storage.transactions.count, 1, "nothing changed: nothing committed")
        XCTAssertFalse(output.lines[0].needsSync)
        output.lines.removeAll()
        session.receive(#"{"id":3,"op":"set","key":"e","value":1,"ephemeral":true}"#)
        // Ephemeral keys are not persisted, but their revision is: revisions never go back at a
        // restart.
        XCTAssertEqual(storage.transactions.count, 2)
        XCTAssertEqual(storage.transactions.last?.rev, 2)
        XCTAssertEqual(storage.transactions.last?.isEmpty, true, "the ephemeral key itself is not in it")
        XCTAssertTrue(output.lines[0].needsSync, "the answer waits for the revision to be written")
    }

    /// A storage that keeps nothing (obsd `--memory`) is handed nothing, and no answer waits.
    func test_storageThatKeepsNoCommits_isHandedNone() {
        let storage = RecordingStorage()
        storage.keepsCommits = false
        let store = try! Store(storage: storage, clock: ManualClock())
        let output = CaptureOutput()
        let session = Session(store: store, access: .write, output: output)
        session.receive(#"{"id":1,"op":"batch","ops":[{"op":"set","key":"a","value":1},{"op":"define","key":"b","expr":"$a"}]}"#)
        XCTAssertEqual(storage.transactions.count, 0)
        XCTAssertFalse(output.lines[0].needsSync)
        _ = output.take()
        session.receive(#"{"id":2,"op":"get","key":"b"}"#)
        let answer = output.take()
        XCTAssertEqual(answer.count, 1)
        XCTAssertTrue(answer[0].contains(#""value":1"#), answer[0])
    }

    func test_restart_restoresKeysDefinitionsBindingsAndRevision() {
        let storage = MemoryStorage()
        let first = Harness(storage: storage).connect()
        first.request(#"{"op":"set","key":"a","value":2}"#)
        first.request(#"{"op":"define","key":"b","expr":"$a * 10"}"#)
        first.request(#"{"op":"bind","from":"b","to":"c"}"#)
        first.request(#"{"op":"set","key":"t","value":1,"ttl_ms":60000}"#)
        let second = Harness(storage: storage)
        let client = second.connect()
        XCTAssertEqual(client.request(#"{"op":"ping"}"#)["rev"], 4)
        XCTAssertEqual(client.request(#"{"op":"get","key":"b"}"#)["value"], 20)
        client.request(#"{"op":"set","key":"a","value":3}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"c"}"#)["value"], 30)
        XCTAssertEqual(client.request(#"{"op":"describe","key":"a"}"#)["created_rev"], 1)
        XCTAssertNotNil(client.request(#"{"op":"describe","key":"t"}"#)["ttl_ms"])
    }

    /// Random binds (one-way and two-way, with and without a map), unbinds and restores of two
    /// bindings over four keys: after each, a store loaded from what the storage holds has the
    /// same bindings as the live one. A binding's record is named by its `to`, so rebinding a key
    /// as the `from` of a two-way binding must remove the record it had as a `to` (else the old
    /// binding came back at the restart).
    func test_bindingsAfterAnyBindsAndUnbinds_loadAsTheyWere() {
        var random = SplitMix64(seed: 20261204)
        var restored = 0
        defer { XCTAssertGreaterThan(restored, 10, "restores of two bindings that were taken") }
        for trial in 0..<40 {
            let storage = MemoryStorage()
            let live = Harness(storage: storage).connect()
            var steps: [String] = []
            for _ in 0..<10 {
                let request = randomBindingRequest(over: ["p", "q", "r", "s"], using: &random)
                if live.request(request)["ok"] == true, request.contains("restore") { restored += 1 }
                steps.append(request)
                let loaded = Harness(storage: storage).connect()
                XCTAssertEqual(dumpedBindings(loaded), dumpedBindings(live), "trial \(trial): \(steps)")
            }
        }
    }

    /// What an earlier version left: `bind x z`, then `bind z a --two-way` kept z's record beside
    /// a's. Loaded by name, z's record comes after a's, but the two-way binding is the later
    /// (the earlier version deleted a binding's record whenever the binding went, except then):
    /// it loads, whole, the other is reported, and the next commit deletes its record.
    func test_aRecordAnEarlierVersionKept_underATwoWayBindingsFrom_isDisplacedByIt_andDeletedAtTheNextCommit() {
        let storage = MemoryStorage(StoredState(rev: 5, bindings: [
            StoredBinding(from: "z", to: "a", twoWay: true),
            StoredBinding(from: "x", to: "z", map: "value + 1")]))
        let harness = Harness(storage: storage)
        XCTAssertEqual(harness.store.displacedAtLoad, [DisplacedBinding(binding: StoredBinding(from: "x", to: "z", map: "value + 1"),
                                                                        by: StoredBinding(from: "z", to: "a", twoWay: true),
                                                                        why: .leftOver)])
        let client = harness.connect()
        XCTAssertEqual((client.request(#"{"op":"dump"}"#)["bindings"]?.arrayValue ?? []).map(\.encoded),
                       [#"{"from":"z","to":"a","two_way":true}"#])
        XCTAssertEqual(client.request(#"{"op":"stats"}"#)["bindings"], 1)
        client.request(#"{"op":"set","key":"x","value":5}"#)
        XCTAssertEqual(errorCode(client.request(#"{"op":"get","key":"z"}"#)), "not_found", "x -> z is not installed")
        client.request(#"{"op":"set","key":"z","value":3}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"a"}"#)["value"], 3)
        XCTAssertEqual(try storage.load().bindings, [StoredBinding(from: "z", to: "a", twoWay: true)], "the kept record deleted")
        XCTAssertEqual(Harness(storage: storage).store.displacedAtLoad, [])
    }

    /// A two-way binding turned round by an earlier version (`bind p q --two-way`, then `bind q p
    /// --two-way`, which kept q's record): the records cannot tell which was made last. One of
    /// the two loads, whole, and the report says it cannot tell.
    func test_aTwoWayBindingTurnedRoundByAnEarlierVersion_loadsOneOfTheTwo_whole_andSaysItCannotTell() {
        let state = StoredState(rev: 5, bindings: [
            StoredBinding(from: "q", to: "p", twoWay: true),
            StoredBinding(from: "p", to: "q", map: "value * 2", twoWay: true, unmap: "value / 2")])
        let harness = Harness(storage: MemoryStorage(state))
        XCTAssertEqual(harness.store.displacedAtLoad.map(\.binding), [state.bindings[0]], "reported")
        XCTAssertEqual(harness.store.displacedAtLoad.map(\.why), [.undecidable])
        let client = harness.connect()
        XCTAssertEqual((client.request(#"{"op":"dump"}"#)["bindings"]?.arrayValue ?? []).map(\.encoded),
                       [#"{"from":"p","map":"value * 2","to":"q","two_way":true,"unmap":"value / 2"}"#])
        XCTAssertEqual(client.request(#"{"op":"stats"}"#)["bindings"], 1)
        client.request(#"{"op":"set","key":"p","value":3}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"q"}"#)["value"], 6)
        client.request(#"{"op":"set","key":"q","value":10}"#)
        XCTAssertEqual(client.request(#"{"op":"get","key":"p"}"#)["value"], 5)
        XCTAssertEqual(client.request(#"{"op":"get","key":"q"}"#)["value"], 10)
    }

    /// Records as the earlier versions wrote them (without the deletes the fix added: a key's
    /// record kept when the key became the `from` of a two-way binding), after random binds,
    /// unbinds and restores: a store loaded from them has the live bindings, but where the records
    /// cannot tell (a two-way binding turned round), which it reports; its next commit deletes
    /// what was left over, and nothing is left over at the next load.
    func test_recordsAnEarlierVersionLeft_loadTheLiveBindings_andTheNextCommitDeletesTheRest() throws {
        // Chains, where the key left over is the `from` of a two-way binding that is itself left
        // over (name order would pick the wrong one).
        for steps in [[#"{"op":"bind","from":"p","to":"q","two_way":true}"#, #"{"op":"bind","from":"q","to":"r","two_way":true}"#,
                       #"{"op":"bind","from":"s","to":"p"}"#],
                      [#"{"op":"bind","from":"b","to":"c","two_way":true}"#, #"{"op":"bind","from":"c","to":"d","two_way":true}"#,
                       #"{"op":"bind","from":"a","to":"b","two_way":true}"#]] {
            let earlier = EarlierVersionStorage()
            let live = Client(store: try Store(configuration: .init(), storage: earlier, clock: ManualClock()), access: .write)
            for step in steps { XCTAssertEqual(live.request(step)["ok"], true, step) }
            XCTAssertEqual(dumpedBindings(Harness(storage: MemoryStorage(try earlier.load())).connect()), dumpedBindings(live), "\(steps)")
        }
        var random = SplitMix64(seed: 1977)
        var leftOver = 0, undecidable = 0
        for trial in 0..<60 {
            let earlier = EarlierVersionStorage()
            let live = Client(store: try Store(configuration: .init(), storage: earlier, clock: ManualClock()), access: .write)
            var steps: [String] = []
            for _ in 0..<12 {
                let request = randomBindingRequest(over: ["p", "q", "r", "s"], using: &random)
                live.request(request)
                steps.append(request)
                let storage = MemoryStorage(try earlier.load())
                let harness = Harness(storage: storage)
                let why = harness.store.displacedAtLoad.map(\.why)
                leftOver += why.filter { $0 == .leftOver }.count
                guard !why.contains(.undecidable) else {
                    undecidable += 1
                    continue
                }
                let loaded = harness.connect()
                XCTAssertEqual(dumpedBindings(loaded), dumpedBindings(live), "trial \(trial): \(steps)")
                loaded.request(#"{"op":"set","key":"k","value":1}"#)
                XCTAssertEqual(Harness(storage: storage).store.displacedAtLoad, [], "trial \(trial): \(steps)")
                XCTAssertEqual(dumpedBindings(Harness(storage: storage).connect()), dumpedBindings(live), "trial \(trial): \(steps)")
            }
        }
        XCTAssertGreaterThan(leftOver, 20, "records left over")
        XCTAssertGreaterThan(undecidable, 0, "two-way bindings turned round")
    }

    func test_limit_valueSize() {
        var configuration = StoreConfiguration()
        configuration.maxValueBytes = 10
        let client = Harness(configuration: configuration).connect()
        XCTAssertEqual(client.request(#"{"op":"set","key":"a","value":"12345678"}"#)["ok"], true)
        let refused = client.request(#"{"op":"set","key":"a","value":"123456789"}"#)
        XCTAssertEqual(errorCode(refused), "too_large")
        XCTAssertEqual(refused["error"]?["limit"]?.stringValue, "max_value_bytes", "the bound it passed, in the details")
    }

    func test_limit_expressionLength() {
        var configuration = StoreConfiguration()
        configuration.maxExpressionBytes = 5
        let client = Harness(configuration: configuration).connect()
        XCTAssertEqual(client.request(#"{"op":"define","key":"a","expr":"1 + 2"}"#)["ok"], true)
        XCTAssertEqual(client.request(#"{"op":"define","key":"a","expr":"1 + 23"}"#)["error"]?["limit"]?.stringValue, "max_expression_bytes")
        XCTAssertEqual(errorCode(client.request(#"{"op":"eval","expr":"1 + 23"}"#)), "too_large")
        XCTAssertEqual(errorCode(client.request(#"{"op":"bind","from":"x","to":"y","map":"value + 1"}"#)), "too_large")
    }

    func test_limit_jsonDepth() {
        var configuration = StoreConfiguration()
        configuration.maxJSONDepth = 4
        let client = Harness(configuration: configuration).connect()
        XCTAssertEqual(client.request(#"{"op":"set","key":"a","value":[[[1]]]}"#)["ok"], true)
        XCTAssertTrue(client.send(#"{"op":"set","key":"a","value":[[[[1]]]]}"#)[0].contains(#""code":"bad_json""#))
    }

    /// ```
    /// a = 1 <- b = [$a] <- c = [$b] <- d = [$c] <- e = [$d]
    /// ```
    /// With a limit of 4 levels per line, a value may nest 3 (the line's object takes one): `e`
    /// would nest 4, and fails instead of being a value no client can decode.
    func test_limit_jsonDepth_ofComputedResults() {
        var configuration = StoreConfiguration()
        configuration.maxJSONDepth = 4
        let client = Harness(configuration: configuration).connect()
        client.request(#"{"op":"set","key":"a","value":1}"#)
        client.request(#"{"op":"define","key":"b","expr":"[$a]"}"#)
        client.request(#"{"op":"define","key":"c","expr":"[$b]"}"#)
        client.request(#"{"op":"define","key":"d","expr":"[$c]"}"#)
        client.request(#"{"op":"define","key":"e","expr":"[$d]"}"#)
        XCTAssertTrue(client.send(#"{"op":"get","key":"d"}"#)[0].contains(#""value":[[[1]]]"#))
        let e = client.send(#"{"op":"get","key":"e"}"#)[0]
        XCTAssertTrue(e.contains(#""code":"eval_error""#) && e.contains("nests deeper than 3 levels"), e)
    }

    func test_limit_history() {
        var configuration = StoreConfiguration()
        configuration.historyRevisions = 2
        let harness = Harness(configuration: configuration)
        let client = harness.connect()
        for value in 1...4 { client.request(#"{"op":"set","key":"a","value":\#(value)}"#) }
        client.request(#"{"op":"watch","keys":["a"],"since":2}"#)
        XCTAssertFalse(client.pendingEvents.contains { $0.contains("compacted") })
        client.request(#"{"op":"watch","keys":["a"],"since":1}"#)
        XCTAssertTrue(client.pendingEvents[0].contains("compacted"))
    }

    /// History is bounded in bytes too: large values push the oldest revisions out long before
    /// the count limit, and a `since` before what is kept gets `compacted` and a snapshot.
    func test_limit_historyBytes_dropsTheOldestRevisionsFirst() {
        var configuration = StoreConfiguration()
        configuration.historyBytes = 13_000
        let harness = Harness(configuration: configuration)
        let client = harness.connect()
        let big = String(repeating: "x", count: 3000)
        for round in 1...10 { client.request(#"{"op":"set","key":"a","value":"\#(round)\#(big)"}"#) }
        client.request(#"{"op":"set","key":"small","value":1}"#)
        // Each overwrite keeps its old and its new value (about 6 KB): two of them fit, and the
        // small last one.
        let watcher = harness.connect()
        let kept = watcher.send(#"{"id":1,"op":"watch","keys":["**"],"since":8}"#)
        XCTAssertFalse(kept.contains { $0.contains("compacted") }, "\(kept)")
        XCTAssertEqual(kept.filter { $0.contains(#""event":"change""#) }.count, 3)
        let compacted = watcher.send(#"{"id":2,"op":"watch","keys":["**"],"since":7}"#)
        XCTAssertTrue(compacted[1].hasPrefix(#"{"event":"compacted","watch":2,"compact_rev":8}"#), "\(compacted)")
        XCTAssertEqual(compacted.filter { $0.contains(#""event":"initial""#) }.count, 2, "then a snapshot")
    }

    /// A key set again and again with a long TTL, and watches made and removed with a long
    /// progress_ms: the timer heaps keep only a bounded number of stale entries.
    func test_timerHeaps_stayBounded_underRepeatedChanges() {
        let harness = Harness()
        let client = harness.connect()
        for round in 0..<20_000 {
            // Each set moves the deadline: a new entry, and the previous one stale.
            harness.clock.advance(0.001)
            client.request(#"{"op":"set","key":"a","value":\#(round),"ttl_ms":31536000000}"#)
        }
        XCTAssertLessThanOrEqual(harness.store.expiries.count, 2048, "one live entry, and stale ones up to the compaction point")
        for round in 1...20_000 {
            client.request(#"{"op":"watch","keys":["a"],"initial":false,"progress_ms":3600000}"#)
            client.request(#"{"op":"unwatch","watch":\#(round)}"#)
        }
        XCTAssertLessThanOrEqual(harness.store.watches.timers.count, 2048)
    }

    /// Ephemeral keys set and deleted under ever new names: the session forgets the names of keys
    /// it no longer owns, and still removes the ones it owns when it closes.
    func test_ephemeralKeyNames_stayBounded_underChurn() {
        let harness = Harness()
        let client = harness.connect()
        for round in 0..<10_000 {
            client.request(#"{"op":"set","key":"e\#(round)","value":1,"ephemeral":true}"#)
            if round % 10 != 0 { client.request(#"{"op":"delete","key":"e\#(round)"}"#) }
        }
        XCTAssertLessThanOrEqual(client.session.ephemeralKeys.count, 3 * 1000, "the 1,000 kept, and names not yet forgotten")
        client.session.close()
        XCTAssertEqual(harness.connect().request(#"{"op":"list"}"#)["keys"], .array([]))
    }

    func test_defaults() {
        let configuration = StoreConfiguration()
        XCTAssertEqual(configuration.maxValueBytes, 1 << 20)
        XCTAssertEqual(configuration.maxExpressionBytes, 64 << 10)
        XCTAssertEqual(configuration.maxWatchesPerConnection, 1024)
        XCTAssertEqual(configuration.historyRevisions, 10_000)
        XCTAssertEqual(configuration.historyBytes, 64 << 20)
        XCTAssertEqual(configuration.maxOutputBytes, 8 << 20)
        XCTAssertEqual(configuration.maxJSONDepth, 128)
        XCTAssertEqual(configuration.maxLineBytes, 1 << 20)
    }

    func test_docsProtocolListsTheOperationTable() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../docs/protocol.md")
        let text = try String(contentsOf: url.standardized, encoding: .utf8)
        XCTAssertTrue(text.contains(Session.operationTableMarkdown), "docs/protocol.md must contain:\n\(Session.operationTableMarkdown)")
    }

    func test_docsProtocolListsEveryErrorCodeAndEvent() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../docs/protocol.md")
        let text = try String(contentsOf: url.standardized, encoding: .utf8)
        for code in ObsError.Code.all { XCTAssertTrue(text.contains("| `\(code.rawValue)` |"), "error code \(code) is not in the table") }
        for event in EventName.allCases { XCTAssertTrue(text.contains("| `\(event.rawValue)` |"), "event \(event) is not in the table") }
    }
}

final class RecordingStorage: StateStorage {
    var transactions: [StoredTransaction] = []
    var keepsCommits = true
    var onCommit: (() -> Void)?
    func load() throws(ObsError) -> StoredState { StoredState() }
    func commit(_ transaction: StoredTransaction) throws(ObsError) {
        onCommit?()
        transactions.append(transaction)
    }
    func sync() throws(ObsError) {}
}

/// Stores commits as the versions before the fix of binding records did: without deleting the
/// record of a key that becomes the `from` of a two-way binding the same commit puts.
final class EarlierVersionStorage: StateStorage {
    private let storage = MemoryStorage()

    func load() throws(ObsError) -> StoredState { try storage.load() }

    func commit(_ transaction: StoredTransaction) throws(ObsError) {
        var transaction = transaction
        let twoWayFroms = Set(transaction.putBindings.filter(\.twoWay).map(\.from))
        transaction.deletedBindings.removeAll { twoWayFroms.contains($0) }
        try storage.commit(transaction)
    }

    func sync() throws(ObsError) {}
}
