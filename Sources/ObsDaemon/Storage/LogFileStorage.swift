// The daemon's storage in `normal` and `strict` mode: the commit log as append-only files beside
// the database (`obsd.commitlog.N` in the state directory, CommitLogFile's format), and the
// database's rows brought up to date from them by the checkpoint thread (Checkpointer.swift).
//
// Appending a group of commits (`commitLog`) is one pwritev of its frame at the end of the newest
// file, on the loop thread, before the turn's answers go out; in `strict` mode followed by an
// fdatasync (`sync`). What Redis does with its append-only file, at the same two promises.
//
// Why: the log was a row of the database per group (an SQLite transaction, its WAL append, the
// WAL's copy into the database file and the row's deletion at the checkpoint), plus a hand-off to
// the writer thread and back: about 1.4 µs of the daemon's 2 µs per set at 16 in flight in
// `normal` (docs/performance.md, tuning log step 10). A write of the frame costs what the kernel's
// copy of it costs.
//
// The files: the newest is appended to; once it has `rotateBytes`, or its first record is
// `rotateSeconds` old (`defaultRotateSeconds` says why), or the writer is idle a second with
// something in it, and the checkpoint thread has nothing queued, it is closed, the next one made
// (its directory entry fsynced), and the closed one queued for the checkpoint thread, which
// deletes it once its records are in the rows and synced. So there are at most two files while
// running: one being folded, one appended to. Bounded: while the checkpoint thread is behind (a
// checkpoint failing on a full disk), appends go on until the newest file has `fileBound` bytes;
// beyond it they fail like any write the disk cannot take (held, retried, new writes refused).
//
// Start-up (`load`): the rows (log rows an older obsd left in the database folded into them first), then every
// log file's records after the rows' revision, in file order. A torn last frame at the end of the
// newest file (a crash in the middle of its write, never acknowledged: CommitLogFile.swift says
// why) is cut off the file and reported; any other frame that does not read refuses the start,
// naming the file and the byte, as a damaged row does. The files found are queued for the
// checkpoint thread, and a new file is started after them.
//
// Safety: the files are created with O_EXCL and opened with O_NOFOLLOW in the state directory
// (checked by SafeDirectory, symlinks resolved), and must be regular files of obsd's user that
// nobody else can write. The newest file's identity is checked after every append (a deleted or
// replaced file refuses that write and every later one, as the database's files do) and a failed
// write is cut off the file again, so a full disk leaves nothing half written behind.
import Glibc
import ObsCore

final class LogFileStorage: StateStorage {
    /// The log files' names: this, then the file's number (1, 2, ...).
    static let filePrefix = "obsd.commitlog."
    /// The size at which the newest file is handed to the checkpoint thread.
    static let defaultRotateBytes = 32 << 20
    /// The newest file's bound: appends fail beyond it until the checkpoint thread catches up.
    static let defaultFileBound = 128 << 20
    /// The age of its first record at which the newest file is handed to the checkpoint thread
    /// (at the first append after it, when that thread has nothing queued).
    ///
    /// Why: without it a daemon that writes at least once a second (a binding fed by a computed
    /// over `now()`, a sensor pushed every second) is never idle for a second, so its file went to
    /// the checkpoint thread only at `rotateBytes`: at a few hundred bytes a second, days later.
    /// Meanwhile `obsd.db` (and a copy of it taken as a backup) lagged by those days, and a
    /// restart after a crash replayed them all. Why a minute: it bounds that lag, and the replay, to
    /// a minute of writes, while what a rotation costs (a new file, its fdatasync and the
    /// directory's fsync, then a fold: one SQLite transaction, synced, and the WAL's copy into the
    /// database, synced) is paid at most once a minute: a handful of fsyncs and a few pages per
    /// minute, nothing next to the log's own appends. A second, as when idle, would pay all that
    /// every second for as long as the daemon writes. A daemon that writes faster reaches
    /// `rotateBytes` first, as before.
    static let defaultRotateSeconds = 60.0

    let directory: String
    private let checkpointer: Checkpointer
    private var checkpointThread: pthread_t?
    private let rotateBytes: Int
    private let rotateSeconds: Double
    private let fileBound: Int
    private let report: @Sendable (String) -> Void
    /// The newest file (-1 before `load` and after `close`), its number, path and size.
    private var fd: Int32 = -1
    private var number: UInt64 = 0
    private var path = ""
    private var size = 0
    /// When the newest file is due to the checkpoint thread by age (monotonic seconds: its first
    /// record's append plus `rotateSeconds`); nil while it holds no record.
    private var rotateAt: Double?
    /// After the next file could not be started (a full disk): when it may be tried again
    /// (monotonic seconds), and why it failed, reported once until a file starts again.
    private var startRetryAt = 0.0
    private var startFailure: SystemError?
    /// Set once the newest file was found deleted or replaced: every later append throws it.
    private var refusal: ObsError?
    /// The run to store at `close` (`beginRun`).
    private var run: UInt64?

    /// `database` is the state directory's; `report` takes problems found between requests.
    init(directory: String, database: sending SQLiteStorage, rotateBytes: Int = LogFileStorage.defaultRotateBytes,
         rotateSeconds: Double = LogFileStorage.defaultRotateSeconds, fileBound: Int = LogFileStorage.defaultFileBound,
         report: @escaping @Sendable (String) -> Void) throws(SystemError) {
        self.directory = directory
        self.rotateBytes = rotateBytes
        self.rotateSeconds = rotateSeconds
        self.fileBound = max(fileBound, rotateBytes)
        self.report = report
        checkpointer = try Checkpointer(database)
    }

    deinit {
        close()
    }

    // MARK: - Start-up

    func load() throws(ObsError) -> StoredState {
        let state = try checkpointer.loadRows()
        let files = try Self.files(in: directory)
        var replay: CommitLog.Replay?
        var problems: [String] = []
        var torn: (path: String, end: Int, bytes: Int)?
        for (index, file) in files.enumerated() {
            let newest = index == files.count - 1
            do throws(ObsError) {
                try Self.read(file.path, newest: newest) { contents, bytes throws(ObsError) in
                    for frame in contents.frames {
                        if replay == nil { replay = CommitLog.Replay(state) }
                        try Self.replay(frame, of: bytes, file: file.path, onto: &replay!, after: state.rev)
                    }
                    if contents.torn > 0 { torn = (file.path, contents.end, contents.torn) }
                }
            } catch {
                problems.append(error.message)
            }
        }
        guard problems.isEmpty else {
            throw ObsError(.internal, "the commit log in \(directory) cannot be loaded: \(problems.joined(separator: "; ")) (obsd --check lists every problem)",
                           details: ["problems": .array(problems.map { .string($0) })])
        }
        if let torn { try cutTornTail(torn.path, at: torn.end, torn: torn.bytes) }
        do throws(SystemError) {
            number = (files.last?.number ?? 0) + 1
            try startFile()
            checkpointThread = try checkpointer.start()
        } catch {
            throw ObsError(.internal, "cannot start the commit log in \(directory): \(error)")
        }
        for file in files { checkpointer.submit(file.path) }
        var loaded = replay?.state ?? state
        if !files.isEmpty {
            // The last run did not stop cleanly (a crash, kill -9, a power loss: a clean stop folds
            // every file and leaves none). What it held that no file keeps, its ephemeral keys, went
            // with it, and no event said so. The restart takes a revision of its own for that, with
            // no event: the history starts after it, so a watch resumed `since` any revision of the
            // last run gets `compacted` and a snapshot without those keys, not a silent resume.
            loaded.rev += 1
            // Nor may a watch resume across it by naming the run the rows name (StoredState.run,
            // an earlier run's, stored at its clean stop): the state has moved past it.
            loaded.run = nil
            // Synced at once, whatever the durability: it is written once per unclean start, and
            // a power loss right after must not give that revision out again.
            try commit(StoredTransaction(rev: loaded.rev))
            try sync()
            report("the last run did not stop cleanly (its commit log was left in \(directory)): its changes are restored; revision \(loaded.rev) is taken for its ephemeral keys, which are gone, so watches resumed from before it get a fresh snapshot")
        }
        return loaded
    }

    /// The run whose state every commit so far makes whole: stored at `close` once every file is
    /// folded. (GroupCommitStorage gives it only at a stop whose commits were all written.)
    func beginRun(_ run: UInt64) {
        self.run = run
    }

    /// Cuts a torn last frame off the newest file found at start-up (its write never returned,
    /// so it was never acknowledged), so that the file is whole when folded.
    private func cutTornTail(_ path: String, at end: Int, torn: Int) throws(ObsError) {
        let fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0, ftruncate(fd, off_t(end)) == 0, fsync(fd) == 0 else {
            let error = SystemError("truncate")
            if fd >= 0 { Glibc.close(fd) }
            throw ObsError(.internal, "log file \(path): cannot cut off its torn last frame: \(error)")
        }
        Glibc.close(fd)
        report("log file \(path): its last \(torn) bytes were a frame cut short by a crash in the middle of its write (never acknowledged); dropped")
    }

    // MARK: - Appending

    func commitLog(_ records: UnsafeRawBufferPointer, rev: UInt64) throws(ObsError) {
        if let refusal = refusal ?? checkpointer.refusal { throw refusal }
        guard fd >= 0 else { throw ObsError(.internal, "the commit log is closed") }
        // At its bound the newest file goes to the checkpoint thread as soon as that has caught up.
        if size >= fileBound { rotate() }
        guard size < fileBound else {
            let why = checkpointer.failure.map { " (\($0))" } ?? ""
            throw ObsError(.internal, "the commit log \(path) has reached its bound of \(fileBound) bytes before its checkpoint into the database finished\(why)")
        }
        var header = CommitLogFile.header(rev: rev, records: records)
        let total = CommitLogFile.headerSize + records.count
        var written = 0
        while written < total {
            let count = withUnsafeMutableBytes(of: &header) { header -> Int in
                // On the stack: no allocation per batch.
                var vector = (iovec(iov_base: header.baseAddress, iov_len: header.count),
                              iovec(iov_base: UnsafeMutableRawPointer(mutating: records.baseAddress), iov_len: records.count))
                return withUnsafeMutableBytes(of: &vector) { raw in
                    skip(written, in: raw.bindMemory(to: iovec.self)) { pwritev(fd, $0, Int32($1), off_t(size + written)) }
                }
            }
            guard count > 0 else {
                if count < 0, errno == EINTR { continue }
                let error = count == 0 ? SystemError("pwritev", code: ENOSPC) : SystemError("pwritev")
                // Nothing half written stays behind the last whole frame.
                _ = ftruncate(fd, off_t(size))
                throw ObsError(.internal, "cannot write the commit log \(path): \(error)")
            }
            written += count
        }
        size += total
        try refuseIfTheFileMoved()
        if size >= rotateBytes {
            rotate()
        } else {
            // One read of the clock per frame (vDSO, tens of ns), none of the checkpoint thread's
            // lock until the file is due.
            let now = monotonicSeconds()
            if let rotateAt {
                // Due and not handed over: a busy checkpoint thread is asked again at the next
                // append, a file that could not be started a second later (`rotate`).
                if now >= rotateAt { rotate(now: now) }
            } else {
                rotateAt = now + rotateSeconds
            }
        }
    }

    /// Calls `write` with `vector` past its first `offset` bytes (after a short write).
    private func skip(_ offset: Int, in vector: UnsafeMutableBufferPointer<iovec>, _ write: (UnsafePointer<iovec>, Int) -> Int) -> Int {
        var offset = offset
        var first = 0
        while offset >= vector[first].iov_len {
            offset -= vector[first].iov_len
            first += 1
        }
        vector[first].iov_base += offset
        vector[first].iov_len -= offset
        return write(vector.baseAddress! + first, vector.count - first)
    }

    /// After an append: a newest file deleted or replaced under obsd would lose what it holds.
    private func refuseIfTheFileMoved() throws(ObsError) {
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_nlink == 0 else { return }
        refusal = ObsError(.internal, "log file \(path) was deleted or replaced while obsd was running; writes are refused until obsd is restarted")
        report("log file \(path) was deleted or replaced while obsd was running: what it held since the last checkpoint is lost at the next crash. Writes are refused until obsd is restarted.")
        throw refusal!
    }

    /// fdatasyncs the newest file (every frame before a file was closed was synced before the next
    /// file got any).
    func sync() throws(ObsError) {
        guard fd >= 0 else { return }
        guard fdatasync(fd) == 0 else { throw ObsError(.internal, "fsync of the commit log \(path) failed: \(SystemError("fdatasync"))") }
    }

    /// Hands the newest file to the checkpoint thread (when it holds something and the thread has
    /// nothing queued) and starts the next; whether it did. A failure to start the next file leaves
    /// the newest as it is, to be tried again a second later (`Checkpointer.interval`), whichever
    /// path asks (the size, the age, the file's bound, an idle second), or by `close` at once.
    ///
    /// Why a second: on a disk so full that appends still fit the newest file's last block but a
    /// new file gets none, every append past `rotateBytes` asked again, each time a create, a
    /// failed write and an unlink: system calls and directory churn per request, for as long as
    /// the disk stayed full. Appends go on meanwhile, up to `fileBound`.
    @discardableResult
    private func rotate(now: Double = monotonicSeconds(), retryingAtOnce: Bool = false) -> Bool {
        guard size > CommitLogFile.magic.count, retryingAtOnce || now >= startRetryAt, checkpointer.isIdle else { return false }
        let closed = (fd: fd, path: path)
        number += 1
        do throws(SystemError) {
            try startFile()
        } catch {
            number -= 1
            fd = closed.fd
            path = closed.path
            startRetryAt = now + Checkpointer.interval
            if startFailure == nil {
                report("cannot start the next commit log file after \(closed.path): \(error); it is kept as the newest (appends go on up to \(fileBound) bytes) and the next file is tried every second")
            }
            startFailure = error
            return false
        }
        if startFailure != nil {
            report("commit log file \(path) started; \(closed.path) goes to the checkpoint")
            startFailure = nil
        }
        // The closed file's frames were synced (strict) by the appends that wrote them.
        Glibc.close(closed.fd)
        checkpointer.submit(closed.path)
        return true
    }

    /// Creates file `number` with its magic, its directory entry synced, and makes it the newest.
    private func startFile() throws(SystemError) {
        let path = directory + "/" + Self.filePrefix + String(number)
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw SystemError("create \(path)") }
        let ok = CommitLogFile.magic.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) == $0.count }
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        let synced = ok && fdatasync(fd) == 0 && directoryFD >= 0 && fsync(directoryFD) == 0
        let error = SystemError("write \(path)")
        if directoryFD >= 0 { Glibc.close(directoryFD) }
        guard synced else {
            Glibc.close(fd)
            unlink(path)
            throw error
        }
        self.fd = fd
        self.path = path
        size = CommitLogFile.magic.count
        rotateAt = nil
    }

    // MARK: - The writer's idle duties and shutdown

    /// Bytes appended to the newest file.
    var logBytes: Int { max(0, size - CommitLogFile.magic.count) }

    /// Idle: the newest file goes to the checkpoint thread, so that an idle daemon's rows are
    /// complete (and its next start has nothing to replay).
    func checkpoint() throws(ObsError) {
        rotate()
    }

    func checkFiles() {
        guard refusal == nil, fd >= 0 else { return }
        try? refuseIfTheFileMoved()
    }

    /// Hands the newest file over, waits for the checkpoint thread to fold everything, and stops
    /// it; closes the database. What a failed fold leaves stays for the next start.
    func close() {
        guard fd >= 0 else { return }
        if logBytes > 0, refusal == nil {
            // Wait for the fold in progress, so that the newest file can be queued too.
            while !checkpointer.isIdle, checkpointer.failure == nil { usleep(1000) }
            rotate(retryingAtOnce: true)
        }
        let empty = logBytes == 0
        Glibc.close(fd)
        fd = -1
        if let checkpointThread { checkpointer.stop(checkpointThread) }
        checkpointThread = nil
        // Every file folded: the rows hold the whole state the run left, which the run's row now
        // names (RunLineage). Anything less, and the row keeps naming an earlier run, whose
        // revision the state has moved past: a resume from it gets a snapshot.
        if let run, empty, refusal == nil, checkpointer.isIdle, checkpointer.failure == nil, checkpointer.refusal == nil {
            do throws(ObsError) {
                try checkpointer.storeRun(run)
            } catch {
                report("cannot store this run's identity in the database (\(error.message)): watches of it get a snapshot after the next start, not a replay")
            }
        }
        checkpointer.close()
        // A clean stop leaves no log: the newest file holds nothing once it was handed over.
        if empty { unlink(path) }
    }

    // MARK: - Single commits (the store's interface; the daemon's writer appends groups)

    func commit(_ transaction: StoredTransaction) throws(ObsError) {
        var records = ByteBuffer()
        CommitLog.append(transaction, to: &records)
        try commitLog(records.bytes, rev: transaction.rev)
    }

    func commitKey(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, rev: UInt64, createdRev: UInt64,
                   version: UInt64) throws(ObsError) {
        var records = ByteBuffer()
        CommitLog.appendKey(name: name, value: value, rev: rev, createdRev: createdRev, version: version, to: &records)
        try commitLog(records.bytes, rev: rev)
    }
}
