// The database's log: a group of commits is one row of CommitLog records (`commitLog`), so a write
// costs the database one row however many keys the group changed; a checkpoint later writes each
// changed key's row once, however often it changed, and empties the log (`checkpoint`), in one
// transaction. Loading replays the log onto the tables. (SQLite's own WAL is under both: a log row,
// as any row, is in the kernel once `commitLog` returns, and fsynced by `sync`.)
//
// Why: writing every changed row for every group cost the writer thread 2 to 3 µs per set (an
// upsert into the keys table and its index), several times what the loop thread spends on the set
// itself. A log row costs what copying its bytes costs; a checkpoint costs one upsert per key
// changed since the last one, which under a steady stream of writes to the same keys is a small
// fraction of one per set. The daemon's writer checkpoints when the log passes `checkpointBytes`,
// when it has been idle a while, and when obsd stops.
import CSQLite

extension SQLiteStorage {
    /// The log's size at which the writer checkpoints.
    public static let checkpointBytes = 64 << 20

    /// Appends `records` (CommitLog's: the commits of one group, the last at revision `rev`) as one
    /// row of the log, atomically.
    public func commitLog(_ records: UnsafeRawBufferPointer, rev: UInt64) throws(ObsError) {
        if let refusal { throw refusal }
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
    /// last record naming it left it) and empties the log, in one transaction.
    public func checkpoint() throws(ObsError) {
        guard logBytes > 0 else { return }
        if let refusal { throw refusal }
        try refuseIfTheDatabaseMoved()
        try execute("BEGIN IMMEDIATE")
        do throws(ObsError) {
            var replay = CommitLog.Replay()
            var damage: String?
            try query("SELECT id, rev, data, checksum FROM log ORDER BY id") { row in
                guard damage == nil else { return }
                damage = Self.replayLogRow(row, onto: &replay)
            }
            if let damage { throw ObsError(.internal, "database \(path): cannot checkpoint its log: \(damage)") }
            try writeRows(replay.transaction)
            try execute("DELETE FROM log")
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
        logBytes = 0
        try verifyFilesAfterCommit()
    }

    /// The log's rows replayed onto `state` (a load); each row that fails, as a problem.
    func replayLog(onto state: inout StoredState, problems: inout [String], failures: inout [String]) {
        guard hasLog else { return }
        var replay = CommitLog.Replay(state)
        do throws(ObsError) {
            try query("SELECT id, rev, data, checksum FROM log ORDER BY id") { row in
                if let problem = Self.replayLogRow(row, onto: &replay) { problems.append(problem) }
            }
        } catch {
            failures.append("table log: \(error.message)")
        }
        state = replay.state
    }

    /// The bytes of the log's rows, as the file holds them.
    func storedLogBytes() throws(ObsError) -> Int {
        var bytes = 0
        try query("SELECT coalesce(sum(length(data)), 0) FROM log") { bytes = Int(sqlite3_column_int64($0, 0)) }
        return bytes
    }

    /// One log row replayed: nil, or what is wrong with it (its checksum, its records).
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
        return nil
    }
}
