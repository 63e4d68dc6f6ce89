// The database and its WAL, watched while they are open. SQLite keeps writing to the files it
// opened: if someone deletes `obsd.db-wal` (or puts another file in its place), every transaction
// after that goes to a file nobody will ever find again, and is lost at the next crash, although
// obsd acknowledged it. So the files' identities (device and inode) are recorded when opened and
// compared with what the paths name, before and after every commit and, through `checkFiles`,
// every second while idle:
// 1. The WAL gone or replaced: SQLite still holds the old WAL open, so a checkpoint copies
//    everything in it into the database file while that is still possible. If it copies everything,
//    what was acknowledged is safe (and the commit that noticed it too).
// 2. The database file gone or replaced: nothing written from now on would be found again.
// Either way the problem is reported at once (the daemon logs it as an error) and every later
// commit is refused: only a restart opens the files again, and it is the operator's to decide.
import CSQLite
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// A file as opened: what its path named then.
struct WatchedFile {
    var path: String
    var device: UInt64
    var inode: UInt64
    var isDatabase: Bool

    /// What happened to the file, or nil when its path still names it.
    var problem: String? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return "\(path) was deleted" }
        guard UInt64(info.st_dev) == device, UInt64(info.st_ino) == inode else {
            return "\(path) was replaced by another file"
        }
        return nil
    }
}

extension SQLiteStorage {
    /// Records the identities of the database and (once it exists) of its WAL.
    func watchFiles() {
        for (file, isDatabase) in [(path, true), (path + "-wal", false)] where !files.contains(where: { $0.path == file }) {
            var info = stat()
            guard lstat(file, &info) == 0 else { continue }
            files.append(WatchedFile(path: file, device: UInt64(info.st_dev), inode: UInt64(info.st_ino), isDatabase: isDatabase))
        }
    }

    /// Before a commit: with the database file itself gone, nothing written can be found again.
    func refuseIfTheDatabaseMoved() throws(ObsError) {
        guard let database = files.first(where: \.isDatabase), let problem = database.problem else { return }
        _ = stopWriting(problem, canSave: false)
        throw refusal!
    }

    /// After a commit: throws unless everything committed is where the next start will find it.
    func verifyFilesAfterCommit() throws(ObsError) {
        if files.count < 2 { watchFiles() }
        guard let problem = files.lazy.compactMap(\.problem).first else { return }
        let databaseIntact = files.first(where: \.isDatabase)?.problem == nil
        guard stopWriting(problem, canSave: databaseIntact) else { throw refusal! }
    }

    /// Between commits (the daemon's writer calls it when idle).
    public func checkFiles() {
        guard refusal == nil, db != nil, let problem = files.lazy.compactMap(\.problem).first else { return }
        _ = stopWriting(problem, canSave: files.first(where: \.isDatabase)?.problem == nil)
    }

    /// Refuses every later commit, saves what the open WAL holds into the database file when
    /// `canSave`, and reports. Whether everything committed is in the database file now.
    private func stopWriting(_ problem: String, canSave: Bool) -> Bool {
        var saved = false
        if canSave, let db {
            var frames: Int32 = 0
            var copied: Int32 = 0
            let rc = sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_FULL, &frames, &copied)
            saved = rc == SQLITE_OK && frames == copied
        }
        refusal = ObsError(.internal, "database \(path): \(problem) while obsd was running; writes are refused until obsd is restarted")
        report("database \(path): \(problem) while obsd was running. "
            + (saved ? "Everything written so far was copied into \(path). " : "Changes written since the last checkpoint may be lost. ")
            + "Writes are refused until obsd is restarted.")
        return saved
    }
}
