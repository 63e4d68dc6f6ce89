// The daemon's storage, as the store sees it, and the pipelined group commit behind it.
//
// The store commits on the loop thread. Each commit is appended to the open batch as CommitLog
// records (a copy of its changes' names and values: no merging, no row). At the end of a loop turn
// the open batch goes to the writer (StorageWriter), which appends it to the commit log as one
// frame (LogFileStorage) and, in strict mode, fdatasyncs it.
//
// The daemon writes the batch on the loop thread (`inline`), at the end of the turn, before the
// turn's lines are flushed: appending a frame costs one write (and, strict, an fdatasync), and
// handing it to another thread added two wake-ups a batch, which measured more CPU per set and no
// more sets per second. Built with a writer thread instead (the tests do), the writer works while
// the loop goes on: while it is still busy with the previous batch, the open batch keeps growing
// over the next turns and goes as soon as the writer is free. So there are at most two batches:
// one in flight and one open, and they reach the disk in commit order. The two batches' buffers are
// used in turn, so that a batch costs no allocation once they have grown.
//
// Batches are numbered. A line a connection queues while a change is unwritten carries the number
// of the newest batch holding one (`unwritten`), and is sent only once that batch is written
// (`written` >= its number). Which lines wait, and their release, is WriteGate's rule.
//
// A failed write (a full disk) leaves nothing on disk: the batch is merged back in front of the
// open one and tried again after `retryInterval`. A failed fsync cannot be tried again (the kernel
// may have dropped the data), so the daemon stops.
import Glibc
import ObsCore

final class GroupCommitStorage: StateStorage {
    /// nil in memory mode: commits are dropped. (A `MemoryStorage` would keep a second copy of
    /// every key for a `load` that a daemon never calls again after start-up: with a million keys,
    /// about a fifth of the daemon's resident size, and a dictionary update per write.)
    private let writer: StorageWriter?
    private let thread: pthread_t?
    private let strict: Bool
    private let retryInterval: Double
    /// The open batch's bound in bytes (`isBehind`).
    let openBound: Int
    /// The open batch's bound unless a test sets another: at 60 bytes a set, about a million sets
    /// the writer has not taken yet.
    static let defaultOpenBound = 64 << 20

    /// What was committed since the last hand-off to the writer.
    private var open: CommitBatch?
    /// The batch the writer has.
    private var inFlight: (batch: UInt64, merged: CommitBatch)?
    /// A written batch's buffer, for the next open batch.
    private var spare: CommitBatch?
    /// For `stats`: the newest revision committed, the newest written, and since when (monotonic
    /// seconds) the oldest unwritten commit of the open batch and of the batch in flight wait.
    private var committedRev: UInt64 = 0
    private var writtenRev: UInt64 = 0
    private var openSince: Double?
    private var inFlightSince: Double?
    /// The number the open batch gets.
    private var nextBatch: UInt64 = 1
    /// Every batch up to this number is written (fsynced in strict mode).
    private(set) var written: UInt64 = 0
    /// Set after a failed write: the pending batch is tried again then.
    private(set) var retryAt: Double?
    /// After a failed fsync nothing more is written.
    private var broken = false

    /// Memory mode: no database, no thread, nothing ever waits.
    init() {
        writer = nil
        thread = nil
        strict = false
        retryInterval = 0
        openBound = Self.defaultOpenBound
    }

    /// `normal` or `strict` mode: starts the writer thread, which owns `writer`'s storage; or,
    /// `inline` (the daemon), writes each batch on the caller's thread at the end of its turn.
    init(writer: StorageWriter, strict: Bool, inline: Bool = false, retryInterval: Double,
         openBound: Int = GroupCommitStorage.defaultOpenBound) throws(SystemError) {
        self.writer = writer
        self.strict = strict
        self.retryInterval = retryInterval
        self.openBound = openBound
        thread = inline ? nil : try writer.start()
    }

    /// The writer's eventfd, readable when a batch is finished; nil in memory mode and inline.
    var completionFD: Int32? { thread == nil ? nil : writer?.done }

    /// The newest batch holding a change not yet written; `written` when there is none.
    var unwritten: UInt64 {
        if open != nil { return nextBatch }
        return inFlight?.batch ?? written
    }

    /// Whether the last write failed and its batch waits to be tried again.
    var isFailing: Bool { retryAt != nil }

    /// Bytes of commits not yet handed to the writer.
    var openBytes: Int { open?.records.count ?? 0 }

    /// Whether the open batch has reached its bound: the writer is that far behind (an fsync or a
    /// checkpoint that takes seconds), and new writes are refused until it catches up (WriteGate).
    var isBehind: Bool { openBytes >= openBound }

    func load() throws(ObsError) -> StoredState {
        guard let writer else { return StoredState() }
        let state = try writer.load()
        committedRev = state.rev
        writtenRev = state.rev
        return state
    }

    func commit(_ transaction: StoredTransaction) throws(ObsError) {
        guard writer != nil else { return }
        let batch = openBatch()
        CommitLog.append(transaction, to: &batch.records)
        batch.rev = transaction.rev
        committedRev = transaction.rev
    }

    func commitKey(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, rev: UInt64, createdRev: UInt64,
                   version: UInt64) throws(ObsError) {
        guard writer != nil else { return }
        let batch = openBatch()
        CommitLog.appendKey(name: name, value: value, rev: rev, createdRev: createdRev, version: version, to: &batch.records)
        batch.rev = rev
        committedRev = rev
    }

    private func openBatch() -> CommitBatch {
        if let open { return open }
        let batch = spare ?? CommitBatch()
        spare = nil
        open = batch
        openSince = monotonicSeconds()
        return batch
    }

    func writeLag(now: Double) -> (revisions: UInt64, seconds: Double) {
        let since = inFlightSince ?? openSince
        return (committedRev - writtenRev, since.map { max(0, now - $0) } ?? 0)
    }

    /// Memory mode drops every commit.
    var keepsCommits: Bool { writer != nil }

    /// The store never calls this: batches are synced (strict) by the writer.
    func sync() throws(ObsError) {}

    /// End of a loop turn: the open batch goes to the writer if the writer is free (and no failed
    /// write is waiting for its retry time); inline, it is written now (and what the writer thread
    /// does when idle is done here, once a turn finds nothing written for a while).
    func endTurn(now: Double) throws(GroupCommitFailure) {
        guard let writer, !broken, inFlight == nil else { return }
        guard let merged = open else {
            if thread == nil, now >= idleCheckAt {
                writer.idle()
                idleCheckAt = now + StorageWriter.fileCheckInterval
            }
            return
        }
        if let retryAt, now < retryAt { return }
        inFlight = (nextBatch, merged)
        inFlightSince = openSince
        open = nil
        openSince = nil
        nextBatch += 1
        let job = WriteJob(batch: merged, sync: strict)
        guard thread == nil else { return writer.submit(job) }
        idleCheckAt = now + StorageWriter.fileCheckInterval
        try finish(writer.writeNow(job), now: now)
    }

    /// Inline: when the writer's idle duties are next due (the writer thread's once a second).
    private var idleCheckAt = 0.0

    /// Inline: when the loop must wake for the writer's idle duties (the writer thread's poll
    /// timeout: without it an idle daemon would neither check its files nor checkpoint); nil
    /// otherwise.
    var idleDueAt: Double? { thread == nil && writer != nil ? idleCheckAt : nil }

    /// The writer's eventfd was readable: takes the outcome of the batch in flight, if it is ready.
    func takeOutcome(now: Double) throws(GroupCommitFailure) {
        guard let writer, inFlight != nil, let outcome = writer.takeOutcome() else { return }
        try finish(outcome, now: now)
    }

    private func finish(_ outcome: WriteOutcome, now: Double) throws(GroupCommitFailure) {
        guard let batch = inFlight else { return }
        inFlight = nil
        switch outcome {
        case .written:
            written = batch.batch
            writtenRev = batch.merged.rev
            inFlightSince = nil
            retryAt = nil
            batch.merged.records.removeAll(keepingCapacityUpTo: 1 << 20)
            spare = batch.merged
        case .writeFailed(let error):
            // Written again in front of what was committed since, as one batch: the lines waiting
            // for either wait for the open batch's number, which is the larger.
            let merged = batch.merged
            if let open {
                merged.records.append(open.records.bytes)
                merged.rev = open.rev
                open.records.removeAll(keepingCapacityUpTo: 1 << 20)
                spare = open
            }
            open = merged
            openSince = inFlightSince
            inFlightSince = nil
            retryAt = now + retryInterval
            throw .write(error)
        case .syncFailed(let error):
            broken = true
            throw .sync(error)
        }
    }

    /// Shutdown: waits for the batch in flight, writes what is left, and stops the writer thread
    /// (closing the database). Stops at the first failure.
    func close() throws(GroupCommitFailure) {
        guard let writer else { return }
        defer { writer.stop(thread) }
        while !broken, inFlight != nil || open != nil {
            retryAt = nil
            try endTurn(now: 0)
            if thread != nil { try finish(writer.waitForOutcome(), now: 0) }
        }
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

/// A group of commits on its way to the commit log: CommitLog records, the last at `rev`. Handed to
/// the writer thread whole, and back once written (the loop does not touch it meanwhile).
final class CommitBatch: @unchecked Sendable {
    var records = ByteBuffer()
    var rev: UInt64 = 0
}
