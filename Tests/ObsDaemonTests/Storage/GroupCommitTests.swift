import Glibc
import ObsCore
import XCTest
@testable import ObsDaemon

/// The group commit: a turn's commits are one batch, written when the turn ends, leaving what
/// applying its commits in order would; a batch that cannot be written stays and is tried again.
final class GroupCommitTests: XCTestCase {
    private func key(_ name: String, _ value: Int, rev: UInt64) -> StoredKey {
        StoredKey(key: name, value: .int(Int64(value)), rev: rev, createdRev: 1, version: rev)
    }

    private func put(_ name: String, _ value: Int, rev: UInt64) -> StoredTransaction {
        var transaction = StoredTransaction(rev: rev)
        transaction.putKeys = [key(name, value, rev: rev)]
        return transaction
    }

    func test_commitsWriteNothingUntilTheTurnEnds_thenOneBatchWithTheLastActionPerName() throws {
        let writer = StorageWriter(MemoryStorage())
        let storage = GroupCommitStorage(writer: writer, strict: true, retryInterval: 1)
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
        XCTAssertEqual(try writer.load(), StoredState())
        XCTAssertEqual(storage.unwritten, 1)
        XCTAssertEqual(storage.written, 0)
        XCTAssertEqual(storage.writeLag(now: monotonicSeconds()).revisions, 3)

        try storage.endTurn(now: 0)
        XCTAssertEqual(storage.written, 1)
        XCTAssertEqual(storage.unwritten, 1, "nothing left unwritten")
        XCTAssertEqual(storage.writeLag(now: monotonicSeconds()).revisions, 0)
        let state = try writer.load()
        XCTAssertEqual(state.rev, 3)
        XCTAssertEqual(state.keys, [key("a", 2, rev: 2), key("b", 3, rev: 3)])
        XCTAssertEqual(state.definitions, [])
        XCTAssertEqual(state.bindings, [StoredBinding(from: "a", to: "d")])
        try storage.close()
    }

    /// Each turn's batch has its own number, written when that turn ends.
    func test_eachTurnsBatchIsWrittenWhenTheTurnEnds() throws {
        let writer = StorageWriter(MemoryStorage())
        let storage = GroupCommitStorage(writer: writer, strict: false, retryInterval: 1)
        for rev in UInt64(1)...3 {
            try storage.commit(put("a", Int(rev), rev: rev))
            XCTAssertEqual(storage.unwritten, rev)
            XCTAssertEqual(try writer.load().rev, rev - 1, "nothing written before the turn ends")
            try storage.endTurn(now: 0)
            XCTAssertEqual(storage.written, rev)
            XCTAssertEqual(storage.unwritten, rev, "nothing left unwritten")
            XCTAssertEqual(try writer.load().keys, [key("a", Int(rev), rev: rev)])
        }
        try storage.close()
    }

    /// Shutdown writes what is committed and not yet written.
    func test_close_writesEverythingCommitted() throws {
        let memory = MemoryStorage()
        let storage = GroupCommitStorage(writer: StorageWriter(memory), strict: true, retryInterval: 1)
        try storage.commit(put("a", 1, rev: 1))
        try storage.endTurn(now: 0)
        try storage.commit(put("b", 2, rev: 2))
        try storage.close()
        XCTAssertEqual(storage.written, 2)
        XCTAssertEqual((try memory.load()).keys, [key("a", 1, rev: 1), key("b", 2, rev: 2)])
    }

    /// A write that fails (a full disk) writes nothing and keeps its batch: what is committed
    /// until it can be written joins that batch (lines wait for the one number), the write is tried
    /// again only once the retry interval has passed, and then everything goes, in order.
    func test_aFailedWrite_keepsItsBatch_whichLaterCommitsJoin_untilTheRetryWritesThemAll() throws {
        let disk = FailingStorage()
        let storage = GroupCommitStorage(writer: StorageWriter(disk), strict: true, retryInterval: 1)
        try storage.commit(put("a", 1, rev: 1))
        try storage.endTurn(now: 10)
        XCTAssertEqual(storage.written, 1)

        disk.failing = true
        try storage.commit(put("a", 2, rev: 2))
        XCTAssertThrowsError(try storage.endTurn(now: 20)) { error in
            guard case GroupCommitFailure.write = error else { return XCTFail("expected a write failure, got \(error)") }
        }
        XCTAssertTrue(storage.isFailing)
        XCTAssertEqual(storage.written, 1)
        XCTAssertEqual(storage.unwritten, 2)
        try storage.commit(put("b", 3, rev: 3))
        XCTAssertEqual(storage.unwritten, 2, "a commit during the failure joins the failed batch")
        XCTAssertEqual(storage.writeLag(now: monotonicSeconds()).revisions, 2)

        disk.failing = false
        try storage.endTurn(now: 20.5)
        XCTAssertEqual(disk.attempts, 2, "not tried again before the retry interval")
        XCTAssertEqual(storage.written, 1)
        try storage.endTurn(now: 21)
        XCTAssertEqual(disk.attempts, 3)
        XCTAssertFalse(storage.isFailing)
        XCTAssertEqual(storage.written, 2)
        XCTAssertEqual(storage.unwritten, 2, "nothing left unwritten")
        XCTAssertEqual((try disk.memory.load()).rev, 3)
        XCTAssertEqual((try disk.memory.load()).keys, [key("a", 2, rev: 2), key("b", 3, rev: 3)])
        try storage.close()
    }

    /// A failed fsync stops the writing for good: the kernel may have dropped what it held.
    func test_aFailedSync_isThrown_andNothingMoreIsWritten() throws {
        let disk = FailingStorage()
        let storage = GroupCommitStorage(writer: StorageWriter(disk), strict: true, retryInterval: 1)
        disk.syncFails = true
        try storage.commit(put("a", 1, rev: 1))
        XCTAssertThrowsError(try storage.endTurn(now: 0)) { error in
            guard case GroupCommitFailure.sync = error else { return XCTFail("expected a sync failure, got \(error)") }
        }
        disk.syncFails = false
        try storage.commit(put("a", 2, rev: 2))
        try storage.endTurn(now: 5)
        XCTAssertEqual(disk.attempts, 1)
        XCTAssertEqual(storage.written, 0)
    }

    /// While the disk cannot be written, the gate refuses writes with `internal` and lets answers
    /// that show no change go; once the retry writes the batch, writes are accepted again and the
    /// held lines are released.
    func test_theGate_refusesWritesWhileTheDiskFails_andAcceptsThemOnceTheBatchIsWritten() throws {
        let disk = FailingStorage()
        let storage = GroupCommitStorage(writer: StorageWriter(disk), strict: false, retryInterval: 1)
        let store = try Store(storage: MemoryStorage(), clock: ManualClock())
        let gate = WriteGate(storage: storage, store: store, log: Logger(level: .error, journal: false) { _ in })
        disk.failing = true
        try storage.commit(put("a", 1, rev: 1))
        XCTAssertEqual(gate.batch(toWaitFor: true), 1)
        XCTAssertEqual(gate.batch(toWaitFor: false), 1, "before the failure is known, every line waits")
        try gate.endTurn(now: 0)
        XCTAssertEqual(store.writeRefusal?.code, .internal)
        XCTAssertTrue(store.writeRefusal?.message.contains("writes are refused until it can be") == true)
        XCTAssertEqual(gate.batch(toWaitFor: true), 1)
        XCTAssertNil(gate.batch(toWaitFor: false), "while failing, lines about no change go at once")

        disk.failing = false
        try gate.endTurn(now: 1)
        XCTAssertNil(store.writeRefusal, "writes are accepted again")
        XCTAssertNil(gate.batch(toWaitFor: true))
        XCTAssertEqual((try disk.memory.load()).keys, [key("a", 1, rev: 1)])
        try storage.close()
    }
}

/// A storage whose writes or fsyncs fail on demand, over one kept in memory.
private final class FailingStorage: StateStorage {
    let memory = MemoryStorage()
    var failing = false
    var syncFails = false
    /// Writes tried, failed or not.
    private(set) var attempts = 0

    func load() throws(ObsError) -> StoredState { try memory.load() }

    func commit(_ transaction: StoredTransaction) throws(ObsError) { try memory.commit(transaction) }

    func commitLog(_ records: UnsafeRawBufferPointer, rev: UInt64) throws(ObsError) {
        attempts += 1
        if failing { throw ObsError(.internal, "No space left on device") }
        try memory.commitLog(records, rev: rev)
    }

    func sync() throws(ObsError) {
        if syncFails { throw ObsError(.internal, "fdatasync: Input/output error") }
    }
}
