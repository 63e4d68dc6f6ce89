import Foundation
import Glibc
import ObsCore
import TestSupport
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
        XCTAssertEqual((try disk.inner.load()).rev, 3)
        XCTAssertEqual((try disk.inner.load()).keys, [key("a", 2, rev: 2), key("b", 3, rev: 3)])
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
        XCTAssertEqual((try disk.inner.load()).keys, [key("a", 1, rev: 1)])
        try storage.close()
    }
}

extension GroupCommitTests {
    /// The case that needed a bound: while the disk is full, client writes are refused, but a
    /// binding fed by a computed over `now()` writes its target every second, and TTL keys expire.
    /// The open batch stays within max(bound, twice its compacted size) plus one transaction,
    /// and so does every retry's write; once the disk takes it, the state is what writing every
    /// commit would have left.
    func test_whileAWriteFails_theDaemonsOwnCommits_keepTheOpenBatchWithinItsBound() throws {
        let bound = 64 << 10
        let disk = FailingStorage()
        let storage = GroupCommitStorage(writer: StorageWriter(disk), strict: false, retryInterval: 1, compactionBytes: bound)
        let model = MemoryStorage()
        var rev: UInt64 = 1
        var keys = StoredTransaction(rev: rev)
        keys.putKeys = (1...20).map { StoredKey(key: "ttl.\($0)", value: .int(Int64($0)), rev: 1, createdRev: 1, version: 1, expiresAt: 2e9) }
        try model.commit(keys)
        try storage.commit(keys)
        try storage.endTurn(now: 0)

        // The disk is full: the turn's batch (a client's write) is not written.
        disk.failing = true
        rev += 1
        let held = put("held", 1, rev: rev)
        try model.commit(held)
        try storage.commit(held)
        XCTAssertThrowsError(try storage.endTurn(now: 1))

        let stamp = String(repeating: "s", count: 1000)
        var largestTransaction = 0, largestBatch = 0
        var now = 1.0
        for tick in 1...5000 {
            rev += 1
            var transaction = StoredTransaction(rev: rev)
            if tick % 250 == 0 {
                transaction.deletedKeys = ["ttl.\(tick / 250)"]
            } else {
                transaction.putKeys = [StoredKey(key: "stamp", value: .string(stamp + "\(tick)"), rev: rev, createdRev: 2, version: UInt64(tick))]
            }
            var records = ByteBuffer()
            CommitLog.append(transaction, to: &records)
            largestTransaction = max(largestTransaction, records.count)
            try model.commit(transaction)
            try storage.commit(transaction)
            if tick % 10 == 0 {
                now += 1
                XCTAssertThrowsError(try storage.endTurn(now: now), "tick \(tick): the retry fails")
            }
            largestBatch = max(largestBatch, storage.writeLag(now: monotonicSeconds()).bytes)
        }
        XCTAssertTrue(storage.writeLag(now: monotonicSeconds()).failing)
        XCTAssertLessThanOrEqual(largestBatch, bound + largestTransaction, "the open batch")
        XCTAssertEqual(disk.attempts, 502)
        XCTAssertLessThanOrEqual(disk.largestWrite, bound + largestTransaction, "what one retry writes")
        XCTAssertEqual(storage.writeLag(now: monotonicSeconds()).revisions, 5001)

        disk.failing = false
        try storage.endTurn(now: now + 1)
        XCTAssertFalse(storage.isFailing)
        XCTAssertEqual(storage.writeLag(now: monotonicSeconds()), WriteLag())
        XCTAssertEqual(try disk.inner.load(), try model.load(), "what writing every commit would have left")
        try storage.close()
    }

    /// The compacted batch through the daemon's real storage (log files beside an SQLite
    /// database): random transactions of every kind go to two of them, one whose writes fail for
    /// two long stretches (its open batch compacted many times) and one that writes every turn.
    /// The second stretch lasts to the end: a key, a definition and a binding made before it are
    /// deleted in it (a TTL expiry, say), then another key is written many times (a binding fed
    /// by the clock), compacted several times over: the state is what its compacted batch left.
    /// Loaded from disk, both as a crash would leave them (the log files replayed over the rows)
    /// and after a clean stop (the log folded into the rows), they hold the same state.
    func test_aCompactedBatch_writtenToTheLogFiles_loadsAsTheBatchesWrittenEveryTurn() throws {
        let root = NSTemporaryDirectory() + "obsd-compaction-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        func logStorage(_ name: String) throws -> LogFileStorage {
            let directory = root + "/" + name
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let storage = try LogFileStorage(directory: directory, database: try SQLiteStorage(path: directory + "/obsd.db")) { _ in }
            _ = try storage.load()
            return storage
        }
        let everyTurn = try logStorage("every-turn"), failing = try logStorage("failing")
        let disk = FailingStorage(failing)
        let plain = GroupCommitStorage(writer: StorageWriter(everyTurn), strict: true, retryInterval: 1)
        let compacting = GroupCommitStorage(writer: StorageWriter(disk), strict: true, retryInterval: 1, compactionBytes: 2048)
        let model = MemoryStorage()
        var random = SplitMix64(seed: 59)
        var now = 0.0
        for rev in UInt64(1)...3000 {
            disk.failing = (500..<1500).contains(rev) || rev >= 2000
            var transaction: StoredTransaction
            switch rev {
            case 1999:
                transaction = put("doomed", 1, rev: rev)
                transaction.putDefinitions = [StoredDefinition(key: "doomed.computed", expr: "$doomed", createdRev: rev)]
                transaction.putBindings = [StoredBinding(from: "doomed", to: "doomed.target")]
            case 2800:
                transaction = StoredTransaction(rev: rev)
                transaction.deletedKeys = ["doomed"]
                transaction.deletedDefinitions = ["doomed.computed"]
                transaction.deletedBindings = ["doomed.target"]
            case 2801...:
                transaction = put("stamp", Int(rev), rev: rev)
            default:
                transaction = random.storedTransaction(rev: rev)
            }
            try model.commit(transaction)
            try plain.commit(transaction)
            try compacting.commit(transaction)
            // A turn every few commits, a tenth of a second apart: never idle long enough for a
            // checkpoint, so that everything is in the log files until the copy below.
            if random.below(4) == 0 {
                now += 0.1
                try plain.endTurn(now: now)
                if (try? compacting.endTurn(now: now)) == nil { XCTAssertTrue(disk.failing, "revision \(rev)") }
            }
        }
        disk.failing = false
        now += 1
        try plain.endTurn(now: now)
        try compacting.endTurn(now: now)
        XCTAssertFalse(compacting.isFailing)
        XCTAssertLessThan(disk.largestWrite, 64 << 10, "the batch was compacted while the disk was full")
        let expected = try model.load()
        // Loaded after a crash, the state takes one more revision, for the ephemeral keys that run
        // may have had (LogFileStorage.load).
        var crashed = expected
        crashed.rev += 1

        // As a crash would leave them: copies of the state directories, the log files replayed.
        for name in ["every-turn", "failing"] {
            let copy = root + "/crashed-" + name
            try FileManager.default.copyItem(atPath: root + "/" + name, toPath: copy)
            let loaded = try LogFileStorage(directory: copy, database: try SQLiteStorage(path: copy + "/obsd.db")) { _ in }
            XCTAssertGreaterThan(try LogFileStorage.files(in: copy).count, 0, "\(name): the state is in its log files")
            XCTAssertEqual(try loaded.load(), crashed, "\(name), its log files replayed")
            loaded.close()
        }
        // After a clean stop: the log folded into the rows.
        try plain.close()
        try compacting.close()
        everyTurn.close()
        failing.close()
        for name in ["every-turn", "failing"] {
            let directory = root + "/" + name
            XCTAssertEqual(try LogFileStorage.files(in: directory).count, 0, "\(name): a clean stop leaves no log file")
            let loaded = try LogFileStorage(directory: directory, database: try SQLiteStorage(path: directory + "/obsd.db")) { _ in }
            XCTAssertEqual(try loaded.load(), expected, "\(name), folded into its rows")
            loaded.close()
        }
    }

    /// The log says when the write first fails, again once a minute while it fails, and when it
    /// succeeds, each time with what waits (revisions, bytes, since when).
    func test_theLog_saysWhatWaits_whenTheWriteFails_everyMinuteWhileItFails_andWhenItSucceeds() throws {
        let disk = FailingStorage()
        let storage = GroupCommitStorage(writer: StorageWriter(disk), strict: false, retryInterval: 1)
        let store = try Store(storage: MemoryStorage(), clock: ManualClock())
        let lines = Lines()
        let gate = WriteGate(storage: storage, store: store, log: Logger(level: .info, journal: false) { lines.append($0) })
        disk.failing = true
        try storage.commit(put("a", 1, rev: 1))
        try gate.endTurn(now: 100)
        XCTAssertEqual(lines.all.count, 1)
        XCTAssertTrue(lines.all[0].hasPrefix("obsd: error: No space left on device; refusing writes"), lines.all[0])
        XCTAssertTrue(lines.all[0].contains("(waiting: 1 revision, 47 bytes in memory, the oldest for "), lines.all[0])
        for second in 101...159 {
            try storage.commit(put("a", second, rev: UInt64(second - 99)))
            try gate.endTurn(now: Double(second))
        }
        XCTAssertEqual(lines.all.count, 1, "retried every second, said once a minute")
        try gate.endTurn(now: 160)
        XCTAssertEqual(lines.all.count, 2)
        XCTAssertTrue(lines.all[1].hasPrefix("obsd: error: the database still cannot be written (No space left on device); writes are refused (waiting: 60 revisions, 2938 bytes in memory, the oldest for "),
                      lines.all[1])
        disk.failing = false
        try gate.endTurn(now: 161)
        XCTAssertEqual(lines.all.count, 3)
        XCTAssertTrue(lines.all[2].hasPrefix("obsd: info: the database can be written again (written: 60 revisions, 2938 bytes in memory, the oldest for "), lines.all[2])
        XCTAssertTrue(lines.all[2].hasSuffix("); writes are accepted\n"), lines.all[2])
        try storage.close()
    }
}

/// Log lines, collected from any thread.
private final class Lines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []

    func append(_ line: String) { lock.withLock { lines.append(line) } }

    var all: [String] { lock.withLock { lines } }
}

/// A storage whose writes or fsyncs fail on demand, over another (one kept in memory unless told).
private final class FailingStorage: StateStorage {
    let inner: any StateStorage
    var failing = false
    var syncFails = false
    /// Writes tried, failed or not.
    private(set) var attempts = 0
    /// The most bytes one write tried to write.
    private(set) var largestWrite = 0

    init(_ inner: any StateStorage = MemoryStorage()) {
        self.inner = inner
    }

    func load() throws(ObsError) -> StoredState { try inner.load() }

    func commit(_ transaction: StoredTransaction) throws(ObsError) { try inner.commit(transaction) }

    func commitLog(_ records: UnsafeRawBufferPointer, rev: UInt64) throws(ObsError) {
        attempts += 1
        largestWrite = max(largestWrite, records.count)
        if failing { throw ObsError(.internal, "No space left on device") }
        try inner.commitLog(records, rev: rev)
    }

    func sync() throws(ObsError) {
        if syncFails { throw ObsError(.internal, "fdatasync: Input/output error") }
        try inner.sync()
    }

    func checkpoint() throws(ObsError) { try inner.checkpoint() }

    func checkFiles() { inner.checkFiles() }

    var logBytes: Int { inner.logBytes }
}
