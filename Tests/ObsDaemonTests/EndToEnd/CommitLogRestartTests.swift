// The commit log through the daemon (LogFileStorage.swift): writes of every kind (sets, deletes,
// batches, definitions, bindings) go to the log's files, an idle daemon folds them into the
// tables, and a kill -9 between the append and the next checkpoint loses nothing: the restarted
// daemon serves what the killed one served, from the tables with the log replayed over them; a
// clean stop leaves no log. `obsd --check` verifies the log rows an older obsd left and refuses a
// damaged row (CommitLogFileTests has the files' damage).
import CSQLite
import Foundation
import Glibc
import ObsCore
import TestSupport
import XCTest

final class CommitLogRestartTests: XCTestCase {
    func test_normal_killBetweenAppendAndCheckpoint_restartServesEverything() throws {
        try killBetweenAppendAndCheckpoint(durability: "normal")
    }

    func test_strict_killBetweenAppendAndCheckpoint_restartServesEverything() throws {
        try killBetweenAppendAndCheckpoint(durability: "strict")
    }

    private func killBetweenAppendAndCheckpoint(durability: String) throws {
        let sandbox = try Sandbox()
        let arguments = ["--durability", durability]
        var obsd = try ObsdProcess.started(sandbox, arguments)
        var client = try Client(sandbox.socket)
        for line in [#"{"op":"set","key":"a","value":1}"#, #"{"op":"set","key":"b","value":{"x":[1,"s",null,true]}}"#,
                     #"{"op":"set","key":"c","value":3}"#, #"{"op":"define","key":"sum","expr":"$a + $c"}"#,
                     #"{"op":"set","key":"gone","value":"soon"}"#, #"{"op":"bind","from":"a","to":"mirror"}"#] {
            XCTAssertEqual(client.request(line)?["ok"] as? Bool, true, line)
        }
        // Idle a second, the daemon folds its log into the tables.
        XCTAssertTrue(waitFor("the idle daemon to checkpoint its log", timeout: 60) {
            self.log(sandbox).map { $0.rows == 0 && $0.keys == 5 } == true
        }, "a, b, c, gone, mirror in the keys table, nothing in the log: \(String(describing: log(sandbox)))")

        // Changes over what the tables hold, then kill -9 before the next checkpoint. A round whose
        // log was checkpointed before the kill (a machine stalled for a second) is played again.
        var served: NSDictionary?
        var logged = 0
        var lastRound = 0
        for round in 0..<5 where logged == 0 {
            lastRound = round
            for line in [#"{"op":"set","key":"a","value":\#(10 + round)}"#, #"{"op":"delete","key":"gone"}"#,
                         #"{"op":"set","key":"d","value":"new \#(round)"}"#, #"{"op":"incr","key":"n","by":2}"#,
                         #"{"op":"define","key":"sum","expr":"$a * $c","replace":true}"#, #"{"op":"unbind","to":"mirror"}"#,
                         #"{"op":"bind","from":"c","to":"mirror"}"#,
                         #"{"op":"batch","ops":[{"op":"set","key":"e","value":[\#(round)]},{"op":"delete","key":"d"},{"op":"set","key":"d","value":"again"}]}"#] {
                XCTAssertEqual(client.request(line)?["ok"] as? Bool, true, line)
            }
            served = stored(client.dump())
            obsd.kill9()
            logged = log(sandbox)?.rows ?? 0
            obsd = try ObsdProcess.started(sandbox, arguments)
            client = try Client(sandbox.socket)
            XCTAssertEqual(stored(client.dump()), tookARevision(served),
                           "round \(round): the restarted daemon serves what the killed one did, a revision on")
        }
        XCTAssertGreaterThan(logged, 0, "no round was killed with frames in the log")
        XCTAssertEqual(client.request(#"{"op":"get","key":"sum"}"#)?["value"] as? Int, (10 + lastRound) * 3)

        // A clean stop checkpoints: the log is empty and the tables alone give the same state.
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
        XCTAssertEqual(log(sandbox)?.rows, 0, "a clean stop folds the log into the tables")
        XCTAssertEqual(log(sandbox)?.files, 0, "and leaves no log file")
        obsd = try ObsdProcess.started(sandbox, arguments)
        XCTAssertEqual(stored(try Client(sandbox.socket).dump()), tookARevision(served))
        obsd.kill9()
    }

    /// `dump` of a state a start after kill -9 restored: the same, at the next revision, which the
    /// restart takes for the ephemeral keys the killed run may have had (LogFileStorage.load).
    private func tookARevision(_ dump: NSDictionary?) -> NSDictionary? {
        guard let copy = dump?.mutableCopy() as? NSMutableDictionary, let rev = copy["rev"] as? Int else { return nil }
        copy["rev"] = rev + 1
        return copy
    }

    /// `obsd --check` replays the log as start-up does: it says how many rows it verified, and a
    /// row damaged on disk is listed (and the daemon refuses to start), naming the row.
    func test_check_verifiesTheLog_andRefusesADamagedRow() throws {
        let sandbox = try Sandbox()
        let database = try databaseWithLogRows(sandbox)
        let good = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
        XCTAssertEqual(good.waitForExit(), 0, good.output)
        XCTAssertTrue(good.output.contains("revision 3; 3 log rows"), good.output)

        // One byte of the second row's records, changed as a bad disk would (SQLite's own checks
        // of the file's structure pass: only the row's checksum can tell).
        try changeLogRow(database, rev: 2) { data in
            let at = try XCTUnwrap(data.range(of: Data("logged-2".utf8)))
            data[at.upperBound - 1] = UInt8(ascii: "X")
        }
        let bad = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
        XCTAssertEqual(bad.waitForExit(), 1, bad.output)
        XCTAssertTrue(bad.output.contains("log row 2 (revision 2): damaged (its checksum does not match)"), bad.output)
        let refused = try ObsdProcess(sandbox)
        XCTAssertEqual(refused.waitForExit(), 1, refused.log)
        XCTAssertTrue(refused.log.contains(database) && refused.log.contains("log row 2"), refused.log)
    }

    /// Rewrites the records of the log row at `rev` with SQLite, leaving its checksum as it was.
    private func changeLogRow(_ database: String, rev: Int64, _ change: (inout Data) throws -> Void) throws {
        var db: OpaquePointer?
        defer { sqlite3_close_v2(db) }
        XCTAssertEqual(sqlite3_open_v2(database, &db, SQLITE_OPEN_READWRITE, nil), SQLITE_OK)
        var statement: OpaquePointer?
        XCTAssertEqual(sqlite3_prepare_v2(db, "SELECT data FROM log WHERE rev = ?1", -1, &statement, nil), SQLITE_OK)
        sqlite3_bind_int64(statement, 1, rev)
        XCTAssertEqual(sqlite3_step(statement), SQLITE_ROW)
        var data = Data(bytes: sqlite3_column_blob(statement, 0), count: Int(sqlite3_column_bytes(statement, 0)))
        sqlite3_finalize(statement)
        try change(&data)
        XCTAssertEqual(sqlite3_prepare_v2(db, "UPDATE log SET data = ?1 WHERE rev = ?2", -1, &statement, nil), SQLITE_OK)
        data.withUnsafeBytes { _ = sqlite3_bind_blob(statement, 1, $0.baseAddress, Int32($0.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self)) }
        sqlite3_bind_int64(statement, 2, rev)
        XCTAssertEqual(sqlite3_step(statement), SQLITE_DONE)
        sqlite3_finalize(statement)
        XCTAssertEqual(sqlite3_changes(db), 1)
    }

    /// A dump without what a restart computes again rather than loads: a computed key's own
    /// revision and version (its definition and value are compared).
    private func stored(_ dump: NSDictionary?) -> NSDictionary? {
        guard let dump = dump?.mutableCopy() as? NSMutableDictionary, let keys = dump["keys"] as? [NSDictionary] else { return nil }
        dump["keys"] = keys.map { key in
            guard key["kind"] as? String == "computed", let copy = key.mutableCopy() as? NSMutableDictionary else { return key }
            copy["rev"] = nil
            copy["version"] = nil
            return copy
        }
        return dump
    }

    /// The bytes of frames in the commit log's files (`rows`: 0 when they hold none), the files,
    /// and the keys table's rows, read with a connection of our own.
    private func log(_ sandbox: Sandbox) -> (rows: Int, files: Int, keys: Int)? {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: sandbox.state)) ?? []).filter { $0.hasPrefix("obsd.commitlog.") }
        let framed = names.reduce(0) { total, name in
            total + max(0, ((try? FileManager.default.attributesOfItem(atPath: sandbox.state + "/" + name))?[.size] as? Int ?? 0) - 8)
        }
        var db: OpaquePointer?
        defer { sqlite3_close_v2(db) }
        guard sqlite3_open_v2(sandbox.state + "/obsd.db", &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return nil }
        sqlite3_busy_timeout(db, 5000)
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM log), (SELECT count(*) FROM keys)", -1, &statement, nil) == SQLITE_OK,
              sqlite3_step(statement) == SQLITE_ROW else { return nil }
        return (Int(sqlite3_column_int64(statement, 0)) + framed, names.count, Int(sqlite3_column_int64(statement, 1)))
    }
}
