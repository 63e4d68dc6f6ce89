// The commit log (CommitLog.swift, SQLiteStorage+Log.swift): groups of commits written as rows of
// records, replayed onto the tables when loaded, and folded into them by a checkpoint. Whatever is
// logged and checkpointed, in whatever groups, the database must load as committing the same
// transactions one by one leaves it; a damaged log row is reported, never served.
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

    /// A random transaction at `rev` over a few names: puts and deletes of keys (with and without
    /// expiry, values of every JSON kind), definitions and bindings.
    private func randomTransaction(_ random: inout SplitMix64, rev: UInt64) -> StoredTransaction {
        var transaction = StoredTransaction(rev: rev)
        let names = ["a", "b.c", "k.1", "k.2", "long.name-with_all.kinds"]
        let values: [JSONValue] = [1, -7, 2.5, "text", "with \"quotes\" and \u{e9}", true, .null, [1, "x"], ["b": 1, "a": [2]]]
        for _ in 0..<(1 + random.below(4)) {
            let name = random.pick(names)
            switch random.below(7) {
            case 0: transaction.deletedKeys.append(name)
            case 1: transaction.putDefinitions.append(StoredDefinition(key: name, expr: "$a + \(random.below(9))", createdRev: rev))
            case 2: transaction.deletedDefinitions.append(name)
            case 3:
                transaction.putBindings.append(StoredBinding(from: random.pick(names), to: name, map: random.below(2) == 0 ? nil : "value",
                                                             twoWay: random.below(2) == 0, unmap: random.below(3) == 0 ? "value" : nil))
            case 4: transaction.deletedBindings.append(name)
            default:
                transaction.putKeys.append(StoredKey(key: name, value: random.pick(values), rev: rev, createdRev: UInt64(1 + random.below(Int(rev))),
                                                     version: UInt64(1 + random.below(9)),
                                                     expiresAt: random.below(3) == 0 ? 1_900_000_000.25 : nil))
            }
        }
        return transaction
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
                let transaction = randomTransaction(&random, rev: rev)
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

    func test_aDamagedLogRow_isReported_andNeverLoaded() throws {
        let storage = try SQLiteStorage(path: databasePath)
        var transaction = StoredTransaction(rev: 1)
        transaction.putKeys = [StoredKey(key: "k", value: "logged-value", rev: 1, createdRev: 1, version: 1)]
        var group = ByteBuffer()
        CommitLog.append(transaction, to: &group)
        try storage.commitLog(group.bytes, rev: 1)
        storage.close()
        var bytes = try Data(contentsOf: URL(fileURLWithPath: databasePath))
        let range = try XCTUnwrap(bytes.range(of: Data("logged-value".utf8)))
        bytes.replaceSubrange(range, with: Data("LOGGED-value".utf8))
        try bytes.write(to: URL(fileURLWithPath: databasePath))
        XCTAssertThrowsError(try SQLiteStorage(path: databasePath).load()) { error in
            XCTAssertTrue("\(error)".contains("log row 1 (revision 1): damaged (its checksum does not match)"), "\(error)")
        }
    }
}
