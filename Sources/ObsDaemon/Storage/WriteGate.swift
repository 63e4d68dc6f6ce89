// The rule that nothing obsd sends shows a change before that change is written (and, in strict
// mode, synced), in one place. The store commits on the loop thread and the turn's commits are
// written as one numbered batch at the end of the turn (GroupCommitStorage); a line a connection
// queues while some change is unwritten carries the number of the batch holding it, and waits in
// the connection's queue until that batch is written (`Connection.write`, `releaseWritten`).
//
// Which lines wait: acknowledgements and change events (`EncodedLine.needsSync`), and read answers
// too (they could show another client's unwritten change). Only while a write has failed (a full
// disk) do lines that are not about a change go at once, so that reads go on while the disk is
// full; meanwhile write requests are refused (`Store.writeRefusal`) instead of waiting. The log
// says so when the write first fails, again every `failureReminderInterval` while it fails, and when
// it succeeds, each time with what waits (revisions, bytes, since when), as `stats` does.
import ObsCore

final class WriteGate {
    private let storage: GroupCommitStorage
    private unowned let store: Store
    private let log: Logger
    /// Connections with lines waiting for a batch.
    private var holding: [Connection] = []
    /// While the database cannot be written, how often the log says so again.
    static let failureReminderInterval = 60.0
    private var nextReminder = 0.0

    init(storage: GroupCommitStorage, store: Store, log: Logger) {
        self.storage = storage
        self.store = store
        self.log = log
    }

    /// When the failed write is tried again, if one failed.
    var retryAt: Double? { storage.retryAt }

    /// When the writer's idle duties are due on the loop thread (`normal` mode), if they are.
    var idleDueAt: Double? { storage.idleDueAt }

    /// The batch a line queued now must wait for, or nil when it may go as soon as the socket
    /// takes it.
    func batch(toWaitFor needsSync: Bool) -> UInt64? {
        let batch = storage.unwritten
        guard batch > storage.written, needsSync || !storage.isFailing else { return nil }
        return batch
    }

    /// `connection` has started holding lines: it is looked at when batches are written.
    func hold(_ connection: Connection) {
        holding.append(connection)
    }

    /// The gate's part of a loop turn, in order: the turn's batch written, the lines of every
    /// written batch released (they go out with this turn's flush), and writes refused while the
    /// database cannot be written. A failed write is tried again every retry interval; a failed
    /// fsync cannot be (the kernel may have dropped the data), so it is thrown: nothing more may
    /// be acknowledged.
    func endTurn(now: Double) throws(GroupCommitFailure) {
        let waiting = store.writeRefusal != nil ? storage.writeLag(now: now) : nil
        do throws(GroupCommitFailure) {
            try storage.endTurn(now: now)
            releaseWritten()
            if let waiting, !storage.isFailing {
                store.writeRefusal = nil
                log.info("the database can be written again (written: \(Self.describe(waiting))); writes are accepted")
            }
        } catch .write(let error) {
            // The writes stay pending (their answers held) and are tried again later; meanwhile
            // new writes get a clear error instead of a wait.
            let lag = storage.writeLag(now: now)
            if store.writeRefusal == nil {
                log.error("\(error.message); refusing writes until the database can be written (waiting: \(Self.describe(lag)))")
                store.writeRefusal = ObsError(.internal, "the database cannot be written (\(error.message)); writes are refused until it can be")
                nextReminder = now + Self.failureReminderInterval
            } else if now >= nextReminder {
                log.error("the database still cannot be written (\(error.message)); writes are refused (waiting: \(Self.describe(lag)))")
                nextReminder = now + Self.failureReminderInterval
            }
        }
    }

    /// What waits to be written, for the log.
    private static func describe(_ lag: WriteLag) -> String {
        "\(lag.revisions) revision\(lag.revisions == 1 ? "" : "s"), \(lag.bytes) bytes in memory, the oldest for \(Int(lag.seconds.rounded())) s"
    }

    private func releaseWritten() {
        guard !holding.isEmpty else { return }
        let written = storage.written
        holding.removeAll { !$0.isOpen || !$0.releaseHeld(through: written) }
    }
}
