import Foundation
import XCTest
@testable import ObsCore

final class SQLiteStorageTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("obsd-sqlite-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private var databasePath: String { directory.appendingPathComponent("state.db").path }

    private func transaction(_ rev: UInt64, _ build: (inout StoredTransaction) -> Void) -> StoredTransaction {
        var transaction = StoredTransaction(rev: rev)
        build(&transaction)
        return transaction
    }

    /// Two transactions touching every table: the second replaces, deletes and adds.
    private var sampleTransactions: [StoredTransaction] {
        [
            transaction(1) {
                $0.putKeys = [
                    StoredKey(key: "a", value: .int(1), rev: 1, createdRev: 1, version: 1),
                    StoredKey(key: "b", value: ["x": [1.5, "s", nil, true]], rev: 1, createdRev: 1, version: 1,
                              expiresAt: 1_900_000_000.25),
                    StoredKey(key: "big", value: .int(Int64.max), rev: 1, createdRev: 1, version: 1),
                ]
                $0.putDefinitions = [StoredDefinition(key: "c", expr: "$a + 1", createdRev: 1)]
                $0.putBindings = [StoredBinding(from: "a", to: "d", map: "value * 2", twoWay: true, unmap: "value / 2")]
            },
            transaction(2) {
                $0.putKeys = [StoredKey(key: "a", value: "é\u{0}nul", rev: 2, createdRev: 1, version: 2)]
                $0.deletedKeys = ["b"]
                $0.putDefinitions = [StoredDefinition(key: "e", expr: "'x'", createdRev: 2)]
                $0.deletedDefinitions = ["c"]
                $0.putBindings = [StoredBinding(from: "e", to: "f")]
                $0.deletedBindings = ["d"]
            },
        ]
    }

    private func expected(after transactions: [StoredTransaction]) throws -> StoredState {
        let memory = MemoryStorage()
        for transaction in transactions { try memory.commit(transaction) }
        return normalized(try memory.load())
    }

    private func normalized(_ state: StoredState) -> StoredState {
        var state = state
        state.keys.sort { $0.key < $1.key }
        state.definitions.sort { $0.key < $1.key }
        state.bindings.sort { $0.to < $1.to }
        return state
    }

    func test_newDatabase_loadsEmptyState() throws {
        let storage = try SQLiteStorage(path: databasePath)
        XCTAssertEqual(try storage.load(), StoredState())
    }

    func test_commit_roundTripsEveryRecordLikeMemoryStorage() throws {
        let storage = try SQLiteStorage(path: databasePath)
        for transaction in sampleTransactions {
            try storage.commit(transaction)
            try storage.sync()
        }
        XCTAssertEqual(try storage.load(), try expected(after: sampleTransactions))
    }

    func test_reopen_restoresStateAndRevision() throws {
        do {
            let storage = try SQLiteStorage(path: databasePath)
            for transaction in sampleTransactions { try storage.commit(transaction) }
            storage.close()
        }
        let reopened = try SQLiteStorage(path: databasePath)
        let state = try reopened.load()
        XCTAssertEqual(state.rev, 2)
        XCTAssertEqual(state, try expected(after: sampleTransactions))
    }

    func test_revisionAboveInt64_roundTrips() throws {
        let storage = try SQLiteStorage(path: databasePath)
        try storage.commit(transaction(UInt64.max) {
            $0.putKeys = [StoredKey(key: "k", value: .null, rev: UInt64.max, createdRev: UInt64.max - 1, version: 3)]
        })
        let state = try storage.load()
        XCTAssertEqual(state.rev, UInt64.max)
        XCTAssertEqual(state.keys.first?.rev, UInt64.max)
    }

    /// A crash can cut the WAL anywhere. Whatever prefix survives, opening it must give the state
    /// after some whole number of transactions, never part of one.
    func test_tornWAL_givesWholeTransactionsOnly() throws {
        let storage = try SQLiteStorage(path: databasePath)
        let transactions = sampleTransactions
        for transaction in transactions { try storage.commit(transaction) }
        let database = try Data(contentsOf: URL(fileURLWithPath: databasePath))
        let wal = try Data(contentsOf: URL(fileURLWithPath: databasePath + "-wal"))
        XCTAssertGreaterThan(wal.count, 0)
        let allowed = try (0...transactions.count).map { try expected(after: Array(transactions.prefix($0))) }

        let copy = directory.appendingPathComponent("copy.db").path
        var seen = Set<UInt64>()
        // Every 512 bytes plus the exact frame boundaries' neighbours would be thorough; 512 covers
        // every 4 KiB page several times while keeping the test fast.
        for length in stride(from: 0, through: wal.count, by: 512) + [wal.count] {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: copy + suffix) }
            try database.write(to: URL(fileURLWithPath: copy))
            try wal.prefix(length).write(to: URL(fileURLWithPath: copy + "-wal"))
            let reopened = try SQLiteStorage(path: copy)
            let state = normalized(try reopened.load())
            reopened.close()
            XCTAssertTrue(allowed.contains(state), "WAL cut at \(length) of \(wal.count) gave a partial transaction: \(state)")
            seen.insert(state.rev)
        }
        XCTAssertEqual(seen, [0, 1, 2], "the cuts should reach every whole-transaction state")
    }

    func test_failedCommit_appliesNothing() throws {
        let storage = try SQLiteStorage(path: databasePath)
        try storage.commit(sampleTransactions[0])
        // Another connection holding the write lock makes the commit fail before it writes anything.
        let blocker = try SQLiteStorage(path: databasePath, busyTimeout: 0.05)
        try blocker.execute("BEGIN IMMEDIATE")
        let storage2 = try SQLiteStorage(path: databasePath, busyTimeout: 0.05)
        XCTAssertThrowsError(try storage2.commit(sampleTransactions[1]))
        try blocker.execute("ROLLBACK")
        blocker.close()
        storage2.close()
        XCTAssertEqual(normalized(try storage.load()), try expected(after: [sampleTransactions[0]]))
    }

    func test_notADatabase_isRefusedNamingTheFile_andLeftUnchanged() throws {
        let garbage = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        try garbage.write(to: URL(fileURLWithPath: databasePath))
        XCTAssertThrowsError(try SQLiteStorage(path: databasePath)) { error in
            XCTAssertTrue("\(error)".contains(self.databasePath), "\(error)")
        }
        XCTAssertThrowsError(try SQLiteStorage(path: databasePath, mode: .check))
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: databasePath)), garbage)
        XCTAssertFalse(FileManager.default.fileExists(atPath: databasePath + "-wal"))
    }

    func test_damagedPages_failTheIntegrityCheck_andAreLeftUnchanged() throws {
        do {
            let storage = try SQLiteStorage(path: databasePath)
            for index in 0..<2000 {
                try storage.commit(transaction(UInt64(index + 1)) {
                    $0.putKeys = [StoredKey(key: "key\(index)", value: .string(String(repeating: "v", count: 100)),
                                            rev: UInt64(index + 1), createdRev: UInt64(index + 1), version: 1)]
                })
            }
            storage.close()
        }
        XCTAssertNoThrow(try SQLiteStorage(path: databasePath, mode: .check))
        var bytes = try Data(contentsOf: URL(fileURLWithPath: databasePath))
        XCTAssertGreaterThan(bytes.count, 16 * 4096)
        // Scribble over the middle of a few b-tree pages (not page 1, which holds the header).
        for page in [3, 7, 11] {
            for offset in 0..<64 { bytes[page * 4096 + 8 + offset] = 0xA5 }
        }
        try bytes.write(to: URL(fileURLWithPath: databasePath))
        XCTAssertThrowsError(try SQLiteStorage(path: databasePath, mode: .check).load())
        XCTAssertThrowsError(try SQLiteStorage(path: databasePath)) { error in
            XCTAssertTrue("\(error)".contains(self.databasePath), "\(error)")
        }
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: databasePath)), bytes)
    }

    func test_unknownSchemaVersion_isRefused() throws {
        do {
            let storage = try SQLiteStorage(path: databasePath)
            try storage.execute("UPDATE schema_version SET version = 99")
            storage.close()
        }
        XCTAssertThrowsError(try SQLiteStorage(path: databasePath)) { error in
            XCTAssertTrue("\(error)".contains("schema version 99"), "\(error)")
        }
    }
}
