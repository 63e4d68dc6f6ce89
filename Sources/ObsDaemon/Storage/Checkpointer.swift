// The daemon's checkpoint thread: it owns the database and folds closed commit log files into its
// rows (LogFileStorage.swift), off the path of every acknowledgement.
//
// 1. The log's owner closes a full, old or idle log file (LogFileStorage says when), starts the
//    next one and queues the closed one here (`submit`: a queue under a Mutex, and an eventfd
//    this thread blocks on).
// 2. This thread reads the file, checks every frame (CommitLogFile.read), and folds its records into
//    the rows in one database transaction, which it syncs (SQLiteStorage.checkpoint); only then
//    does it delete the file. A crash in between leaves the file, whose records the next start
//    replays over rows that already hold them: replay skips what is at or before the rows' revision.
// 3. A checkpoint that fails (a full disk) leaves the database and the file as they were; it is
//    reported once and tried again every second, while the log's owner keeps appending to its
//    newest file, up to that file's bound (then writes are refused until this thread catches up).
// 4. Idle a second, it checks that the database and its WAL are still the files it opened
//    (StateStorage.checkFiles). A database found moved, or a checkpoint's failed fsync, refuses
//    every later checkpoint, and through `refusal` every later append to the log.
import CLinux
import Glibc
import ObsCore
import Synchronization

final class Checkpointer: Sendable {
    private struct Mailbox {
        /// Closed log files, oldest first; the first is being folded until it is deleted.
        var queue: [String] = []
        var stopping = false
        var refusal: ObsError?
        /// The last failed checkpoint's message, until one succeeds.
        var failure: String?
    }

    /// nil once closed.
    private let database: Mutex<SQLiteStorage?>
    private let mailbox = Mutex(Mailbox())
    /// Owner to thread: a file is queued or a stop is asked (blocking eventfd).
    private let wake: Int32
    /// Seconds between the retries of a failed checkpoint, and between the idle checks.
    static let interval = 1.0

    init(_ database: sending SQLiteStorage) throws(SystemError) {
        self.database = Mutex(database)
        wake = eventfd(0, Int32(EFD_CLOEXEC))
        guard wake >= 0 else { throw SystemError("eventfd") }
    }

    deinit {
        Glibc.close(wake)
    }

    /// Before the thread starts: the rows' state, log rows an older obsd left in the database folded into
    /// them first (so that no file's records go under them).
    func loadRows() throws(ObsError) -> StoredState {
        try database.withLock { database throws(ObsError) -> StoredState in
            guard let database else { throw ObsError(.internal, "the database is closed") }
            if database.logBytes > 0 { try database.checkpoint() }
            return try database.load()
        }
    }

    /// After `stop`, when every queued file was folded: stores the identity of the run that left
    /// the state (SQLiteStorage.storeRun).
    func storeRun(_ run: UInt64) throws(ObsError) {
        try database.withLock { database throws(ObsError) in
            guard let database else { throw ObsError(.internal, "the database is closed") }
            try database.storeRun(run)
        }
    }

    func start() throws(SystemError) -> pthread_t {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { context in
            Unmanaged<Checkpointer>.fromOpaque(context!).takeRetainedValue().serve()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<Checkpointer>.fromOpaque(context).release()
            errno = rc
            throw SystemError("pthread_create")
        }
        return thread
    }

    /// Queues a closed log file.
    func submit(_ path: String) {
        mailbox.withLock { $0.queue.append(path) }
        signal()
    }

    /// Whether every queued file is folded and deleted.
    var isIdle: Bool { mailbox.withLock { $0.queue.isEmpty } }

    /// Set once nothing more may be written (the database moved, a checkpoint's fsync failed).
    var refusal: ObsError? { mailbox.withLock { $0.refusal } }

    /// Why the queued files are not folded yet, when the last try failed.
    var failure: String? { mailbox.withLock { $0.failure } }

    /// Folds what is queued (once: a failure is left for the next start) and ends the thread.
    func stop(_ thread: pthread_t) {
        mailbox.withLock { $0.stopping = true }
        signal()
        pthread_join(thread, nil)
    }

    /// After `stop`: closes the database.
    func close() {
        database.withLock { $0 = nil }
    }

    private func serve() {
        while true {
            var descriptor = pollfd(fd: wake, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(Self.interval * 1000))
            if ready > 0 {
                var count: UInt64 = 0
                // An eventfd read fails only on a bad descriptor: nothing more can be folded.
                if read(wake, &count, 8) < 0, errno != EINTR { return }
            } else if ready == 0 {
                database.withLock { database in
                    database?.checkFiles()
                    publishRefusal(database)
                }
            }
            foldQueued()
            if mailbox.withLock({ $0.stopping }) { return }
        }
    }

    /// Folds the queued files in order, until one fails (it is tried again later).
    private func foldQueued() {
        while let path = mailbox.withLock({ $0.queue.first }) {
            let outcome = database.withLock { database -> ObsError? in
                guard let database else { return ObsError(.internal, "the database is closed") }
                defer { publishRefusal(database) }
                do throws(ObsError) {
                    try LogFileStorage.fold(path, into: database)
                    return nil
                } catch {
                    return error
                }
            }
            if let outcome {
                mailbox.withLock { $0.failure = outcome.message }
                return
            }
            unlink(path)
            mailbox.withLock { mailbox in
                mailbox.queue.removeFirst()
                mailbox.failure = nil
            }
        }
    }

    private func publishRefusal(_ database: SQLiteStorage?) {
        guard let refusal = database?.refusal else { return }
        mailbox.withLock { if $0.refusal == nil { $0.refusal = refusal } }
    }

    private func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(wake, &one, 8)
    }
}
