import Glibc
import ObsCore
import XCTest
@testable import ObsDaemon

/// The pipelined group commit: commits are merged into batches that the writer thread writes in
/// order, each as one transaction leaving what applying its commits in order would.
final class GroupCommitTests: XCTestCase {
    private func key(_ name: String, _ value: Int, rev: UInt64) -> StoredKey {
        StoredKey(key: name, value: .int(Int64(value)), rev: rev, createdRev: 1, version: rev)
    }

    /// Waits (without a deadline that could fail on a slow machine: the writer answers or the
    /// test hangs, and XCTest's own timeout reports it) for the batch in flight.
    private func waitForWriter(_ storage: GroupCommitStorage) throws {
        var descriptor = pollfd(fd: storage.completionFD!, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&descriptor, 1, -1), 1)
        try storage.takeOutcome(now: 0)
    }

    func test_commitsWriteNothingUntilTheTurnEnds_thenOneTransactionWithTheLastActionPerName() throws {
        let writer = try StorageWriter(MemoryStorage())
        let storage = try GroupCommitStorage(writer: writer, strict: true, retryInterval: 1)
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

        try storage.endTurn(now: 0)
        try waitForWriter(storage)
        XCTAssertEqual(storage.written, 1)
        let state = try writer.load()
        XCTAssertEqual(state.rev, 3)
        XCTAssertEqual(state.keys, [key("a", 2, rev: 2), key("b", 3, rev: 3)])
        XCTAssertEqual(state.definitions, [])
        XCTAssertEqual(state.bindings, [StoredBinding(from: "a", to: "d")])
        try storage.close()
    }

    /// While a batch is in flight the next turns' commits gather in the next batch, which goes when
    /// the writer is free; lines queued meanwhile wait for that newer batch.
    func test_whileABatchIsInFlight_theNextTurnsGatherIntoTheNextBatch() throws {
        let writer = try StorageWriter(MemoryStorage(), delay: 0.05)
        let storage = try GroupCommitStorage(writer: writer, strict: false, retryInterval: 1)
        var first = StoredTransaction(rev: 1)
        first.putKeys = [key("a", 1, rev: 1)]
        try storage.commit(first)
        try storage.endTurn(now: 0)
        XCTAssertEqual(storage.unwritten, 1)
        for rev in UInt64(2)...4 {
            var next = StoredTransaction(rev: rev)
            next.putKeys = [key("a", Int(rev), rev: rev)]
            try storage.commit(next)
            // The writer is busy (or its outcome not yet taken): nothing new is handed over.
            try storage.endTurn(now: 0)
            XCTAssertEqual(storage.unwritten, 2)
        }
        try waitForWriter(storage)
        XCTAssertEqual(storage.written, 1)
        XCTAssertEqual(try writer.load().rev, 1)
        try storage.endTurn(now: 0)
        try waitForWriter(storage)
        XCTAssertEqual(storage.written, 2)
        XCTAssertEqual(storage.unwritten, 2, "nothing left unwritten")
        XCTAssertEqual(try writer.load().keys, [key("a", 4, rev: 4)])
        try storage.close()
    }

    /// Shutdown writes the batch in flight and the open one.
    func test_close_writesEverythingCommitted() throws {
        let writer = try StorageWriter(MemoryStorage(), delay: 0.05)
        let storage = try GroupCommitStorage(writer: writer, strict: true, retryInterval: 1)
        var first = StoredTransaction(rev: 1)
        first.putKeys = [key("a", 1, rev: 1)]
        try storage.commit(first)
        try storage.endTurn(now: 0)
        var second = StoredTransaction(rev: 2)
        second.putKeys = [key("b", 2, rev: 2)]
        try storage.commit(second)
        try storage.close()
        XCTAssertEqual(storage.written, 2)
    }

    /// Inline (normal mode): no thread; the turn's batch is written when the turn ends, so the
    /// lines of the turn never wait past it.
    func test_inline_writesTheTurnsBatchWhenTheTurnEnds() throws {
        let writer = try StorageWriter(MemoryStorage())
        let storage = try GroupCommitStorage(writer: writer, strict: false, inline: true, retryInterval: 1)
        XCTAssertNil(storage.completionFD)
        for rev in UInt64(1)...3 {
            var transaction = StoredTransaction(rev: rev)
            transaction.putKeys = [key("a", Int(rev), rev: rev)]
            try storage.commit(transaction)
            XCTAssertEqual(storage.unwritten, rev)
            XCTAssertEqual(try writer.load().rev, rev - 1, "nothing written before the turn ends")
            try storage.endTurn(now: 0)
            XCTAssertEqual(storage.written, rev)
            XCTAssertEqual(storage.unwritten, rev, "nothing left unwritten")
            XCTAssertEqual(try writer.load().keys, [key("a", Int(rev), rev: rev)])
        }
        try storage.close()
    }

    /// The commits the writer has not taken yet are bounded in bytes: while the writer is busy
    /// (here slowed down) and they reach the bound, new writes are refused with `internal`; once
    /// the writer takes them, writes are accepted again. Nothing committed is dropped.
    func test_whileTheWriterIsBehindByTheBound_writesAreRefused_untilItCatchesUp() throws {
        let writer = try StorageWriter(MemoryStorage(), delay: 0.2)
        let storage = try GroupCommitStorage(writer: writer, strict: true, retryInterval: 1, openBound: 1000)
        let store = try Store(storage: MemoryStorage(), clock: ManualClock())
        let gate = WriteGate(storage: storage, store: store, log: Logger(level: .error, journal: false) { _ in })
        var rev: UInt64 = 0
        func commit() throws {
            rev += 1
            var transaction = StoredTransaction(rev: rev)
            transaction.putKeys = [key("k.\(rev)", Int(rev), rev: rev)]
            try storage.commit(transaction)
        }
        try commit()
        try gate.endTurn(now: 0, writerFinished: false)
        XCTAssertEqual(storage.unwritten, 1, "the first batch is in flight")
        while storage.openBytes < 1000 {
            try commit()
            try gate.endTurn(now: 0, writerFinished: false)
            XCTAssertEqual(store.writeRefusal == nil, storage.openBytes < 1000, "refused exactly from the bound on")
        }
        XCTAssertEqual(store.writeRefusal?.code, .internal)
        XCTAssertTrue(store.writeRefusal?.message.contains("writes are refused until it catches up") == true)

        var descriptor = pollfd(fd: gate.completionFD!, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&descriptor, 1, -1), 1)
        try gate.endTurn(now: 0, writerFinished: true)
        XCTAssertEqual(storage.openBytes, 0, "the open batch went to the writer")
        XCTAssertNil(store.writeRefusal, "writes are accepted again")
        try storage.close()
        XCTAssertEqual(storage.writeLag(now: 0).revisions, 0, "every commit written")
        XCTAssertEqual(storage.written, storage.unwritten)
    }
}
