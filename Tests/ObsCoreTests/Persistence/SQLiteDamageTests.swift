// What SQLiteStorage does with a database that is damaged, empty, old, linked or taken away while
// open: each is reported with the file (and the key, for a row), and nothing damaged is served.
import Foundation
import XCTest
@testable import ObsCore

final class SQLiteDamageTests: XCTestCase {
    private var directory: String!
    private var databasePath: String { directory + "/obsd.db" }

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "obsd-damage-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A closed database holding `count` keys `k.N` with the value `"value-N-xxxx…"`.
    private func makeDatabase(keys count: Int = 20) throws {
        let storage = try SQLiteStorage(path: databasePath)
        var transaction = StoredTransaction(rev: 2)
        for index in 0..<count {
            transaction.putKeys.append(StoredKey(key: "k.\(index)", value: .string("value-\(index)-" + String(repeating: "x", count: 40)),
                                                 rev: 1, createdRev: 1, version: 1))
        }
        transaction.putDefinitions = [StoredDefinition(key: "total", expr: "$k.0 + 'a'", createdRev: 2)]
        transaction.putBindings = [StoredBinding(from: "k.1", to: "copy", map: "value")]
        try storage.commit(transaction)
        storage.close()
    }

    /// The problems `load` reports, from the error's details.
    private func loadProblems(_ storage: SQLiteStorage, file: StaticString = #filePath, line: UInt = #line) -> [String] {
        do {
            _ = try storage.load()
            XCTFail("load succeeded", file: file, line: line)
            return []
        } catch {
            guard case .array(let problems)? = error.details["problems"] else { return [] }
            return problems.compactMap { if case .string(let text) = $0 { text } else { nil } }
        }
    }

    /// Replaces the first occurrence of `text` in the file (same length), as damage on the disk would.
    private func overwrite(_ text: String, with replacement: String) throws {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: databasePath))
        guard let range = bytes.range(of: Data(text.utf8)) else { return XCTFail("\(text) is not in the file") }
        bytes.replaceSubrange(range, with: Data(replacement.utf8))
        try bytes.write(to: URL(fileURLWithPath: databasePath))
    }

    // MARK: - Checksums

    func test_aFlippedByteInAValue_isReportedWithItsKey_andNeverLoaded() throws {
        try makeDatabase()
        // Still valid JSON, still a string: only the checksum can tell.
        try overwrite("value-7-", with: "value-8-")
        let storage = try SQLiteStorage(path: databasePath)
        XCTAssertEqual(loadProblems(storage), [#"key "k.7": damaged (its checksum does not match)"#])
        let check = try SQLiteStorage(path: databasePath, mode: .check)
        XCTAssertEqual(loadProblems(check), [#"key "k.7": damaged (its checksum does not match)"#])
    }

    func test_everyRowThatCannotBeLoaded_isReported_eachWithItsKey() throws {
        try makeDatabase()
        try overwrite("value-3-", with: "valve-3-")
        try overwrite("value-12-", with: "value-12+")
        try overwrite("$k.0 + 'a'", with: "$k.0 + 'b'")
        do {
            // A row written by hand with a checksum that matches but a value that is not JSON: the
            // load must say which key, and go on to the other rows.
            let storage = try SQLiteStorage(path: databasePath)
            let json = "{not json"
            let checksum = RowChecksum.keyRow("k.5", json: json, rev: 1, createdRev: 1, version: 1, expiresAt: nil)
            try storage.execute("UPDATE keys SET value = '\(json)', checksum = \(checksum) WHERE key = 'k.5'")
            storage.close()
        }
        let problems = loadProblems(try SQLiteStorage(path: databasePath, mode: .check))
        XCTAssertEqual(problems.count, 4, "\(problems)")
        for key in ["\"k.3\": damaged", "\"k.12\": damaged", "\"total\": damaged", "\"k.5\": its value is not valid JSON"] {
            XCTAssertTrue(problems.contains { $0.contains(key) }, "\(key) in \(problems)")
        }
        XCTAssertThrowsError(try SQLiteStorage(path: databasePath).load()) { error in
            XCTAssertTrue("\(error)".contains("4 rows that cannot be loaded"), "\(error)")
            XCTAssertTrue("\(error)".contains(self.databasePath), "\(error)")
        }
    }

    func test_aRevisionAboveTheCounter_isReported() throws {
        try makeDatabase()
        let storage = try SQLiteStorage(path: databasePath)
        try storage.execute("UPDATE meta SET value = 1, checksum = \(RowChecksum.revisionRow(1)) WHERE name = 'rev'")
        XCTAssertEqual(loadProblems(storage), [#"computed key "total": revision 2 is above the revision counter 1"#])
    }

    /// The run given to `beginRun` is stored when the database is closed, not before (until then
    /// the state is not the one the run leaves), is loaded back, and is replaced by the next run's;
    /// a damaged row is reported like any other, never taken for a run.
    func test_theRunThatLeftTheState_isStoredAtClose_loadedBack_andADamagedOneIsReported() throws {
        try makeDatabase()
        XCTAssertNil(try SQLiteStorage(path: databasePath).load().run, "no run has stopped on this database")
        do {
            let storage = try SQLiteStorage(path: databasePath)
            _ = try storage.load()
            storage.beginRun(0xfeed_beef_0000_0001)
            try storage.commit(StoredTransaction(rev: 3))
            XCTAssertNil(try SQLiteStorage(path: databasePath).load().run, "not while the run goes on")
            storage.close()
        }
        XCTAssertEqual(try SQLiteStorage(path: databasePath).load().run, 0xfeed_beef_0000_0001)
        XCTAssertEqual(try SQLiteStorage(path: databasePath, mode: .check).load().run, 0xfeed_beef_0000_0001)
        do {
            let next = try SQLiteStorage(path: databasePath)
            next.beginRun(7)
            next.close()
        }
        let damaged = try SQLiteStorage(path: databasePath)
        XCTAssertEqual(try damaged.load().run, 7)
        try damaged.execute("UPDATE meta SET value = 8 WHERE name = 'run'")
        XCTAssertEqual(loadProblems(damaged), ["the run that left the state: damaged (its checksum does not match)"])
    }

    func test_version1Database_isMigrated_withEveryRowKept() throws {
        try makeDatabase()
        let before = try SQLiteStorage(path: databasePath).load()
        do {
            let storage = try SQLiteStorage(path: databasePath)
            for table in ["meta", "keys", "definitions", "bindings"] { try storage.execute("ALTER TABLE \(table) DROP COLUMN checksum") }
            try storage.execute("DROP TABLE log")
            try storage.execute("UPDATE schema_version SET version = 1")
            storage.close()
        }
        XCTAssertEqual(try SQLiteStorage(path: databasePath, mode: .check).load(), before, "a check reads version 1 as it is")
        let migrated = try SQLiteStorage(path: databasePath)
        XCTAssertEqual(try migrated.load(), before)
        XCTAssertEqual(try migrated.storedSchemaVersion(), SQLiteStorage.schemaVersion)
        migrated.close()
        // Damage after the migration is caught: the rows have their checksums now.
        try overwrite("value-2-", with: "value-9-")
        XCTAssertEqual(loadProblems(try SQLiteStorage(path: databasePath)), [#"key "k.2": damaged (its checksum does not match)"#])
    }

    /// A version-2 file (no log table) opens as it is for a check, and is given its empty log
    /// when opened for writing, every row kept; what is logged after is loaded from it.
    func test_version2Database_isMigrated_withEveryRowKept_andLogsAfter() throws {
        try makeDatabase()
        let before = try SQLiteStorage(path: databasePath).load()
        do {
            let storage = try SQLiteStorage(path: databasePath)
            try storage.execute("DROP TABLE log")
            try storage.execute("UPDATE schema_version SET version = 2")
            storage.close()
        }
        let check = try SQLiteStorage(path: databasePath, mode: .check)
        XCTAssertEqual(try check.load(), before, "a check reads version 2 as it is")
        XCTAssertEqual(try check.storedSchemaVersion(), 2)
        check.close()
        let migrated = try SQLiteStorage(path: databasePath)
        XCTAssertEqual(try migrated.storedSchemaVersion(), SQLiteStorage.schemaVersion)
        XCTAssertEqual(try migrated.load(), before)
        var transaction = StoredTransaction(rev: 3)
        transaction.putKeys = [StoredKey(key: "k.0", value: "logged", rev: 3, createdRev: 1, version: 2)]
        var group = ByteBuffer()
        CommitLog.append(transaction, to: &group)
        try migrated.commitLog(group.bytes, rev: 3)
        migrated.close()
        var after = before
        after.rev = 3
        after.keys[after.keys.firstIndex { $0.key == "k.0" }!] = transaction.putKeys[0]
        XCTAssertEqual(try SQLiteStorage(path: databasePath).load(), after)
    }

    // MARK: - Files that are not a database

    func test_anEmptyOrOneByteFile_isRefused_andLeftUnchanged() throws {
        for contents in [Data(), Data("x".utf8)] {
            try contents.write(to: URL(fileURLWithPath: databasePath))
            XCTAssertThrowsError(try SQLiteStorage(path: databasePath)) { error in
                XCTAssertTrue("\(error)".contains("\(self.databasePath) exists but holds no obsd schema (\(contents.count) bytes)"), "\(error)")
            }
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: databasePath)), contents)
        }
    }

    func test_aNewDatabase_isCreatedWhole_underItsOwnName() throws {
        let storage = try SQLiteStorage(path: databasePath)
        XCTAssertEqual(try storage.storedSchemaVersion(), SQLiteStorage.schemaVersion)
        XCTAssertFalse(FileManager.default.fileExists(atPath: databasePath + ".new"))
        // A temporary left by a crash during creation is not mistaken for anything.
        storage.close()
        try FileManager.default.removeItem(atPath: databasePath)
        try Data("half-made".utf8).write(to: URL(fileURLWithPath: databasePath + ".new"))
        XCTAssertEqual(try SQLiteStorage(path: databasePath).load(), StoredState())
    }

    func test_aWALWithoutItsDatabase_isRefused_notReplayedOntoANewOne() throws {
        let storage = try SQLiteStorage(path: databasePath)
        try storage.commit(key(1, rev: 1))
        let wal = try Data(contentsOf: URL(fileURLWithPath: databasePath + "-wal"))
        storage.close()
        try FileManager.default.removeItem(atPath: databasePath)
        try wal.write(to: URL(fileURLWithPath: databasePath + "-wal"))
        XCTAssertThrowsError(try SQLiteStorage(path: databasePath)) { error in
            XCTAssertTrue("\(error)".contains("\(self.databasePath) is missing but its WAL"), "\(error)")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: databasePath))
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: databasePath + "-wal")), wal)
    }

    func test_symlinkedDatabaseOrWAL_isRefused_andItsTargetUntouched() throws {
        let target = directory + "/target"
        try Data("precious".utf8).write(to: URL(fileURLWithPath: target))
        for name in ["obsd.db", "obsd.db-wal", "obsd.db-shm"] {
            if name != "obsd.db" { try makeDatabase() }
            try? FileManager.default.removeItem(atPath: directory + "/" + name)
            XCTAssertEqual(symlink(target, directory + "/" + name), 0)
            XCTAssertThrowsError(try SQLiteStorage(path: databasePath)) { error in
                XCTAssertTrue("\(error)".contains("\(self.directory!)/\(name) is a symlink"), "\(error)")
            }
            XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "precious")
            try FileManager.default.removeItem(atPath: directory + "/" + name)
            try? FileManager.default.removeItem(atPath: databasePath)
        }
    }

    func test_aSymlinkedDirectoryOnThePath_isNotFollowed() throws {
        try makeDatabase()
        XCTAssertEqual(symlink(directory, directory + "-link"), 0)
        defer { unlink(directory + "-link") }
        XCTAssertThrowsError(try SQLiteStorage(path: directory + "-link/obsd.db")) { error in
            XCTAssertTrue("\(error)".contains("symlink"), "\(error)")
        }
    }

    // MARK: - Files taken away while open

    private final class Reports: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func add(_ line: String) { lock.withLock { lines.append(line) } }
        var all: [String] { lock.withLock { lines } }
    }

    private func key(_ index: Int, rev: UInt64) -> StoredTransaction {
        var transaction = StoredTransaction(rev: rev)
        transaction.putKeys = [StoredKey(key: "w.\(index)", value: .int(Int64(index)), rev: rev, createdRev: rev, version: 1)]
        return transaction
    }

    /// What a restart after kill -9 would find: a copy of the files the paths name now.
    private func stateAfterACrash() throws -> StoredState {
        let copy = directory + "/crashed"
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: databasePath + suffix) {
            try FileManager.default.copyItem(atPath: databasePath + suffix, toPath: copy + "/obsd.db" + suffix)
        }
        return try SQLiteStorage(path: copy + "/obsd.db", mode: .check).load()
    }

    func test_aDeletedWAL_isNoticedAtTheNextCommit_whatWasWrittenKept_laterWritesRefused() throws {
        let reports = Reports()
        let storage = try SQLiteStorage(path: databasePath) { reports.add($0) }
        for index in 1...5 { try storage.commit(key(index, rev: UInt64(index))) }
        XCTAssertEqual(unlink(databasePath + "-wal"), 0)
        try storage.commit(key(6, rev: 6))
        XCTAssertEqual(reports.all.count, 1)
        XCTAssertTrue(reports.all.first?.contains("\(databasePath)-wal was deleted while obsd was running") == true, "\(reports.all)")
        XCTAssertThrowsError(try storage.commit(key(7, rev: 7))) { error in
            XCTAssertTrue("\(error)".contains("writes are refused until obsd is restarted"), "\(error)")
        }
        XCTAssertEqual(try stateAfterACrash().keys.map(\.key), (1...6).map { "w.\($0)" }, "every acknowledged write is in the database file")
    }

    func test_aReplacedWAL_isNoticedWhileIdle() throws {
        let reports = Reports()
        let storage = try SQLiteStorage(path: databasePath) { reports.add($0) }
        for index in 1...3 { try storage.commit(key(index, rev: UInt64(index))) }
        storage.checkFiles()
        XCTAssertEqual(reports.all, [], "nothing to report while the files are the ones opened")
        XCTAssertEqual(rename(databasePath + "-wal", databasePath + "-old"), 0)
        try Data().write(to: URL(fileURLWithPath: databasePath + "-wal"))
        storage.checkFiles()
        XCTAssertTrue(reports.all.first?.contains("-wal was replaced by another file") == true, "\(reports.all)")
        XCTAssertThrowsError(try storage.commit(key(4, rev: 4)))
        try FileManager.default.removeItem(atPath: databasePath + "-wal")
        XCTAssertEqual(try stateAfterACrash().keys.count, 3)
    }

    func test_aReplacedDatabaseFile_refusesTheNextCommit() throws {
        let reports = Reports()
        let storage = try SQLiteStorage(path: databasePath) { reports.add($0) }
        try storage.commit(key(1, rev: 1))
        try FileManager.default.copyItem(atPath: databasePath, toPath: databasePath + ".copy")
        XCTAssertEqual(rename(databasePath + ".copy", databasePath), 0)
        XCTAssertThrowsError(try storage.commit(key(2, rev: 2))) { error in
            XCTAssertTrue("\(error)".contains("\(self.databasePath) was replaced by another file"), "\(error)")
        }
        XCTAssertEqual(reports.all.count, 1)
    }
}
