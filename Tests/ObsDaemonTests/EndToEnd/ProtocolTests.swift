// Requests over the real socket: framing, limits, many clients, slow clients, durability.
import Foundation
import Glibc
import ObsCore
import TestSupport
import XCTest

final class ProtocolTests: XCTestCase {
    private func start(_ config: String = "", _ sandbox: Sandbox) throws -> ObsdProcess {
        try sandbox.write(config, to: sandbox.config)
        let obsd = try ObsdProcess(sandbox, arguments: ["--config", sandbox.config, "--socket", sandbox.socket,
                                                        "--state-dir", sandbox.state])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        return obsd
    }

    func test_pipelinedRequests_andTheSpecExample() throws {
        let sandbox = try Sandbox()
        let obsd = try start("", sandbox)
        let client = try Client(sandbox.socket)
        client.send("""
            {"id":1,"op":"set","key":"price","value":3}
            {"id":2,"op":"set","key":"qty","value":2}
            {"id":3,"op":"define","key":"total","expr":"$price * $qty"}
            {"id":4,"op":"watch","keys":["total"]}
            {"id":5,"op":"batch","ops":[{"op":"set","key":"price","value":4},{"op":"set","key":"qty","value":5}]}

            """)
        var lines: [String] = []
        while lines.count < 8, let line = client.readLine() { lines.append(line) }
        XCTAssertEqual(Array(lines.prefix(6)), [
            #"{"id":1,"ok":true,"rev":1,"changed":true}"#,
            #"{"id":2,"ok":true,"rev":2,"changed":true}"#,
            #"{"id":3,"ok":true,"rev":3,"deps":["price","qty"]}"#,
            #"{"id":4,"ok":true,"watch":1}"#,
            #"{"event":"initial","watch":1,"key":"total","kind":"computed","value":6,"rev":3}"#,
            #"{"event":"synced","watch":1,"rev":3}"#,
        ])
        XCTAssertEqual(Set(lines.suffix(2)), [
            #"{"id":5,"ok":true,"rev":4,"results":[{"rev":4,"changed":true},{"rev":4,"changed":true}]}"#,
            #"{"event":"change","watch":1,"key":"total","old":6,"new":20,"rev":4,"created":false}"#,
        ])
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
    }

    func test_malformedLines_answerBadJSON_andTheConnectionStaysUsable() throws {
        let sandbox = try Sandbox()
        let obsd = try start("", sandbox)
        let client = try Client(sandbox.socket)
        let bad = ["not json", "[1,2]", "{\"op\":", "{\"op\":\"ping\"} trailing", "\u{1}", "{\"a\":1e400}", "\"str\""]
        for line in bad { client.send(line + "\n") }
        for line in bad { XCTAssertEqual(errorCode(client.readLine()), "bad_json", line) }
        client.send("{\"id\":7}\n{\"id\":8,\"op\":\"nope\"}\n{\"id\":9,\"op\":\"ping\"}\r\n\n   \n")
        XCTAssertEqual(errorCode(client.readLine()), "bad_request")
        XCTAssertEqual(errorCode(client.readLine()), "unknown_op")
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true, "CRLF accepted, blank lines ignored")
        withExtendedLifetime(obsd) {}
    }

    func test_overlongLine_answersTooLarge_thenCloses_andOthersAreUnaffected() throws {
        let sandbox = try Sandbox()
        let obsd = try start("max_line_bytes = 1K\n", sandbox)
        let other = try Client(sandbox.socket)
        let client = try Client(sandbox.socket)
        client.send("{\"id\":1,\"op\":\"ping\"}\n")
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        client.send("{\"op\":\"set\",\"key\":\"k\",\"value\":\"" + String(repeating: "x", count: 2000) + "\"}\n{\"op\":\"ping\"}\n")
        XCTAssertEqual(errorCode(client.readLine()), "too_large")
        XCTAssertTrue(client.readsEOF(), "the connection is closed after too_large")
        other.send("{\"op\":\"get\",\"key\":\"k\"}\n")
        XCTAssertEqual(errorCode(other.readLine()), "not_found", "the overlong set was not applied")
        withExtendedLifetime(obsd) {}
    }

    func test_partialLineAtDisconnect_isNeverApplied() throws {
        let sandbox = try Sandbox()
        let obsd = try start("", sandbox)
        do {
            let client = try Client(sandbox.socket)
            client.send("{\"id\":1,\"op\":\"set\",\"key\":\"a\",\"value\":1}\n{\"op\":\"set\",\"key\":\"b\",\"value\":2}")
            XCTAssertEqual(json(client.readLine())["rev"] as? Int, 1)
        }
        let checker = try Client(sandbox.socket)
        checker.send("{\"op\":\"ping\"}\n{\"op\":\"get\",\"key\":\"b\"}\n")
        XCTAssertEqual(json(checker.readLine())["rev"] as? Int, 1)
        XCTAssertEqual(errorCode(checker.readLine()), "not_found")
        withExtendedLifetime(obsd) {}
    }

    func test_connectionLimit_refusesTheExtraOne_withLimit() throws {
        let sandbox = try Sandbox()
        let obsd = try start("max_connections = 3\n", sandbox)
        // The readiness probe's connection may still be open for a moment: wait until only the
        // first client counts.
        let first = try Client(sandbox.socket)
        waitFor("the readiness probe to be closed") {
            first.send("{\"op\":\"stats\"}\n")
            return json(first.readLine())["connections"] as? Int == 1
        }
        let clients = try [first] + (0..<2).map { _ in try Client(sandbox.socket) }
        for client in clients {
            client.send("{\"op\":\"ping\"}\n")
            XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        }
        let extra = try Client(sandbox.socket)
        XCTAssertEqual(errorCode(extra.readLine()), "limit")
        XCTAssertTrue(extra.readsEOF())
        clients[0].send("{\"op\":\"ping\"}\n")
        XCTAssertEqual(json(clients[0].readLine())["ok"] as? Bool, true, "the others are unaffected")
        withExtendedLifetime(obsd) {}
    }

    func test_ephemeralKey_isRemovedWhenItsConnectionCloses() throws {
        let sandbox = try Sandbox()
        let obsd = try start("", sandbox)
        let watcher = try Client(sandbox.socket)
        watcher.send("{\"op\":\"watch\",\"keys\":[\"presence\"]}\n")
        XCTAssertEqual(json(watcher.readLine())["ok"] as? Bool, true)
        XCTAssertEqual(json(watcher.readLine())["event"] as? String, "synced")
        do {
            let owner = try Client(sandbox.socket)
            owner.send("{\"op\":\"set\",\"key\":\"presence\",\"value\":true,\"ephemeral\":true}\n")
            XCTAssertEqual(json(owner.readLine())["ok"] as? Bool, true)
            XCTAssertEqual(json(watcher.readLine())["event"] as? String, "change")
        }
        let removed = json(watcher.readLine())
        XCTAssertEqual(removed["event"] as? String, "delete")
        XCTAssertEqual(removed["reason"] as? String, "ephemeral")
        withExtendedLifetime(obsd) {}
    }

    /// 200 clients at once, each watching its own key and a shared one, writing its own key while
    /// another client writes the shared one; every event is checked.
    func test_200ConcurrentClients_mixingWritesAndWatches_getEveryEvent() throws {
        let sandbox = try Sandbox()
        let obsd = try start("", sandbox)
        let count = 200
        let clients = try (0..<count).map { _ in try Client(sandbox.socket) }
        for (index, client) in clients.enumerated() {
            client.send("{\"id\":\"w\",\"op\":\"watch\",\"keys\":[\"c.\(index)\",\"shared\"]}\n")
        }
        for client in clients {
            XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
            XCTAssertEqual(json(client.readLine())["event"] as? String, "synced")
        }
        // Everyone writes at once, pipelined; the shared writer interleaves with them.
        let writer = try Client(sandbox.socket)
        let done = DispatchGroup()
        DispatchQueue.global().async(group: done) {
            for value in 1...10 {
                writer.send("{\"op\":\"set\",\"key\":\"shared\",\"value\":\(value)}\n")
                _ = writer.readLine()
            }
        }
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let sets = (1...5).map { "{\"id\":\($0),\"op\":\"set\",\"key\":\"c.\(index)\",\"value\":\($0)}\n" }
            clients[index].send(sets.joined())
        }
        XCTAssertEqual(done.wait(timeout: .now() + 60), .success)
        let failures = LastLines(count: count)
        DispatchQueue.concurrentPerform(iterations: count) { index in
            var own: [Int] = []
            var shared: [Int] = []
            var responses = 0
            var lastRev = 0
            while responses < 5 || own.count < 5 || shared.count < 10, let line = clients[index].readLine() {
                let object = json(line)
                if object["ok"] != nil {
                    responses += 1
                    continue
                }
                guard object["event"] as? String == "change", let rev = object["rev"] as? Int, rev > lastRev else {
                    failures.set(index, "unexpected or out-of-order line: \(line)")
                    return
                }
                lastRev = rev
                if object["key"] as? String == "shared" { shared.append(object["new"] as? Int ?? -1) }
                else { own.append(object["new"] as? Int ?? -1) }
            }
            if own != [1, 2, 3, 4, 5] || shared != Array(1...10) || responses != 5 {
                failures.set(index, "own \(own), shared \(shared), responses \(responses)")
            }
        }
        for index in 0..<count { XCTAssertNil(failures.get(index), "client \(index)") }
        withExtendedLifetime(obsd) {}
    }

    /// A watcher that never reads: the others keep working, the daemon's memory stays bounded (the
    /// watcher's events stop at output_buffer_bytes), and after client_timeout it is disconnected.
    func test_watcherThatNeverReads_doesNotSlowOthers_andMemoryStaysBounded() throws {
        let sandbox = try Sandbox()
        // A short history, so that what the store keeps for `since` does not hide what we measure.
        let obsd = try start("output_buffer_bytes = 256K\nclient_timeout = 1s\nhistory = 100\n", sandbox)
        let stalled = try Client(sandbox.socket)
        stalled.send("{\"op\":\"watch\",\"keys\":[\"**\"]}\n")
        let writer = try Client(sandbox.socket)
        writer.send("{\"op\":\"ping\"}\n")
        XCTAssertNotNil(writer.readLine())
        // Anonymous memory: the stalled watcher's events would be heap; the commit log file being
        // folded meanwhile is mapped, its pages the kernel's to drop.
        let baseline = obsd.anonymousKiB
        let value = String(repeating: "v", count: 4000)
        // 10,000 changes of 4 KB: 40 MB of events that the stalled watcher would hold if unbounded.
        for batch in 0..<100 {
            let lines = (0..<100).map { "{\"op\":\"set\",\"key\":\"k.\($0)\",\"value\":\"\(value)\(batch)\"}\n" }
            writer.send(lines.joined())
            for _ in 0..<100 { XCTAssertEqual(json(writer.readLine())["ok"] as? Bool, true) }
        }
        let grown = obsd.anonymousKiB - baseline
        XCTAssertLessThan(grown, 20 * 1024, "resident memory grew by \(grown) KiB")
        writer.send("{\"op\":\"stats\"}\n")
        XCTAssertGreaterThan(json(writer.readLine())["overflows"] as? Int ?? 0, 0)
        waitFor("the stalled watcher to be disconnected after client_timeout") {
            writer.send("{\"op\":\"stats\"}\n")
            return json(writer.readLine())["connections"] as? Int == 1
        }
        withExtendedLifetime(obsd) {}
    }
}

final class DurabilityTests: XCTestCase {
    /// Streams acknowledged writes, kills obsd with SIGKILL in the middle, restarts it, and checks
    /// that every acknowledged write is there and revisions continue after the last one.
    private func killDuringWrites(durability: String) throws {
        let sandbox = try Sandbox()
        let arguments = ["--socket", sandbox.socket, "--state-dir", sandbox.state, "--durability", durability]
        let obsd = try ObsdProcess(sandbox, arguments: arguments)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let client = try Client(sandbox.socket)
        let acknowledged = AcknowledgedWrites()
        let writing = DispatchGroup()
        DispatchQueue.global().async(group: writing) {
            for index in 0..<100_000 {
                // Pipelined in pairs so writes are in flight when the kill lands.
                guard client.send("{\"op\":\"set\",\"key\":\"k.\(index)\",\"value\":\(index)}\n"),
                      let line = client.readLine(), let rev = json(line)["rev"] as? Int else { return }
                acknowledged.add(index: index, rev: rev)
            }
        }
        try killAndCheckAcknowledgedWrites(obsd, sandbox, arguments: arguments, acknowledged: acknowledged,
                                           minimum: 500, writing: writing)
    }

    func test_kill9_normal_losesNoAcknowledgedWrite() throws {
        try killDuringWrites(durability: "normal")
    }

    func test_kill9_strict_losesNoAcknowledgedWrite() throws {
        try killDuringWrites(durability: "strict")
    }

    /// A two-way binding turned round (`bind q p` after `bind p q`, both two-way), and a key
    /// that was a binding's `to` made the `from` of a two-way binding: after a restart of the
    /// daemon on its SQLite database, the bindings are those it had, not the ones replaced.
    func test_restart_afterRebindingAKeyAsTheFromOfATwoWayBinding_restoresTheBindingsItHad() throws {
        let sandbox = try Sandbox()
        let arguments = ["--socket", sandbox.socket, "--state-dir", sandbox.state]
        func bindings(_ client: Client) -> [String] {
            client.send(#"{"op":"dump"}"# + "\n")
            let dump = json(client.readLine())["bindings"] as? [[String: Any]] ?? []
            return dump.map { "\($0["from"] ?? "")->\($0["to"] ?? "") \($0["two_way"] as? Bool == true ? "two-way" : "") \($0["map"] ?? "")" }.sorted()
        }
        var before: [String] = []
        do {
            let obsd = try ObsdProcess(sandbox, arguments: arguments)
            XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
            let client = try Client(sandbox.socket)
            client.send("""
                {"op":"bind","from":"p","to":"q","map":"value * 2","unmap":"value / 2","two_way":true}
                {"op":"bind","from":"q","to":"p","two_way":true}
                {"op":"bind","from":"a","to":"b","map":"value + 1"}
                {"op":"bind","from":"b","to":"c","two_way":true}

                """)
            for _ in 0..<4 { XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true) }
            before = bindings(client)
            XCTAssertEqual(before, ["b->c two-way ", "q->p two-way "])
            obsd.signal(SIGTERM)
            XCTAssertEqual(obsd.waitForExit(), 0)
        }
        let obsd = try ObsdProcess(sandbox, arguments: arguments)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let client = try Client(sandbox.socket)
        XCTAssertEqual(bindings(client), before)
        client.send(#"{"op":"set","key":"p","value":4}"# + "\n" + #"{"op":"get","key":"q"}"# + "\n")
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        XCTAssertEqual(json(client.readLine())["value"] as? Int, 4, "q follows p unchanged (the replaced binding doubled it)")
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
    }

    /// A database as an earlier version left it after `bind x z --map 'value + 1'` and `bind z a
    /// --two-way`: z's record kept beside a's. `obsd --check` and the start say the binding x -> z
    /// is not loaded and why; z <-> a is; the next change deletes the record, and the next start
    /// finds nothing left over.
    func test_aBindingRecordAnEarlierVersionLeft_isReported_notLoaded_andDeletedByTheNextChange() throws {
        let sandbox = try Sandbox()
        let arguments = ["--socket", sandbox.socket, "--state-dir", sandbox.state]
        func run(_ body: (Client) throws -> Void) throws -> String {
            let obsd = try ObsdProcess(sandbox, arguments: arguments)
            XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
            try body(try Client(sandbox.socket))
            obsd.signal(SIGTERM)
            XCTAssertEqual(obsd.waitForExit(), 0)
            return obsd.log
        }
        func check() throws -> String {
            let check = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
            XCTAssertEqual(check.waitForExit(), 0, check.output)
            return check.output
        }
        _ = try run { client in XCTAssertEqual(client.request(#"{"op":"set","key":"x","value":1}"#)?["ok"] as? Bool, true) }
        // The rows the earlier version wrote, with their checksums, as obsd's storage writes them.
        let database = try SQLiteStorage(path: sandbox.state + "/obsd.db")
        var rows = StoredTransaction(rev: try database.load().rev + 1)
        rows.putBindings = [StoredBinding(from: "x", to: "z", map: "value + 1"), StoredBinding(from: "z", to: "a", twoWay: true)]
        try database.commit(rows)
        database.close()

        let said = "the stored binding x -> z (map value + 1) is not loaded: an earlier version left its record when z became the "
            + "from of z <-> a; the next change deletes it"
        XCTAssertTrue(try check().contains(said))
        let log = try run { client in
            client.send(#"{"op":"dump"}"# + "\n")
            let bindings = json(client.readLine())["bindings"] as? [[String: Any]] ?? []
            XCTAssertEqual(bindings.map { "\($0["from"] ?? "") \($0["to"] ?? "") \($0["two_way"] ?? "")" }, ["z a 1"])
            XCTAssertEqual(client.request(#"{"op":"set","key":"x","value":2}"#)?["ok"] as? Bool, true)
            XCTAssertEqual(client.request(#"{"op":"get","key":"z"}"#)?["ok"] as? Bool, false, "x -> z is not installed")
        }
        XCTAssertTrue(log.contains(said), log)
        XCTAssertFalse(try check().contains("is not loaded"))
        XCTAssertFalse(try run { _ in }.contains("is not loaded"))
    }

    func test_restart_restoresComputedsAndBindings() throws {
        let sandbox = try Sandbox()
        let arguments = ["--socket", sandbox.socket, "--state-dir", sandbox.state]
        do {
            let obsd = try ObsdProcess(sandbox, arguments: arguments)
            XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
            let client = try Client(sandbox.socket)
            client.send("""
                {"op":"set","key":"a","value":2}
                {"op":"define","key":"double","expr":"$a * 2"}
                {"op":"bind","from":"a","to":"copy"}
                {"op":"set","key":"gone","value":1,"ephemeral":true}

                """)
            for _ in 0..<4 { XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true) }
            obsd.signal(SIGTERM)
            XCTAssertEqual(obsd.waitForExit(), 0)
        }
        let obsd = try ObsdProcess(sandbox, arguments: arguments)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let client = try Client(sandbox.socket)
        client.send("{\"op\":\"get\",\"key\":\"double\"}\n{\"op\":\"set\",\"key\":\"a\",\"value\":5}\n{\"op\":\"get\",\"key\":\"copy\"}\n{\"op\":\"get\",\"key\":\"gone\"}\n")
        XCTAssertEqual(json(client.readLine())["value"] as? Int, 4)
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        XCTAssertEqual(json(client.readLine())["value"] as? Int, 5, "the binding was restored")
        XCTAssertEqual(errorCode(client.readLine()), "not_found", "ephemeral keys are not persisted")
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
    }
}
