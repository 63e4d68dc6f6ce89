// The daemon's writer: it owns the newest commit log file (LogFileStorage) for appending, and is
// called on the loop thread: `write` at the end of a turn with the turn's batch, `idle` once a
// second while nothing is written (GroupCommitStorage says why there is no writer thread).
// While idle it checks that the newest log file is still the file it opened
// (StateStorage.checkFiles), and hands the log to the checkpoint thread (`checkpoint`), so that an
// idle daemon's database holds everything.
import Glibc
import ObsCore

/// One batch for the writer: appended as one frame of the commit log, then fsynced when `sync`.
struct WriteJob {
    var batch: CommitBatch
    var sync: Bool
}

/// What became of a batch.
enum WriteOutcome {
    case written
    /// Nothing of the batch is on disk (a full disk, say).
    case writeFailed(ObsError)
    /// The batch was written but the fsync failed: what the kernel held may be lost.
    case syncFailed(ObsError)
}

final class StorageWriter {
    /// nil once closed (dropping SQLiteStorage closes it, checkpointing the WAL).
    private var storage: (any StateStorage)?
    /// A test hook (OBSD_TEST_WRITE_DELAY, read by debug builds only): seconds the writer waits
    /// before writing each batch, so that tests can look while a batch is being written.
    private let delay: Double
    /// Seconds of idleness after which the writer checks the log's file, and hands it to the
    /// checkpoint.
    static let fileCheckInterval = 1.0

    init(_ storage: any StateStorage, delay: Double = 0) {
        self.storage = storage
        self.delay = delay
    }

    /// The stored state, read at start.
    func load() throws(ObsError) -> StoredState {
        guard let storage else { throw ObsError(.internal, "the database is closed") }
        return try storage.load()
    }

    /// At shutdown: checkpoints the log (so that a stopped daemon's database holds everything in
    /// its tables) and closes the storage.
    /// `run`: the run whose every commit was written (GroupCommitStorage.close), which the storage
    /// stores once it has folded them; nil when some were not.
    func stop(run: UInt64?) {
        if let run { storage?.beginRun(run) }
        // A failed checkpoint is reported by the storage; the log is replayed at the next start.
        try? storage?.checkpoint()
        storage = nil
    }

    /// What the writer does once it has been idle a second: a look at the storage's files
    /// (deleted or replaced under obsd), and a checkpoint of the log.
    func idle() {
        storage?.checkFiles()
        // A failed checkpoint leaves the log as it was and is reported by the storage; it is
        // tried again when next idle, or before the log passes its bound (commitLog).
        if let storage, storage.logBytes > 0 { try? storage.checkpoint() }
    }

    /// Appends `job`'s batch as one frame, and fsyncs it when the job says so.
    func write(_ job: WriteJob) -> WriteOutcome {
        if delay > 0 { usleep(UInt32(min(delay, 60) * 1_000_000)) }
        guard let storage else { return .writeFailed(ObsError(.internal, "the database is closed")) }
        do throws(ObsError) {
            try storage.commitLog(job.batch.records.bytes, rev: job.batch.rev)
        } catch {
            return .writeFailed(error)
        }
        if job.sync {
            do throws(ObsError) {
                try storage.sync()
            } catch {
                return .syncFailed(error)
            }
        }
        return .written
    }
}
