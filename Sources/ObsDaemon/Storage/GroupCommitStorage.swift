// The daemon's storage, as the store sees it, and the group commit behind it.
//
// The store commits on the loop thread. Each commit is appended to the open batch as CommitLog
// records (a copy of its changes' names and values: no merging, no row). At the end of a loop turn,
// before the turn's lines are flushed, the open batch goes to the writer (StorageWriter), which
// appends it to the commit log as one frame (LogFileStorage) and, in strict mode, fdatasyncs it.
//
// The batch is written on the loop thread: appending a frame costs one write (and, strict, an
// fdatasync). A writer thread was tried and taken out: handing each batch over cost two wake-ups,
// measured more CPU per set and no more sets per second, and it let nothing else go sooner, since
// every answer queued while a change is unwritten waits for that change's batch anyway (WriteGate).
// The batch's buffer is kept for the next one, so that a batch costs no allocation once it has
// grown.
//
// Batches are numbered. A line a connection queues while a change is unwritten carries the number
// of the newest batch holding one (`unwritten`), and is sent only once that batch is written
// (`written` >= its number). Which lines wait, and their release, is WriteGate's rule.
//
// A failed write (a full disk) leaves nothing on disk: the batch stays open, later commits join
// it, and it is tried again after `retryInterval`. A failed fsync cannot be tried again (the kernel
// may have dropped the data), so the daemon stops.
//
// Bounded while failing: client writes are refused then, but the daemon's own commits go on (TTL
// expiries; a binding fed by a computed over `now()` writes its target every second), and each
// would grow the open batch for as long as the disk stays full, every retry writing it all again.
// So once the open batch passes `compactionBytes` it is rewritten as one transaction holding the
// last record naming each key, definition and binding it touches (CommitLog.compact): written, it
// leaves exactly what writing every record would, and it is still one frame, written whole or not
// at all. Its size after that is the latest state of what it touches, which only the daemon's own
// writes can add to (a bounded set: existing keys, binding targets); the next compaction waits
// until the batch has doubled (or passed `compactionBytes`, whichever is more), so that each byte
// committed is copied a bounded number of times. While the write fails, the batch is thus at most
// max(compactionBytes, twice its compacted size) plus one transaction, and so is each retry's write.
import ObsCore

final class GroupCommitStorage: StateStorage {
    /// nil in memory mode: commits are dropped. (A `MemoryStorage` would keep a second copy of
    /// every key for a `load` that a daemon never calls again after start-up: with a million keys,
    /// about a fifth of the daemon's resident size, and a dictionary update per write.)
    private let writer: StorageWriter?
    private let strict: Bool
    private let retryInterval: Double
    private let compactionBytes: Int
    /// The open batch's size past which it is compacted: `Int.max` unless a write has failed.
    private var compactAt = Int.max

    /// What was committed and is not written yet: the turn's commits, and after a failed write
    /// everything since the last batch written.
    private var open: CommitBatch?
    /// A written batch's buffer, for the next open batch.
    private var spare: CommitBatch?
    /// For `stats`: the newest revision committed, the newest written, and since when (monotonic
    /// seconds) the oldest unwritten commit waits.
    private var committedRev: UInt64 = 0
    /// The store's run (`beginRun`).
    private var run: UInt64?
    private var writtenRev: UInt64 = 0
    private var openSince: Double?
    /// The number the open batch gets.
    private var nextBatch: UInt64 = 1
    /// Every batch up to this number is written (fsynced in strict mode).
    private(set) var written: UInt64 = 0
    /// Set after a failed write: the open batch is tried again then.
    private(set) var retryAt: Double?
    /// After a failed fsync nothing more is written.
    private var broken = false
    /// When the writer's idle duties are next due.
    private var idleCheckAt = 0.0

    /// While a write fails, the open batch's size past which it is compacted.
    static let defaultCompactionBytes = 4 << 20

    /// Memory mode: no database, nothing ever waits.
    init() {
        writer = nil
        strict = false
        retryInterval = 0
        compactionBytes = 0
    }

    /// `normal` or `strict` mode: each turn's batch is written with `writer` when the turn ends.
    init(writer: StorageWriter, strict: Bool, retryInterval: Double, compactionBytes: Int = GroupCommitStorage.defaultCompactionBytes) {
        self.writer = writer
        self.strict = strict
        self.retryInterval = retryInterval
        self.compactionBytes = compactionBytes
    }

    /// The newest batch holding a change not yet written; `written` when there is none.
    var unwritten: UInt64 { open != nil ? nextBatch : written }

    /// Whether the last write failed and its batch waits to be tried again.
    var isFailing: Bool { retryAt != nil }

    func load() throws(ObsError) -> StoredState {
        guard let writer else { return StoredState() }
        let state = try writer.load()
        committedRev = state.rev
        writtenRev = state.rev
        return state
    }

    /// Kept until `close`: given to the writer's storage only if every commit was written.
    func beginRun(_ run: UInt64) {
        self.run = run
    }

    func commit(_ transaction: StoredTransaction) throws(ObsError) {
        guard writer != nil else { return }
        let batch = openBatch()
        CommitLog.append(transaction, to: &batch.records)
        batch.rev = transaction.rev
        committedRev = transaction.rev
        if batch.records.count >= compactAt { compact(batch) }
    }

    func commitKey(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, rev: UInt64, createdRev: UInt64,
                   version: UInt64) throws(ObsError) {
        guard writer != nil else { return }
        let batch = openBatch()
        CommitLog.appendKey(name: name, value: value, rev: rev, createdRev: createdRev, version: version, to: &batch.records)
        batch.rev = rev
        committedRev = rev
        if batch.records.count >= compactAt { compact(batch) }
    }

    private func openBatch() -> CommitBatch {
        if let open { return open }
        let batch = spare ?? CommitBatch()
        spare = nil
        open = batch
        openSince = monotonicSeconds()
        return batch
    }

    /// Rewrites the open batch as the last record naming each thing it touches (the file's header
    /// says why), and sets the size of the next compaction.
    private func compact(_ batch: CommitBatch) {
        var compacted = ByteBuffer()
        do throws(CommitLog.Damage) {
            try CommitLog.compact(batch.records.bytes, rev: batch.rev, into: &compacted)
        } catch {
            // Records this type wrote always read; should one not, the batch is kept as it is.
            compactAt = .max
            return
        }
        batch.records = compacted
        compactAt = max(compactionBytes, 2 * batch.records.count)
    }

    func writeLag(now: Double) -> WriteLag {
        WriteLag(revisions: committedRev - writtenRev, seconds: openSince.map { max(0, now - $0) } ?? 0,
                 bytes: open?.records.count ?? 0, failing: isFailing)
    }

    /// Memory mode drops every commit.
    var keepsCommits: Bool { writer != nil }

    /// The store never calls this: batches are synced (strict) when written.
    func sync() throws(ObsError) {}

    /// End of a loop turn: the open batch is written (unless a failed write waits for its retry
    /// time); with nothing to write for a second, the writer's idle duties are done.
    func endTurn(now: Double) throws(GroupCommitFailure) {
        guard let writer, !broken else { return }
        guard let batch = open else {
            if now >= idleCheckAt {
                writer.idle()
                idleCheckAt = now + StorageWriter.fileCheckInterval
            }
            return
        }
        if let retryAt, now < retryAt { return }
        idleCheckAt = now + StorageWriter.fileCheckInterval
        switch writer.write(WriteJob(batch: batch, sync: strict)) {
        case .written:
            written = nextBatch
            nextBatch += 1
            writtenRev = batch.rev
            open = nil
            openSince = nil
            retryAt = nil
            compactAt = .max
            batch.records.removeAll(keepingCapacityUpTo: 1 << 20)
            spare = batch
        case .writeFailed(let error):
            // Nothing of it is on disk: it stays open, and what is committed meanwhile joins it,
            // so the lines waiting for any of it wait for the one number.
            retryAt = now + retryInterval
            if compactAt == .max {
                compactAt = compactionBytes
                if batch.records.count >= compactAt { compact(batch) }
            }
            throw .write(error)
        case .syncFailed(let error):
            broken = true
            throw .sync(error)
        }
    }

    /// When the loop must wake for the writer's idle duties (without it an idle daemon would
    /// neither check its files nor checkpoint); nil in memory mode.
    var idleDueAt: Double? { writer != nil ? idleCheckAt : nil }

    /// Shutdown: writes what is left, and closes the database. Stops at the first failure.
    func close() throws(GroupCommitFailure) {
        guard let writer else { return }
        // The run is stored as the one that left the state only if that state is whole: every
        // revision it committed (and so may have sent) written.
        var whole = false
        defer { writer.stop(run: whole ? run : nil) }
        while !broken, open != nil {
            retryAt = nil
            try endTurn(now: 0)
        }
        whole = !broken && writtenRev == committedRev
    }
}

/// Why a group commit failed.
enum GroupCommitFailure: Error {
    /// The database write failed and nothing of it is on disk: the writes stay pending, to be
    /// written by a later batch.
    case write(ObsError)
    /// The fsync failed: what the kernel held may be lost, so nothing more can be promised.
    case sync(ObsError)

    var message: String {
        switch self {
        case .write(let error), .sync(let error): return error.message
        }
    }
}

/// A group of commits on its way to the commit log: CommitLog records, the last at `rev`.
final class CommitBatch {
    var records = ByteBuffer()
    var rev: UInt64 = 0
}
