// The commit log's files through real obsd binaries (LogFileStorage.swift, CommitLogFile.swift): a
// frame a crash cut short at the end of the newest file is dropped (it was never acknowledged)
// and everything acknowledged is served; a flipped byte in a log file refuses the start and is
// listed by `obsd --check`; a log file that is a symlink, or belongs to another user, or log files
// whose database is missing, are refused;
// a schema-3 database (with log rows) opens, migrated, its log rows folded into its tables;
// a daemon that writes every second, never idle, still folds its log once its first record is old.
import CSQLite
import Foundation
import Glibc
import ObsCore
import TestSupport
import XCTest

final class CommitLogFilesTests: XCTestCase {
    /// The log files in the state directory, oldest first.
    private func logFiles(_ sandbox: Sandbox) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: sandbox.state)) ?? [])
            .filter { $0.hasPrefix("obsd.commitlog.") }
            .sorted { Int($0.dropFirst("obsd.commitlog.".count)) ?? 0 < Int($1.dropFirst("obsd.commitlog.".count)) ?? 0 }
            .map { sandbox.state + "/" + $0 }
    }

    /// Sets k.1 ... k.`count` (acknowledged), then kill -9: the writes are in the newest log file.
    private func killedAfterWrites(_ sandbox: Sandbox, count: Int) throws -> String {
        let obsd = try ObsdProcess.started(sandbox)
        let client = try Client(sandbox.socket)
        for index in 1...count {
            XCTAssertEqual(client.request(#"{"op":"set","key":"k.\#(index)","value":"value \#(index)"}"#)?["ok"] as? Bool, true)
        }
        obsd.kill9()
        let file = try XCTUnwrap(logFiles(sandbox).last)
        let size = (try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0
        XCTAssertGreaterThan(size, 8, "the writes are in \(file)")
        return file
    }

    /// A crash in the middle of a write leaves the newest file ending inside a frame: the start
    /// drops it (and says so), serves every acknowledged write, and goes on from there.
    func test_aFrameCutShortAtTheEnd_isDropped_andEveryAcknowledgedWriteIsServed() throws {
        let sandbox = try Sandbox()
        let file = try killedAfterWrites(sandbox, count: 20)
        // The frame of a write that never completed: a whole header, part of its records.
        var records = ByteBuffer()
        var transaction = StoredTransaction(rev: 21)
        transaction.putKeys = [StoredKey(key: "torn", value: "never acknowledged", rev: 21, createdRev: 21, version: 1)]
        CommitLog.append(transaction, to: &records)
        var header = CommitLogFile.header(rev: 21, records: records.bytes)
        var frame = withUnsafeBytes(of: &header) { Data($0) } + Data(records.bytes)
        frame = frame.prefix(CommitLogFile.headerSize + 10)
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: file))
        handle.seekToEndOfFile()
        handle.write(frame)
        handle.closeFile()

        let check = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
        XCTAssertEqual(check.waitForExit(), 0, check.output)
        XCTAssertTrue(check.output.contains("a torn last frame of \(frame.count) bytes"), check.output)

        let obsd = try ObsdProcess.started(sandbox)
        defer { obsd.kill9() }
        XCTAssertTrue(obsd.process.isRunning, obsd.log)
        XCTAssertTrue(obsd.log.contains("\(file): its last \(frame.count) bytes were a frame cut short"), obsd.log)
        let client = try Client(sandbox.socket)
        for index in 1...20 {
            XCTAssertEqual(client.request(#"{"op":"get","key":"k.\#(index)"}"#)?["value"] as? String, "value \(index)")
        }
        XCTAssertNotEqual(client.request(#"{"op":"get","key":"torn"}"#)?["ok"] as? Bool, true, "the torn frame is not served")
        // Revision 21 is the restart's own (the killed run may have had ephemeral keys: they are
        // gone), taken after the last whole frame; the next write is the one after it.
        XCTAssertEqual(client.request(#"{"op":"set","key":"after","value":1}"#)?["rev"] as? Int, 22, "revisions go on after the last whole frame")
    }

    /// A flipped byte anywhere in a log file's frames: obsd refuses to start, naming the file, and
    /// `obsd --check` lists it; the file is left as it was.
    func test_aFlippedByteInALogFile_refusesTheStart_andCheckListsIt() throws {
        var random = SplitMix64(seed: Hostile.seed())
        for trial in 0..<8 {
            let sandbox = try Sandbox()
            let file = try killedAfterWrites(sandbox, count: 10)
            var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
            let offset = 8 + random.below(bytes.count - 8)
            bytes[offset] ^= UInt8(1) << UInt8(random.below(8))
            try bytes.write(to: URL(fileURLWithPath: file))

            let check = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
            XCTAssertEqual(check.waitForExit(), 1, "trial \(trial), byte \(offset): \(check.output)")
            XCTAssertTrue(check.output.contains("log file \(file):"), "trial \(trial), byte \(offset): \(check.output)")
            let obsd = try ObsdProcess.started(sandbox)
            XCTAssertEqual(obsd.waitForExit(), 1, "trial \(trial), byte \(offset): \(obsd.log)")
            XCTAssertTrue(obsd.log.contains("log file \(file):"), "trial \(trial), byte \(offset): \(obsd.log)")
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), bytes, "a refused file is left as it was")
        }
    }

    /// The newest log file is bounded in bytes: while the checkpoint cannot fold the full file
    /// (here another connection holds the database's write lock, so SQLite's busy timeout fails
    /// it), appends go on up to the bound (a debug build's OBSD_TEST_LOG_FILE_BOUND, 64 KiB), then
    /// the write that would pass it is held and new writes are refused with `internal`; reads go
    /// on. Once the lock is gone the checkpoint catches up, the held write is answered, writes are
    /// accepted again, and everything acknowledged survives kill -9.
    func test_theNewestLogFile_isBounded_whileTheCheckpointCannotCatchUp() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox, environment: ["OBSD_TEST_LOG_ROTATE_BYTES": "4096", "OBSD_TEST_LOG_FILE_BOUND": "65536"])
        let client = try Client(sandbox.socket, timeout: 3)
        XCTAssertEqual(client.request(#"{"op":"set","key":"first","value":0}"#)?["ok"] as? Bool, true)

        var holder: OpaquePointer?
        XCTAssertEqual(sqlite3_open_v2(sandbox.state + "/obsd.db", &holder, SQLITE_OPEN_READWRITE, nil), SQLITE_OK)
        defer { sqlite3_close_v2(holder) }
        XCTAssertEqual(sqlite3_exec(holder, "BEGIN IMMEDIATE", nil, nil, nil), SQLITE_OK)

        let value = String(repeating: "v", count: 200)
        var acknowledged: [Int] = []
        var held: Int?
        for index in 0..<100_000 {
            guard let answer = client.request(#"{"id":\#(index),"op":"set","key":"k.\#(index)","value":"\#(value)"}"#) else {
                held = index
                break
            }
            XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)")
            acknowledged.append(index)
        }
        let heldIndex = try XCTUnwrap(held, "the log file never reached its bound")
        let newest = logFiles(sandbox).compactMap { (try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int) ?? nil }.max() ?? 0
        XCTAssertLessThanOrEqual(newest, 65536 + 4096, "no log file past its bound and one write")
        XCTAssertGreaterThan(acknowledged.count, 100)
        let other = try Client(sandbox.socket, timeout: 3)
        let refused = other.request(#"{"op":"set","key":"other","value":1}"#)
        XCTAssertEqual((refused?["error"] as? [String: Any])?["code"] as? String, "internal", "\(String(describing: refused))")
        XCTAssertTrue("\(String(describing: refused))".contains("writes are refused"), "\(String(describing: refused))")
        XCTAssertEqual(other.request(#"{"op":"get","key":"first"}"#)?["value"] as? Int, 0, "reads go on")
        XCTAssertTrue(waitFor("the failed checkpoint in the log") { obsd.log.contains("cannot checkpoint its log") }, obsd.log)

        XCTAssertEqual(sqlite3_exec(holder, "ROLLBACK", nil, nil, nil), SQLITE_OK)
        let late = try Client(sandbox.socket, timeout: 60)
        XCTAssertTrue(waitFor("the held write answered", timeout: 60) { client.readLine().map { json($0)["id"] as? Int == heldIndex } ?? false })
        acknowledged.append(heldIndex)
        XCTAssertTrue(waitFor("writes accepted again", timeout: 60) {
            late.request(#"{"op":"set","key":"other","value":2}"#)?["ok"] as? Bool == true
        })
        obsd.kill9()
        let restarted = try ObsdProcess.started(sandbox)
        defer { restarted.kill9() }
        let reader = try Client(sandbox.socket)
        let lost = acknowledged.filter { reader.request(#"{"op":"get","key":"k.\#($0)"}"#)?["value"] as? String != value }
        XCTAssertEqual(lost, [], "acknowledged writes lost")
    }

    /// A log file is deleted only once what it held is in the database file itself: SQLite takes
    /// a WAL frame that fails its checksum for the end of the WAL and drops every later one without
    /// a word, so a folded file whose rows were only in the WAL could be lost to one flipped bit
    /// with nothing to tell. After the writes, once obsd is idle and has folded every file, the
    /// WAL is empty; a kill -9 then loses nothing.
    func test_whatAFoldedLogFileHeld_isInTheDatabaseFile_notOnlyInTheWAL() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox, environment: ["OBSD_TEST_LOG_ROTATE_BYTES": "4096"])
        let client = try Client(sandbox.socket)
        for index in 1...300 {
            XCTAssertEqual(client.request(#"{"op":"set","key":"k.\#(index)","value":"value \#(index)"}"#)?["ok"] as? Bool, true)
        }
        func size(_ path: String) -> Int { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
        XCTAssertTrue(waitFor("every log file folded and the WAL emptied", timeout: 30) {
            self.logFiles(sandbox).allSatisfy { size($0) <= CommitLogFile.magic.count } && size(sandbox.state + "/obsd.db-wal") == 0
        }, "log files: \(logFiles(sandbox).map { ($0, size($0)) }), WAL: \(size(sandbox.state + "/obsd.db-wal")) bytes\n\(obsd.log)")
        obsd.kill9()
        let restarted = try ObsdProcess.started(sandbox)
        defer { restarted.kill9() }
        let reader = try Client(sandbox.socket)
        let lost = (1...300).filter { reader.request(#"{"op":"get","key":"k.\#($0)"}"#)?["value"] as? String != "value \($0)" }
        XCTAssertEqual(lost, [], "acknowledged writes lost")
    }

    /// A daemon that writes every second (a binding fed by a computed over `now()`) is never idle
    /// for a second, so before, its log file went to the checkpoint thread only at 32 MiB: days
    /// later, with `obsd.db` (and a backup copied from it) that far behind. Now the newest file goes
    /// once its first record is old (a minute; a debug build's OBSD_TEST_LOG_ROTATE_SECONDS, 2 s
    /// here): the database's revision catches up with what was served, again and again, and the
    /// first files are folded and deleted. Once the writes stop, the newest file is folded when
    /// idle and no empty file is rotated after it.
    func test_aDaemonWritingEverySecond_foldsItsLog_onceItsFirstRecordIsOld() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox, environment: ["OBSD_TEST_LOG_ROTATE_SECONDS": "2"])
        defer { obsd.kill9() }
        let client = try Client(sandbox.socket)
        for line in [#"{"op":"define","key":"clock","expr":"now()"}"#, #"{"op":"bind","from":"clock","to":"stamp"}"#] {
            XCTAssertEqual(client.request(line)?["ok"] as? Bool, true, line)
        }
        /// The revision in the database's rows, read with a connection of our own (polled a few
        /// times a second, not to stand in the way of the checkpoint's copy of the WAL).
        func databaseRev() -> Int {
            usleep(200_000)
            var db: OpaquePointer?
            defer { sqlite3_close_v2(db) }
            guard sqlite3_open_v2(sandbox.state + "/obsd.db", &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return -1 }
            sqlite3_busy_timeout(db, 5000)
            var statement: OpaquePointer?
            defer { sqlite3_finalize(statement) }
            guard sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE name = 'rev'", -1, &statement, nil) == SQLITE_OK else { return -1 }
            switch sqlite3_step(statement) {
            case SQLITE_ROW: return Int(sqlite3_column_int64(statement, 0))
            case SQLITE_DONE: return 0 // nothing folded yet
            default: return -1
            }
        }
        for round in 1...3 {
            // Two more writes of stamp, a second apart: the daemon has not been idle for a second.
            let from = client.request(#"{"op":"get","key":"stamp"}"#)?["version"] as? Int ?? 0
            XCTAssertTrue(waitFor("two writes of stamp", timeout: 60) {
                usleep(100_000)
                return client.request(#"{"op":"get","key":"stamp"}"#)?["version"] as? Int ?? 0 >= from + 2
            })
            let served = try XCTUnwrap(client.request(#"{"op":"get","key":"stamp"}"#)?["rev"] as? Int)
            guard waitFor("round \(round): obsd.db at revision \(served)", timeout: 60, { databaseRev() >= served }) else {
                return XCTFail("obsd.db at revision \(databaseRev()), files \(logFiles(sandbox))\n\(obsd.log)")
            }
        }
        let files = logFiles(sandbox)
        XCTAssertFalse(files.contains(sandbox.state + "/obsd.commitlog.1"), "the first file was folded and deleted: \(files)")
        XCTAssertLessThanOrEqual(files.count, 2, "one file appended to, at most one being folded: \(files)")

        // The writes stop: the newest file is folded once idle, and no empty file follows it.
        for line in [#"{"op":"unbind","to":"stamp"}"#, #"{"op":"delete","key":"clock"}"#] {
            XCTAssertEqual(client.request(line)?["ok"] as? Bool, true, line)
        }
        let last = try XCTUnwrap(client.request(#"{"op":"stats"}"#)?["rev"] as? Int)
        XCTAssertTrue(waitFor("obsd.db at revision \(last)", timeout: 60) { databaseRev() >= last })
        XCTAssertTrue(waitFor("one log file left") { logFiles(sandbox).count == 1 }, "\(logFiles(sandbox))")
        let idle = logFiles(sandbox)
        sleep(5)
        XCTAssertEqual(logFiles(sandbox), idle, "an idle daemon starts no new log file")
    }

    /// Log files without their database (deleted or moved): the files hold only the changes since
    /// the last checkpoint, so obsd refuses to start rather than serve them as the state.
    func test_logFilesWithoutTheirDatabase_areRefused() throws {
        let sandbox = try Sandbox()
        let file = try killedAfterWrites(sandbox, count: 3)
        for suffix in ["", "-wal", "-shm"] { unlink(sandbox.state + "/obsd.db" + suffix) }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        let check = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
        XCTAssertEqual(check.waitForExit(), 1, check.output)
        XCTAssertTrue(check.output.contains("is missing but its commit log"), check.output)
        let obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(obsd.waitForExit(), 1, obsd.log)
        XCTAssertTrue(obsd.log.contains("obsd.db is missing but its commit log \(file) is there"), obsd.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.state + "/obsd.db"), "no database created")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: file)), bytes, "the log file is left as it was")
    }

    /// A log file reached through a symlink, or of another user, is refused, naming it.
    func test_aSymlinkedLogFile_orOneOfAnotherUser_isRefused() throws {
        let sandbox = try Sandbox()
        let file = try killedAfterWrites(sandbox, count: 3)
        let elsewhere = sandbox.root + "/elsewhere"
        XCTAssertEqual(rename(file, elsewhere), 0)
        XCTAssertEqual(symlink(elsewhere, file), 0)
        let linked = try ObsdProcess.started(sandbox)
        XCTAssertEqual(linked.waitForExit(), 1, linked.log)
        XCTAssertTrue(linked.log.contains("log file \(file) is a symlink"), linked.log)

        guard geteuid() == 0 else { return }
        XCTAssertEqual(unlink(file), 0)
        XCTAssertEqual(rename(elsewhere, file), 0)
        XCTAssertEqual(chown(file, 65534, 65534), 0)
        let foreign = try ObsdProcess.started(sandbox)
        XCTAssertEqual(foreign.waitForExit(), 1, foreign.log)
        XCTAssertTrue(foreign.log.contains("log file \(file) belongs to uid 65534"), foreign.log)
        XCTAssertEqual(chown(file, 0, 0), 0)
        let restored = try ObsdProcess.started(sandbox)
        defer { restored.kill9() }
        XCTAssertEqual(try Client(sandbox.socket).request(#"{"op":"get","key":"k.3"}"#)?["value"] as? String, "value 3")
    }

    /// A database of schema 3 (the log as rows of the database) opens: its log rows
    /// are served, and folded into its tables before anything is appended to a log file.
    func test_aDatabaseWithLogRows_opens_andItsRowsAreFolded() throws {
        let sandbox = try Sandbox()
        let database = try databaseWithLogRows(sandbox)
        do {
            let storage = try SQLiteStorage(path: database, mode: .check)
            XCTAssertEqual(try storage.storedLog().rows, 3)
            storage.close()
        }
        var db: OpaquePointer?
        XCTAssertEqual(sqlite3_open_v2(sandbox.state + "/obsd.db", &db, SQLITE_OPEN_READWRITE, nil), SQLITE_OK)
        XCTAssertEqual(sqlite3_exec(db, "UPDATE schema_version SET version = 3", nil, nil, nil), SQLITE_OK)
        sqlite3_close_v2(db)
        let obsd = try ObsdProcess.started(sandbox)
        let client = try Client(sandbox.socket)
        for rev in 1...3 { XCTAssertEqual(client.request(#"{"op":"get","key":"k.\#(rev)"}"#)?["value"] as? String, "logged-\(rev)") }
        XCTAssertEqual(client.request(#"{"op":"set","key":"new","value":1}"#)?["rev"] as? Int, 4)
        obsd.kill9()
        let storage = try SQLiteStorage(path: sandbox.state + "/obsd.db", mode: .check)
        XCTAssertEqual(try storage.storedLog().rows, 0, "the log rows were folded into the tables at the start")
        var statement: OpaquePointer?
        XCTAssertEqual(sqlite3_open_v2(sandbox.state + "/obsd.db", &db, SQLITE_OPEN_READONLY, nil), SQLITE_OK)
        XCTAssertEqual(sqlite3_prepare_v2(db, "SELECT version FROM schema_version", -1, &statement, nil), SQLITE_OK)
        XCTAssertEqual(sqlite3_step(statement), SQLITE_ROW)
        XCTAssertEqual(sqlite3_column_int64(statement, 0), 4, "migrated: an obsd that would ignore the log files refuses it")
        sqlite3_finalize(statement)
        sqlite3_close_v2(db)
        XCTAssertEqual(try storage.load().keys.map(\.key), ["k.1", "k.2", "k.3"])
        let restarted = try ObsdProcess.started(sandbox)
        defer { restarted.kill9() }
        XCTAssertEqual(try Client(sandbox.socket).request(#"{"op":"get","key":"new"}"#)?["value"] as? Int, 1, "replayed from the log file")
    }
}
