// The commit log (CommitLog.swift, SQLiteStorage+Log.swift): groups of commits written as rows of
// records, replayed onto the tables when loaded, and folded into them by a checkpoint. Whatever is
// logged and checkpointed, in whatever groups, the database must load as committing the same
// transactions one by one leaves it; a damaged log row is reported, never served.
import CSQLite
import Foundation
import TestSupport
import XCTest
@testable import ObsCore

final class CommitLogTests: XCTestCase {
    private var directory: String!
    private var databasePath: String { directory + "/obsd.db" }

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "obsd-log-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func test_loggedGroups_loadAndCheckpoint_asCommittingEachTransactionWould() throws {
        var random = SplitMix64(seed: 17)
        let model = MemoryStorage()
        let storage = try SQLiteStorage(path: databasePath)
        var rev: UInt64 = 0
        for round in 0..<60 {
            // A group of commits, logged as one row.
            var group = ByteBuffer()
            for _ in 0..<(1 + random.below(5)) {
                rev += 1
                let transaction = random.storedTransaction(rev: rev)
                try model.commit(transaction)
                CommitLog.append(transaction, to: &group)
            }
            try storage.commitLog(group.bytes, rev: rev)
            XCTAssertEqual(try storage.load(), try model.load(), "round \(round): the log replayed onto the tables")
            if round % 7 == 3 {
                try storage.checkpoint()
                XCTAssertEqual(storage.logBytes, 0)
                XCTAssertEqual(try storage.load(), try model.load(), "round \(round): after a checkpoint")
            }
        }
        storage.close()
        XCTAssertEqual(try SQLiteStorage(path: databasePath).load(), try model.load(), "opened again, the log still replays")
    }

    /// The hot path's record of one key is the record a transaction putting that key makes.
    func test_aKeyRecord_isThatOfATransactionPuttingIt() {
        var fromTransaction = ByteBuffer(), fromBytes = ByteBuffer()
        var transaction = StoredTransaction(rev: 9)
        transaction.putKeys = [StoredKey(key: "k.1", value: "v", rev: 9, createdRev: 3, version: 4)]
        CommitLog.append(transaction, to: &fromTransaction)
        var name = "k.1", value = #""v""#
        name.withUTF8 { name in
            value.withUTF8 { value in
                CommitLog.appendKey(name: UnsafeRawBufferPointer(name), value: UnsafeRawBufferPointer(value), rev: 9, createdRev: 3,
                                    version: 4, to: &fromBytes)
            }
        }
        XCTAssertEqual(Array(fromTransaction.bytes), Array(fromBytes.bytes))
    }

    /// The records of the transaction at revision 1 that puts `value` into key `k`.
    private func recordsPuttingK(_ value: JSONValue) -> [UInt8] {
        var transaction = StoredTransaction(rev: 1)
        transaction.putKeys = [StoredKey(key: "k", value: value, rev: 1, createdRev: 1, version: 1)]
        var group = ByteBuffer()
        CommitLog.append(transaction, to: &group)
        return Array(group.bytes)
    }

    func test_aDamagedLogRow_isReported_andNeverLoaded() throws {
        let storage = try SQLiteStorage(path: databasePath)
        try recordsPuttingK("logged-value").withUnsafeBytes { try storage.commitLog($0, rev: 1) }
        storage.close()
        var bytes = try Data(contentsOf: URL(fileURLWithPath: databasePath))
        let range = try XCTUnwrap(bytes.range(of: Data("logged-value".utf8)))
        bytes.replaceSubrange(range, with: Data("LOGGED-value".utf8))
        try bytes.write(to: URL(fileURLWithPath: databasePath))
        XCTAssertThrowsError(try SQLiteStorage(path: databasePath).load()) { error in
            XCTAssertTrue("\(error)".contains("database \(self.databasePath) has 1 row that cannot be loaded"), "\(error)")
            XCTAssertTrue("\(error)".contains("log row 1 (revision 1): damaged (its checksum does not match)"), "\(error)")
        }
        XCTAssertThrowsError(try SQLiteStorage(path: databasePath, mode: .check).load(), "a check reads the log too")
    }

    /// Records that do not read to the end, or end at another revision than their row's, under a
    /// checksum that matches (written wrong, not damaged since): refused all the same.
    func test_logRecordsCutShort_orAtAnotherRevision_areRefused() throws {
        let storage = try SQLiteStorage(path: databasePath)
        let records = recordsPuttingK("value")
        for (rev, data) in [(UInt64(1), Array(records.dropLast(3))), (2, records)] {
            try data.withUnsafeBytes { data in
                try storage.run("INSERT INTO log (rev, data, checksum) VALUES (?1, ?2, ?3)") { statement in
                    sqlite3_bind_int64(statement, 1, Int64(rev))
                    sqlite3_bind_blob(statement, 2, data.baseAddress, Int32(data.count), nil)
                    sqlite3_bind_int64(statement, 3, RowChecksum.logRow(rev, data))
                }
            }
        }
        XCTAssertThrowsError(try storage.load()) { error in
            guard case .array(let problems)? = (error as? ObsError)?.details["problems"] else { return XCTFail("\(error)") }
            XCTAssertEqual(problems, ["log row 1 (revision 1): its records do not read (at byte 13)",
                                      "log row 2 (revision 2): its records end at revision 1"])
        }
    }

    /// A crash can cut SQLite's WAL anywhere: whatever prefix survives, the log gives the state
    /// after a whole number of groups (a torn last row is dropped, never half replayed), and the
    /// WAL whole gives every group.
    func test_aWALCutAnywhere_givesWholeLoggedGroupsOnly() throws {
        let storage = try SQLiteStorage(path: databasePath)
        let model = MemoryStorage()
        var allowed = [try model.load()]
        var random = SplitMix64(seed: 5)
        for rev in UInt64(1)...6 {
            var transaction = random.storedTransaction(rev: rev)
            // Values over a page: a group is several WAL frames, so cuts fall inside groups too.
            transaction.putKeys.append(StoredKey(key: "big.\(rev)", value: .string(String(repeating: "v", count: 5000)), rev: rev,
                                                 createdRev: rev, version: 1))
            var group = ByteBuffer()
            CommitLog.append(transaction, to: &group)
            try storage.commitLog(group.bytes, rev: rev)
            try model.commit(transaction)
            allowed.append(try model.load())
        }
        // The files as a crash would leave them: copied while the database is open.
        let database = try Data(contentsOf: URL(fileURLWithPath: databasePath))
        let wal = try Data(contentsOf: URL(fileURLWithPath: databasePath + "-wal"))
        storage.close()
        let copy = directory + "/copy.db"
        var seen: [UInt64] = []
        for length in Array(stride(from: 0, through: wal.count, by: 512)) + [wal.count] {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: copy + suffix) }
            try database.write(to: URL(fileURLWithPath: copy))
            try wal.prefix(length).write(to: URL(fileURLWithPath: copy + "-wal"))
            let reopened = try SQLiteStorage(path: copy)
            let state = try reopened.load()
            reopened.close()
            XCTAssertTrue(allowed.contains(state), "WAL cut at \(length) of \(wal.count) gave part of a group: rev \(state.rev)")
            XCTAssertGreaterThanOrEqual(state.rev, seen.last ?? 0, "a longer WAL gave fewer groups")
            seen.append(state.rev)
        }
        XCTAssertEqual(Set(seen), Set(0...6), "the cuts should reach every whole-group state")
        XCTAssertEqual(seen.last, 6, "the whole WAL keeps every group")
    }

    /// The log never holds more than its bound and one group: `commitLog` checkpoints first when
    /// the bound is reached. What is loaded is what committing the transactions one by one leaves.
    func test_theLog_isBounded_checkpointingBeforeItPassesItsBound() throws {
        let bound = 4096
        let storage = try SQLiteStorage(path: databasePath, logBound: bound)
        let model = MemoryStorage()
        var random = SplitMix64(seed: 23)
        var checkpoints = 0
        for rev in UInt64(1)...300 {
            let transaction = random.storedTransaction(rev: rev)
            var group = ByteBuffer()
            CommitLog.append(transaction, to: &group)
            let before = storage.logBytes
            try storage.commitLog(group.bytes, rev: rev)
            try model.commit(transaction)
            if storage.logBytes < before { checkpoints += 1 }
            XCTAssertLessThan(storage.logBytes, bound + group.count, "rev \(rev): the log passed its bound")
            XCTAssertEqual(try storage.storedLog().bytes, storage.logBytes)
        }
        XCTAssertGreaterThanOrEqual(checkpoints, 3)
        XCTAssertEqual(try storage.load(), try model.load())
    }

    /// A checkpoint that cannot be written (here another connection holds the write lock; a full
    /// disk fails the same way) is an `internal` error naming the file, reported once, and changes
    /// nothing: the log is as it was, nothing is lost, and a group that would pass the bound is
    /// refused whole rather than appended. Once the database can be written, all goes on.
    func test_aFailedCheckpoint_losesNothing_andKeepsTheBound() throws {
        let messages = Messages()
        let storage = try SQLiteStorage(path: databasePath, busyTimeout: 0.05, logBound: 2048) { messages.add($0) }
        let model = MemoryStorage()
        var random = SplitMix64(seed: 41)
        var rev: UInt64 = 0
        func group() -> (StoredTransaction, [UInt8]) {
            rev += 1
            let transaction = random.storedTransaction(rev: rev)
            var group = ByteBuffer()
            CommitLog.append(transaction, to: &group)
            return (transaction, Array(group.bytes))
        }
        while storage.logBytes < storage.logBound {
            let (transaction, records) = group()
            try records.withUnsafeBytes { records in try storage.commitLog(records, rev: rev) }
            try model.commit(transaction)
        }
        let logged = try storage.storedLog()

        let blocker = try SQLiteStorage(path: databasePath)
        try blocker.execute("BEGIN IMMEDIATE")
        XCTAssertThrowsError(try storage.checkpoint()) { error in
            XCTAssertEqual((error as? ObsError)?.code, .internal)
            XCTAssertTrue("\(error)".contains("database \(self.databasePath): cannot checkpoint its log"), "\(error)")
        }
        let (refused, refusedRecords) = group()
        XCTAssertThrowsError(try refusedRecords.withUnsafeBytes { records in try storage.commitLog(records, rev: rev) },
                             "past the bound, with no checkpoint possible")
        XCTAssertEqual(try storage.storedLog().rows, logged.rows, "nothing appended")
        XCTAssertEqual(storage.logBytes, logged.bytes)
        XCTAssertEqual(messages.all.count, 1, "reported once: \(messages.all)")
        XCTAssertEqual(try storage.load(), try model.load(), "nothing lost")

        try blocker.execute("ROLLBACK")
        blocker.close()
        // The refused group is written again (as the daemon's writer does), after a checkpoint.
        try refusedRecords.withUnsafeBytes { records in try storage.commitLog(records, rev: rev) }
        try model.commit(refused)
        XCTAssertEqual(storage.logBytes, refusedRecords.count, "checkpointed, then appended")
        XCTAssertEqual(try storage.load(), try model.load())
        XCTAssertEqual(messages.all.count, 2)
        XCTAssertTrue(messages.all.last?.contains("checkpointed again") == true, "\(messages.all)")
    }
}

/// What a storage reported, from any thread.
private final class Messages: @unchecked Sendable {
    private let lock = NSLock()
    private var messages: [String] = []

    func add(_ message: String) { lock.withLock { messages.append(message) } }
    var all: [String] { lock.withLock { messages } }
}
