import ObsCore
import XCTest
@testable import ObsDaemon

/// The group commit of normal and strict modes: the turn's transactions reach the database as one,
/// written only at the end of the turn, and that one leaves what applying them in order would.
final class GroupCommitTests: XCTestCase {
    private func key(_ name: String, _ value: Int, rev: UInt64) -> StoredKey {
        StoredKey(key: name, value: .int(Int64(value)), rev: rev, createdRev: 1, version: rev)
    }

    func test_strict_writesNothingUntilSync_thenOneTransactionWithTheLastActionPerName() throws {
        let database = MemoryStorage()
        let storage = GroupCommitStorage(database, durability: .strict)
        var first = StoredTransaction(rev: 1)
        first.putKeys = [key("a", 1, rev: 1), key("b", 1, rev: 1)]
        first.putDefinitions = [StoredDefinition(key: "c", expr: "$a + 1", createdRev: 1)]
        var second = StoredTransaction(rev: 2)
        second.deletedKeys = ["b"]
        second.putKeys = [key("a", 2, rev: 2)]
        second.putBindings = [StoredBinding(from: "a", to: "d")]
        var third = StoredTransaction(rev: 3)
        third.putKeys = [key("b", 3, rev: 3)]
        third.deletedDefinitions = ["c"]
        for transaction in [first, second, third] { try storage.commit(transaction) }
        XCTAssertEqual(try database.load(), StoredState())

        try storage.syncIfNeeded()
        let state = try database.load()
        XCTAssertEqual(state.rev, 3)
        XCTAssertEqual(state.keys, [key("a", 2, rev: 2), key("b", 3, rev: 3)])
        XCTAssertEqual(state.definitions, [])
        XCTAssertEqual(state.bindings, [StoredBinding(from: "a", to: "d")])
    }

    func test_normal_writesNothingUntilTheTurnEnds_thenOneTransaction() throws {
        let database = MemoryStorage()
        let storage = GroupCommitStorage(database, durability: .normal)
        var first = StoredTransaction(rev: 1)
        first.putKeys = [key("a", 1, rev: 1)]
        var second = StoredTransaction(rev: 2)
        second.putKeys = [key("a", 2, rev: 2), key("b", 2, rev: 2)]
        try storage.commit(first)
        try storage.commit(second)
        XCTAssertEqual(try database.load(), StoredState())
        try storage.syncIfNeeded()
        XCTAssertEqual(try database.load().rev, 2)
        XCTAssertEqual(try database.load().keys, [key("a", 2, rev: 2), key("b", 2, rev: 2)])
    }

    func test_memory_passesEachCommitStraightThrough() throws {
        let database = MemoryStorage()
        let storage = GroupCommitStorage(database, durability: .memory)
        var transaction = StoredTransaction(rev: 1)
        transaction.putKeys = [key("a", 1, rev: 1)]
        try storage.commit(transaction)
        XCTAssertEqual(try database.load().keys, [key("a", 1, rev: 1)])
    }
}
