// The group commit: each turn's writes are appended to the commit log as one batch by the loop at
// the end of the turn (and fsynced there in strict mode), so the promises of normal and strict
// rest on the answers (and change events) waiting for their batch. These tests slow the writer
// down (OBSD_TEST_WRITE_DELAY) so that requests arrive while a batch is being written, and read
// the log's files and the database file themselves, so that an answer sent too early is caught.
import CSQLite
import Foundation
import Glibc
import ObsCore
import TestSupport
import XCTest

final class GroupCommitEndToEndTests: XCTestCase {
    /// The value stored for `key`, read from the files themselves: in the commit log's files,
    /// where a batch is written, or else in the database's keys table (read with a connection of
    /// our own: it sees every committed transaction, fsynced or not), where a checkpoint moves it.
    /// The files are read first: a checkpoint that folds one and deletes it meanwhile has put its
    /// records in the table before.
    private func storedValue(_ sandbox: Sandbox, _ key: String) -> String? {
        var logged = CommitLog.Replay()
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: sandbox.state)) ?? [])
            .filter { $0.hasPrefix("obsd.commitlog.") }
            .sorted { Int($0.dropFirst("obsd.commitlog.".count)) ?? 0 < Int($1.dropFirst("obsd.commitlog.".count)) ?? 0 }
        for name in names {
            guard let data = FileManager.default.contents(atPath: sandbox.state + "/" + name) else { continue }
            data.withUnsafeBytes { bytes in
                guard let contents = try? CommitLogFile.read(bytes, newest: true) else { return }
                for frame in contents.frames { try? CommitLog.replay(UnsafeRawBufferPointer(rebasing: bytes[frame.records]), onto: &logged) }
            }
        }
        if let value = logged.state.keys.first(where: { $0.key == key })?.value { return value.encoded }
        var db: OpaquePointer?
        defer { sqlite3_close_v2(db) }
        guard sqlite3_open_v2(sandbox.state + "/obsd.db", &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return nil }
        sqlite3_busy_timeout(db, 5000)
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(db, "SELECT value FROM keys WHERE key = ?1", -1, &statement, nil) == SQLITE_OK else { return nil }
        sqlite3_bind_text(statement, 1, key, -1, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
        guard sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) else { return nil }
        return String(cString: text)
    }

    private func start(_ sandbox: Sandbox, durability: String, delay: Double) throws -> ObsdProcess {
        #if !DEBUG
        // obsd reads the hook in debug builds only, and these tests are built like it.
        if delay > 0 { throw XCTSkip("OBSD_TEST_WRITE_DELAY needs a debug build of obsd") }
        #endif
        let obsd = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--state-dir", sandbox.state,
                                                        "--durability", durability],
                                   environment: ["OBSD_TEST_WRITE_DELAY": String(delay)])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        return obsd
    }

    /// A writer 0.3 s slow: the acknowledgement of a set, and the change event a watcher gets for
    /// it, arrive only once the value is in the database file. Were either sent at commit time, as
    /// the loop goes on, the file would not have it yet.
    private func answersAndEventsWaitForTheirBatch(durability: String) throws {
        let sandbox = try Sandbox()
        let obsd = try start(sandbox, durability: durability, delay: 0.3)
        let watcher = try Client(sandbox.socket)
        watcher.send("{\"id\":1,\"op\":\"watch\",\"keys\":[\"k.*\"],\"initial\":false}\n")
        XCTAssertEqual(json(watcher.readLine())["ok"] as? Bool, true)
        let writer = try Client(sandbox.socket)
        for round in 0..<3 {
            // Three writes pipelined: in one batch, or in several if the loop reads them in turns.
            writer.send((0..<3).map { "{\"op\":\"set\",\"key\":\"k.\($0)\",\"value\":\(round * 10 + $0)}\n" }.joined())
            for index in 0..<3 {
                XCTAssertEqual(json(writer.readLine())["ok"] as? Bool, true)
                XCTAssertEqual(storedValue(sandbox, "k.\(index)"), "\(round * 10 + index)",
                               "acknowledged before its batch was written (round \(round), k.\(index))")
            }
            var changes = 0
            while changes < 3, let line = watcher.readLine() {
                let event = json(line)
                guard event["event"] as? String == "change" else { continue }
                changes += 1
                let key = event["key"] as? String ?? "?"
                XCTAssertEqual(storedValue(sandbox, key).flatMap { Int($0) }, event["new"] as? Int,
                               "change event sent before its batch was written: \(line)")
            }
            XCTAssertEqual(changes, 3)
        }
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
    }

    func test_normal_answersAndEventsWaitUntilTheirBatchIsWritten() throws {
        try answersAndEventsWaitForTheirBatch(durability: "normal")
    }

    func test_strict_answersAndEventsWaitUntilTheirBatchIsWritten() throws {
        try answersAndEventsWaitForTheirBatch(durability: "strict")
    }

    /// SIGTERM while one batch is being written (the writer takes a second over it) and more writes
    /// wait to be read: obsd answers them all, says goodbye, exits 0, and the file has every write.
    private func sigtermDrains(durability: String) throws {
        let sandbox = try Sandbox()
        let obsd = try start(sandbox, durability: durability, delay: 1)
        let client = try Client(sandbox.socket)
        client.send("{\"op\":\"set\",\"key\":\"first\",\"value\":1}\n")
        // No answer to wait for (it waits for the slow writer); a moment for the loop to start
        // writing the first batch. Were it not started yet, the test would still hold, only weaker.
        usleep(200_000)
        client.send((0..<50).map { "{\"op\":\"set\",\"key\":\"k.\($0)\",\"value\":\($0)}\n" }.joined())
        obsd.signal(SIGTERM)
        var answers = 0
        var sawGoodbye = false
        while let line = client.readLine() {
            let object = json(line)
            if object["event"] as? String == "goodbye" {
                sawGoodbye = true
                break
            }
            XCTAssertEqual(object["ok"] as? Bool, true, line)
            answers += 1
        }
        XCTAssertEqual(answers, 51, "every write received before SIGTERM is answered")
        XCTAssertTrue(sawGoodbye)
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
        XCTAssertEqual(logRows(sandbox), 0, "a clean stop folds the log into the tables")
        XCTAssertEqual(((try? FileManager.default.contentsOfDirectory(atPath: sandbox.state)) ?? []).filter { $0.hasPrefix("obsd.commitlog.") },
                       [], "and leaves no commit log file")
        XCTAssertEqual(storedValue(sandbox, "first"), "1")
        for index in 0..<50 { XCTAssertEqual(storedValue(sandbox, "k.\(index)"), "\(index)") }
    }

    /// The rows of the database's log (commits an older obsd left there).
    private func logRows(_ sandbox: Sandbox) -> Int? {
        var db: OpaquePointer?
        defer { sqlite3_close_v2(db) }
        guard sqlite3_open_v2(sandbox.state + "/obsd.db", &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return nil }
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(db, "SELECT count(*) FROM log", -1, &statement, nil) == SQLITE_OK,
              sqlite3_step(statement) == SQLITE_ROW else { return nil }
        return Int(sqlite3_column_int64(statement, 0))
    }

    func test_normal_sigtermWithABatchInFlight_writesAndAnswersItBeforeExiting() throws {
        try sigtermDrains(durability: "normal")
    }

    func test_strict_sigtermWithABatchInFlight_writesAndAnswersItBeforeExiting() throws {
        try sigtermDrains(durability: "strict")
    }

    /// Four connections, each with 8 writes in flight, kill -9 in the middle: every acknowledged
    /// write is in the database after a restart, and revisions go on from the stored counter.
    private func killDuringPipelinedWrites(durability: String) throws {
        let sandbox = try Sandbox()
        let arguments = ["--socket", sandbox.socket, "--state-dir", sandbox.state, "--durability", durability]
        let obsd = try ObsdProcess(sandbox, arguments: arguments)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let acknowledged = AcknowledgedWrites()
        let writing = DispatchGroup()
        for connection in 0..<4 {
            let client = try Client(sandbox.socket)
            DispatchQueue.global().async(group: writing) {
                let depth = 8
                var inFlight: [Int] = []
                var next = 0
                func send() -> Bool {
                    let index = connection * 1_000_000 + next
                    next += 1
                    inFlight.append(index)
                    return client.send("{\"op\":\"set\",\"key\":\"k.\(index)\",\"value\":\(index)}\n")
                }
                for _ in 0..<depth { guard send() else { return } }
                while next < 200_000 {
                    guard let line = client.readLine(), let rev = json(line)["rev"] as? Int else { return }
                    acknowledged.add(index: inFlight.removeFirst(), rev: rev)
                    guard send() else { return }
                }
            }
        }
        try killAndCheckAcknowledgedWrites(obsd, sandbox, arguments: arguments, acknowledged: acknowledged,
                                           minimum: 2000, writing: writing)
    }

    func test_kill9_normal_pipelinedOnManyConnections_losesNoAcknowledgedWrite() throws {
        try killDuringPipelinedWrites(durability: "normal")
    }

    func test_kill9_strict_pipelinedOnManyConnections_losesNoAcknowledgedWrite() throws {
        try killDuringPipelinedWrites(durability: "strict")
    }
}
