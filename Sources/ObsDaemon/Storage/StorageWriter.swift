// The daemon's writer: it owns the newest commit log file (LogFileStorage) for appending. The
// daemon runs it on its loop thread, which calls `writeNow` and `idle` itself
// (GroupCommitStorage says why); it can also run on a thread of its own (`start`, the tests), so
// that the loop thread goes on serving while a batch is appended and fdatasynced.
//
// The hand-off, one batch at a time (thread):
// 1. The loop puts a job in the mailbox and signals `wake` (an eventfd the writer blocks on).
// 2. The writer takes the job, appends it as one frame (then fdatasyncs), puts the outcome in the
//    mailbox and signals `done` (an eventfd in the loop's epoll set).
// 3. The loop takes the outcome and releases the answers that waited for the batch.
// The mailbox is a Mutex, held only to move a job or an outcome in or out; the storage is behind
// a Mutex of its own that only the writer takes while the thread runs (load before, close after).
// While idle a second, the writer checks that the newest log file is still the file it opened
// (StateStorage.checkFiles), and hands it to the checkpoint thread (`checkpoint`), so that an idle
// daemon's database holds everything.
import CLinux
import Glibc
import ObsCore
import Synchronization

/// One batch for the writer: appended as one frame of the commit log, then fsynced when `sync`.
struct WriteJob: Sendable {
    var batch: CommitBatch
    var sync: Bool
}

/// What became of a batch.
enum WriteOutcome: Sendable {
    case written
    /// Nothing of the batch is on disk (a full disk, say).
    case writeFailed(ObsError)
    /// The batch was written but the fsync failed: what the kernel held may be lost.
    case syncFailed(ObsError)
}

final class StorageWriter: Sendable {
    private struct Mailbox {
        var job: WriteJob?
        var outcome: WriteOutcome?
        var stopping = false
    }

    /// nil once closed (dropping SQLiteStorage closes it, checkpointing the WAL).
    private let storage: Mutex<(any StateStorage)?>
    private let mailbox = Mutex(Mailbox())
    /// Loop to writer: a job or a stop request is in the mailbox (blocking eventfd).
    private let wake: Int32
    /// Writer to loop: an outcome is in the mailbox (non-blocking eventfd, watched by epoll).
    let done: Int32
    /// A test hook (OBSD_TEST_WRITE_DELAY, read by debug builds only): seconds the writer waits
    /// before writing each batch, so that tests can catch a batch in flight.
    private let delay: Double
    /// Seconds of idleness after which the writer checks the log's file, and hands it to the
    /// checkpoint.
    static let fileCheckInterval = 1.0

    init(_ storage: sending any StateStorage, delay: Double = 0) throws(SystemError) {
        self.storage = Mutex(storage)
        self.delay = delay
        wake = eventfd(0, Int32(EFD_CLOEXEC))
        guard wake >= 0 else { throw SystemError("eventfd") }
        done = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard done >= 0 else {
            Glibc.close(wake)
            throw SystemError("eventfd")
        }
    }

    deinit {
        Glibc.close(wake)
        Glibc.close(done)
    }

    /// Starts the writer thread; `stop` ends it.
    func start() throws(SystemError) -> pthread_t {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { context in
            Unmanaged<StorageWriter>.fromOpaque(context!).takeRetainedValue().serve()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<StorageWriter>.fromOpaque(context).release()
            errno = rc
            throw SystemError("pthread_create")
        }
        return thread
    }

    /// Loop thread, before the thread starts writing: the stored state.
    func load() throws(ObsError) -> StoredState {
        try storage.withLock { storage throws(ObsError) -> StoredState in
            guard let storage else { throw ObsError(.internal, "the database is closed") }
            return try storage.load()
        }
    }

    /// Loop thread: hands a batch to the writer. The caller sends one at a time.
    func submit(_ job: WriteJob) {
        mailbox.withLock { $0.job = job }
        signal(wake)
    }

    /// Loop thread: the outcome of the batch handed over, if the writer has finished it.
    func takeOutcome() -> WriteOutcome? {
        var count: UInt64 = 0
        _ = read(done, &count, 8)
        return mailbox.withLock { mailbox in
            let outcome = mailbox.outcome
            mailbox.outcome = nil
            return outcome
        }
    }

    /// Loop thread, at shutdown: waits for the outcome of the batch handed over.
    func waitForOutcome() -> WriteOutcome {
        while true {
            if let outcome = takeOutcome() { return outcome }
            var descriptor = pollfd(fd: done, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, -1)
        }
    }

    /// Loop thread: ends the writer thread (after its last batch), checkpoints the log (so that
    /// a stopped daemon's database holds everything in its tables) and closes the storage.
    func stop(_ thread: pthread_t?) {
        if let thread {
            mailbox.withLock { $0.stopping = true }
            signal(wake)
            pthread_join(thread, nil)
        }
        storage.withLock { storage in
            // A failed checkpoint is reported by the storage; the log is replayed at the next start.
            try? storage?.checkpoint()
            storage = nil
        }
    }

    // MARK: - The writer thread

    private func serve() {
        while true {
            // Idle for a second: a look at the database's files (deleted or replaced under obsd).
            var descriptor = pollfd(fd: wake, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, Int32(Self.fileCheckInterval * 1000)) == 0 {
                idle()
                continue
            }
            var count: UInt64 = 0
            if read(wake, &count, 8) < 0 {
                if errno == EINTR { continue }
                // An eventfd read fails only on a bad descriptor: nothing more can be written.
                return
            }
            let (job, stopping) = mailbox.withLock { ($0.job, $0.stopping) }
            if let job {
                let outcome = write(job)
                mailbox.withLock { mailbox in
                    mailbox.job = nil
                    mailbox.outcome = outcome
                }
                signal(done)
            } else if stopping {
                return
            }
        }
    }

    /// What the writer does once it has been idle a second: a look at the storage's files
    /// (deleted or replaced under obsd), and a checkpoint of the log. The thread's, or (no thread)
    /// the loop's.
    func idle() {
        storage.withLock { storage in
            storage?.checkFiles()
            // A failed checkpoint leaves the log as it was and is reported by the storage; it is
            // tried again when next idle, or before the log passes its bound (commitLog).
            if let storage, storage.logBytes > 0 { try? storage.checkpoint() }
        }
    }

    /// A batch written on the caller's thread (no writer thread: the daemon).
    func writeNow(_ job: WriteJob) -> WriteOutcome {
        write(job)
    }

    private func write(_ job: WriteJob) -> WriteOutcome {
        if delay > 0 { usleep(UInt32(min(delay, 60) * 1_000_000)) }
        return storage.withLock { storage -> WriteOutcome in
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

    private func signal(_ eventfd: Int32) {
        var one: UInt64 = 1
        _ = Glibc.write(eventfd, &one, 8)
    }
}
