import ObsCore
import XCTest

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
        session.receive(#"{"id":3,"op":"set","key":"e","value":1,"ephemeral":true}"#)
        XCTAssertEqual(storage.transactions.count, 1, "ephemeral keys are not persisted")
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

    func test_limit_valueSize() {
        var configuration = StoreConfiguration()
        configuration.maxValueBytes = 10
        let client = Harness(configuration: configuration).connect()
        XCTAssertEqual(client.request(#"{"op":"set","key":"a","value":"12345678"}"#)["ok"], true)
        XCTAssertEqual(errorCode(client.request(#"{"op":"set","key":"a","value":"123456789"}"#)), "too_large")
    }

    func test_limit_expressionLength() {
        var configuration = StoreConfiguration()
        configuration.maxExpressionBytes = 5
        let client = Harness(configuration: configuration).connect()
        XCTAssertEqual(client.request(#"{"op":"define","key":"a","expr":"1 + 2"}"#)["ok"], true)
        XCTAssertEqual(errorCode(client.request(#"{"op":"define","key":"a","expr":"1 + 23"}"#)), "too_large")
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

    func test_defaults() {
        let configuration = StoreConfiguration()
        XCTAssertEqual(configuration.maxValueBytes, 1 << 20)
        XCTAssertEqual(configuration.maxExpressionBytes, 64 << 10)
        XCTAssertEqual(configuration.maxWatchesPerConnection, 1024)
        XCTAssertEqual(configuration.historyRevisions, 10_000)
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
