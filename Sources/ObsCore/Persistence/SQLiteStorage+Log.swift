// The database's own log, for users of ObsCore's SQLiteStorage (obsd keeps its log in files beside
// the database instead, and folds them in with `checkpoint(_:replay:)`, below; it folds the log
// rows an older obsd left at its first start): a group of commits is one row of CommitLog records
// (`commitLog`), so a write costs the database one row however many keys the group changed; a
// checkpoint later writes each
// changed key's row once, however often it changed, and empties the log (`checkpoint`), in one
// transaction. Loading replays the log onto the tables. (SQLite's own WAL is under both: a log row,
// as any row, is in the kernel once `commitLog` returns, and fsynced by `sync`.)
//
// Why: writing every changed row for every group cost the writer thread 2 to 3 µs per set (an
// upsert into the keys table and its index), several times what the loop thread spends on the set
// itself. A log row costs what copying its bytes costs; a checkpoint costs one upsert per key
// changed since the last one, which under a steady stream of writes to the same keys is a small
// fraction of one per set.
//
// Bounded: `commitLog` checkpoints first when the log has reached `logBound` bytes, so the log
// never holds more than the bound and one group. A checkpoint that fails (a full disk) is rolled
// back whole, leaves the log as it was, and fails that `commitLog` (nothing of the group is
// written; the daemon holds it and tries again), so nothing is lost and the bound holds. The
// daemon's writer also checkpoints when it has been idle a second, and when obsd stops.
//
// Damage: every row carries a checksum of its revision and its records (RowChecksum.logRow), and
// the records must read to the end and end at the row's revision. A row that fails either is a
// problem of the load, which refuses the file naming it, as it refuses a damaged key row. A row is
// written by one SQLite transaction: a crash while writing it leaves the row whole or absent
// (SQLite drops a WAL's torn tail), never part of it.
import CSQLite

extension SQLiteStorage {
    /// The log's bound in bytes (`init`'s `logBound`; tests set smaller ones).
    public static let defaultLogBound = 4 << 20

    /// Appends `records` (CommitLog's: the commits of one group, the last at revision `rev`) as one
    /// row of the log, atomically. When the log has reached its bound it is checkpointed first;
    /// when that fails nothing is appended and the checkpoint's error is thrown.
    public func commitLog(_ records: UnsafeRawBufferPointer, rev: UInt64) throws(ObsError) {
        if let refusal { throw refusal }
        if logBytes >= logBound { try checkpoint() }
        try refuseIfTheDatabaseMoved()
        try run("INSERT INTO log (rev, data, checksum) VALUES (?1, ?2, ?3)") { statement in
            sqlite3_bind_int64(statement, 1, Int64(bitPattern: rev))
            // SQLITE_STATIC: the bytes stay where they are until the statement has run.
            sqlite3_bind_blob(statement, 2, records.baseAddress, Int32(records.count), nil)
            sqlite3_bind_int64(statement, 3, RowChecksum.logRow(rev, records))
        }
        logBytes += records.count
        try verifyFilesAfterCommit()
    }

    /// Writes what the log holds into the tables (each key, definition and binding once, as the
    /// last record naming it left it) and empties the log, in one transaction. On failure nothing
    /// changes: the log is as it was, and the failure is reported once (`report`) and thrown.
    public func checkpoint() throws(ObsError) {
        guard logBytes > 0 else { return }
        if let refusal { throw refusal }
        try reportingFailure(of: "\(logBytes) bytes, kept as they are") { () throws(ObsError) in
            try refuseIfTheDatabaseMoved()
            try foldLog()
        }
        logBytes = 0
        try verifyFilesAfterCommit()
    }

    /// Folds a commit log kept outside the database (obsd's log files, CommitLogFile) into the
    /// tables in one transaction, and syncs it, so that the caller may then delete what it folded.
    /// `replay` replays the log's records onto the tables' state, skipping what is at or before
    /// the tables' revision (its second argument: a log folded once already, by a checkpoint that
    /// ended before its file was deleted). `log` names it in the report of a failure, which is
    /// made once, and thrown; on failure nothing changes.
    public func checkpoint(_ log: String, replay: (inout CommitLog.Replay, UInt64) throws(ObsError) -> Void) throws(ObsError) {
        if let refusal { throw refusal }
        try reportingFailure(of: "\(log), kept as it is") { () throws(ObsError) in
            try refuseIfTheDatabaseMoved()
            try execute("BEGIN IMMEDIATE")
            do throws(ObsError) {
                var state = CommitLog.Replay()
                try query("SELECT value FROM meta WHERE name = 'rev'") { state.rev = UInt64(bitPattern: sqlite3_column_int64($0, 0)) }
                let tablesRev = state.rev
                try replay(&state, tablesRev)
                if state.rev > tablesRev { try writeRows(state.transaction) }
                try execute("COMMIT")
            } catch {
                try? execute("ROLLBACK")
                throw error
            }
            try verifyFilesAfterCommit()
            do throws(ObsError) {
                try sync()
            } catch {
                // The kernel may have dropped the rows it could not write: the log must stay the
                // only copy of what it holds, so nothing is folded (and deleted) any more.
                refusal = ObsError(.internal, "database \(path): \(error.message); writes are refused until obsd is restarted")
                throw error
            }
            try copyWALIntoDatabase()
        }
    }

    /// Copies the WAL into the database file, synced, and empties it: the caller is about to
    /// delete the only other copy of what it folded, and a WAL is where SQLite cannot tell damage
    /// from an end (it takes a frame whose checksum fails for the end of the WAL and drops every
    /// frame after it without a word), while in the database file every row carries its own
    /// checksum (`RowChecksum`). Fails, and the log is kept for the next try, when a reader holds
    /// the WAL (`obsd --check` running at that moment).
    private func copyWALIntoDatabase() throws(ObsError) {
        guard let db else { throw ObsError(.internal, "database \(path) is closed") }
        var frames: Int32 = 0
        var copied: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_TRUNCATE, &frames, &copied)
        guard rc == SQLITE_OK, frames == copied else {
            throw rc == SQLITE_OK || rc == SQLITE_BUSY
                ? ObsError(.internal, "database \(path): its WAL could not be copied into it (\(copied) of \(frames) frames; a reader holds it?)")
                : failure("cannot copy the WAL into the database", rc)
        }
    }

    /// Runs a checkpoint; its failure is reported once (until a checkpoint succeeds again), naming
    /// what was not checkpointed (`what`), and thrown.
    private func reportingFailure(of what: String, _ body: () throws(ObsError) -> Void) throws(ObsError) {
        do throws(ObsError) {
            try body()
        } catch {
            let message = "database \(path): cannot checkpoint its log (\(what)): \(error.message)"
            if checkpointFailure != message { report(message) }
            checkpointFailure = message
            throw ObsError(.internal, message)
        }
        if checkpointFailure != nil { report("database \(path): its log is checkpointed again") }
        checkpointFailure = nil
    }

    private func foldLog() throws(ObsError) {
        try execute("BEGIN IMMEDIATE")
        do throws(ObsError) {
            var replay = CommitLog.Replay()
            try query("SELECT value FROM meta WHERE name = 'rev'") { replay.rev = UInt64(bitPattern: sqlite3_column_int64($0, 0)) }
            var damage: String?
            try query("SELECT id, rev, data, checksum FROM log ORDER BY id") { row in
                guard damage == nil else { return }
                damage = Self.replayLogRow(row, onto: &replay)
            }
            if let damage { throw ObsError(.internal, damage) }
            try writeRows(replay.transaction)
            try execute("DELETE FROM log")
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// The log's rows replayed onto `state` (a load); each row that fails, as a problem.
    func replayLog(onto state: inout StoredState, problems: inout [String], failures: inout [String]) {
        guard hasLog else { return }
        // Made at the first row: an empty log costs the load nothing.
        var replay: CommitLog.Replay?
        do throws(ObsError) {
            try query("SELECT id, rev, data, checksum FROM log ORDER BY id") { row in
                if replay == nil { replay = CommitLog.Replay(state) }
                if let problem = Self.replayLogRow(row, onto: &replay!) { problems.append(problem) }
            }
        } catch {
            failures.append("table log: \(error.message)")
        }
        if let replay {
            // Folded or not, the log rows are the same run's commits.
            let run = state.run
            state = replay.state
            state.run = run
        }
    }

    /// The log's rows and bytes, as the file holds them (0 and 0 for a file without a log).
    public func storedLog() throws(ObsError) -> (rows: Int, bytes: Int) {
        guard hasLog else { return (0, 0) }
        var log = (rows: 0, bytes: 0)
        try query("SELECT count(*), coalesce(sum(length(data)), 0) FROM log") {
            log = (Int(sqlite3_column_int64($0, 0)), Int(sqlite3_column_int64($0, 1)))
        }
        return log
    }

    /// One log row replayed: nil, or what is wrong with it (its checksum, its records, its
    /// revision).
    private static func replayLogRow(_ row: OpaquePointer, onto replay: inout CommitLog.Replay) -> String? {
        let id = sqlite3_column_int64(row, 0)
        let rev = UInt64(bitPattern: sqlite3_column_int64(row, 1))
        let data = UnsafeRawBufferPointer(start: sqlite3_column_blob(row, 2), count: Int(sqlite3_column_bytes(row, 2)))
        guard sqlite3_column_int64(row, 3) == RowChecksum.logRow(rev, data) else {
            return "log row \(id) (revision \(rev)): damaged (its checksum does not match)"
        }
        do throws(CommitLog.Damage) {
            try CommitLog.replay(data, onto: &replay)
        } catch {
            return "log row \(id) (revision \(rev)): its records do not read (at byte \(error.offset))"
        }
        guard replay.rev == rev else { return "log row \(id) (revision \(rev)): its records end at revision \(replay.rev)" }
        return nil
    }
}
