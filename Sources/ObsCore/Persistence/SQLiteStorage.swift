// The SQLite backend of StateStorage: one database file in the state directory.
//
// Durability, and why it is built this way:
// 1. The database runs in WAL mode with synchronous=NORMAL. A commit appends the transaction's pages
//    to the WAL with write(2) inside one SQL transaction, so once `commit` returns the data is in the
//    kernel: it survives a kill -9 of the daemon (the `normal` mode), and a torn transaction is
//    discarded by the WAL's checksums on the next open (atomic on disk).
// 2. `sync` fsyncs the WAL file itself, once for every commit since the last sync. That is the group
//    commit of the `strict` mode: the daemon commits many transactions, calls `sync` once, and only
//    then answers them all. synchronous=FULL would instead fsync inside every commit.
// 3. Checkpoints (SQLite's automatic ones and the one at close) copy the WAL into the main file; with
//    synchronous=NORMAL SQLite fsyncs the WAL before and the main file after each of them.
// 4. Opening never writes before the file has passed `PRAGMA integrity_check`: a file that is not a
//    database, or a damaged one, is reported with its path and left exactly as it was. Neither is a
//    file that exists but holds no schema (an empty file is not a fresh start: something was lost),
//    nor one this user can only read (obsd would acknowledge writes it cannot keep).
// 5. A new database is made under a temporary name and linked into place once its schema is in
//    it, so a crash while creating it never leaves an empty `obsd.db` behind.
// 6. Every row carries a checksum of its columns (RowChecksum.swift), verified by `load`: a row
//    changed outside obsd is reported with its key, never served (SQLiteStorage+Load.swift).
// 7. No path is followed through a symlink (SQLITE_OPEN_NOFOLLOW, and lstat of the WAL and shared
//    memory files before SQLite creates them), and the files are watched while obsd runs: a
//    database or WAL deleted or replaced under it stops every later write
//    (SQLiteStorage+Files.swift).
import CSQLite
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

/// Persists the store's state in a SQLite database file.
public final class SQLiteStorage: StateStorage {
    /// The schema this code reads and writes, kept in the `schema_version` table. Version 2 added
    /// the rows' checksums; a version-1 file is migrated when opened for writing.
    /// Version 3 added the log of commits not yet checkpointed (SQLiteStorage+Log.swift).
    /// Version 4 changes no table: it says that commits may also wait in log files beside the
    /// database (obsd's `obsd.commitlog.N`), so that an obsd that would ignore them refuses it.
    public static let schemaVersion: Int64 = 4

    /// How a database is opened.
    public enum Mode: Sendable {
        /// The daemon's: created when absent, migrated to the current schema, written.
        case readWrite
        /// `obsd --check`'s: read only; nothing is created, migrated or changed.
        case check
    }

    /// The database file's path, as given.
    public let path: String
    var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    /// Whether the rows carry checksums (false only for a version-1 file opened for a check).
    var checksummed = true
    /// Whether the file has the log table (false for an older file opened for a check, or until
    /// it is migrated).
    var hasLog = true
    /// The bytes of the log's rows: commits not yet checkpointed into the tables.
    public internal(set) var logBytes = 0
    /// The log's bound in bytes: `commitLog` checkpoints first when the log has reached it.
    public let logBound: Int
    /// The message of the last failed checkpoint, reported once (until one succeeds).
    var checkpointFailure: String?
    /// The files as opened, to notice one deleted or replaced (SQLiteStorage+Files.swift).
    var files: [WatchedFile] = []
    /// Set once a watched file was found deleted or replaced (or the fsync of a checkpoint of an
    /// outside log failed): every later commit throws it.
    public internal(set) var refusal: ObsError?
    /// The run to store at `close` (`beginRun`).
    private var run: UInt64?
    /// Where a problem found between requests goes (the daemon's log).
    let report: @Sendable (String) -> Void

    /// Opens the database at `path` (for `.readWrite`, creating it when absent), checks its
    /// integrity and schema.
    ///
    /// Throws `internal` naming the file when it cannot be opened, is a symlink, is not a database,
    /// fails the integrity check (details: `problems`), exists without a schema, can only be read
    /// (`.readWrite`), or has a schema version this code does not know. `busyTimeout` (seconds) is
    /// how long a commit waits for another process that holds the file's write lock. `logBound`
    /// is the log's bound in bytes (SQLiteStorage+Log.swift). `report` receives what goes wrong
    /// with the files while they are open.
    public init(path: String, mode: Mode = .readWrite, busyTimeout: Double = 5, logBound: Int = SQLiteStorage.defaultLogBound,
                report: @escaping @Sendable (String) -> Void = { _ in }) throws(ObsError) {
        self.path = path
        self.logBound = logBound
        self.report = report
        try Self.refuseLinks(path)
        if mode == .readWrite, !Self.exists(path) { try Self.create(path) }
        let flags = (mode == .check ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        db = try Self.openDatabase(path, flags: flags)
        do throws(ObsError) {
            // A busy timeout only matters if an operator opens the file (sqlite3 CLI, backup) while
            // obsd runs; without it such a reader would make a commit fail at once.
            sqlite3_busy_timeout(db, Int32(busyTimeout * 1000))
            if mode == .readWrite, sqlite3_db_readonly(db, "main") == 1 {
                throw ObsError(.internal, "database \(path) can only be read by this user (uid \(geteuid())): obsd does not serve a store it cannot save; give the file back to obsd's user, mode 0600")
            }
            let problems = try Self.integrityProblems(db!, path: path)
            guard problems.isEmpty else {
                throw ObsError(.internal, "database \(path) failed its integrity check: \(problems.prefix(5).joined(separator: "; "))",
                               details: ["problems": .array(problems.map { .string($0) })])
            }
            let version = try storedSchemaVersion()
            hasLog = version >= 3
            if mode == .readWrite {
                try execute("PRAGMA journal_mode=WAL")
                try execute("PRAGMA synchronous=NORMAL")
                if version == 1 { try migrateFromVersion1() }
                if version <= 2 { try migrateFromVersion2() }
                if version <= 3 { try migrateFromVersion3() }
                logBytes = try storedLog().bytes
                watchFiles()
            } else {
                checksummed = version >= 2
            }
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Closes the database; SQLite checkpoints the WAL into the main file. Idempotent. A run given
    /// to `beginRun` is stored first, unless a write was refused (the state may lack a commit).
    public func close() {
        if let run, db != nil, refusal == nil {
            self.run = nil
            try? storeRun(run)
        }
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    public func commit(_ transaction: StoredTransaction) throws(ObsError) {
        if let refusal { throw refusal }
        try refuseIfTheDatabaseMoved()
        try execute("BEGIN IMMEDIATE")
        do throws(ObsError) {
            try writeRows(transaction)
            try execute("COMMIT")
        } catch {
            // ROLLBACK can fail only if SQLite already rolled back on its own (I/O error, full disk).
            try? execute("ROLLBACK")
            throw error
        }
        try verifyFilesAfterCommit()
    }

    /// Remembers the run that starts, to be stored when the database is closed (`close`): a store
    /// that commits straight here leaves the state whole at every commit.
    public func beginRun(_ run: UInt64) {
        self.run = run
    }

    /// Stores the identity of the run that left the state, and syncs it: a later `load` answers it
    /// as `StoredState.run`. An older obsd ignores the row.
    public func storeRun(_ run: UInt64) throws(ObsError) {
        if let refusal { throw refusal }
        try refuseIfTheDatabaseMoved()
        try execute("BEGIN IMMEDIATE")
        do throws(ObsError) {
            try self.run("INSERT OR REPLACE INTO meta (name, value, checksum) VALUES ('run', ?1, ?2)") {
                sqlite3_bind_int64($0, 1, Int64(bitPattern: run))
                sqlite3_bind_int64($0, 2, RowChecksum.runRow(run))
            }
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
        try verifyFilesAfterCommit()
        try sync()
    }

    /// The rows of one transaction, inside a transaction the caller opened.
    func writeRows(_ transaction: StoredTransaction) throws(ObsError) {
        for key in transaction.deletedKeys {
            try run("DELETE FROM keys WHERE key = ?1") { bind($0, 1, key) }
        }
        for key in transaction.putKeys {
            let json = key.value.encoded
            try run("INSERT OR REPLACE INTO keys (key, value, rev, created_rev, version, expires_at, checksum) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)") { statement in
                bind(statement, 1, key.key)
                bind(statement, 2, json)
                sqlite3_bind_int64(statement, 3, Int64(bitPattern: key.rev))
                sqlite3_bind_int64(statement, 4, Int64(bitPattern: key.createdRev))
                sqlite3_bind_int64(statement, 5, Int64(bitPattern: key.version))
                if let expiresAt = key.expiresAt {
                    sqlite3_bind_double(statement, 6, expiresAt)
                } else {
                    sqlite3_bind_null(statement, 6)
                }
                sqlite3_bind_int64(statement, 7, RowChecksum.keyRow(key.key, json: json, rev: key.rev, createdRev: key.createdRev,
                                                                    version: key.version, expiresAt: key.expiresAt))
            }
        }
        for key in transaction.deletedDefinitions {
            try run("DELETE FROM definitions WHERE key = ?1") { bind($0, 1, key) }
        }
        for definition in transaction.putDefinitions {
            try run("INSERT OR REPLACE INTO definitions (key, expr, created_rev, checksum) VALUES (?1, ?2, ?3, ?4)") { statement in
                bind(statement, 1, definition.key)
                bind(statement, 2, definition.expr)
                sqlite3_bind_int64(statement, 3, Int64(bitPattern: definition.createdRev))
                sqlite3_bind_int64(statement, 4, RowChecksum.definitionRow(definition))
            }
        }
        for target in transaction.deletedBindings {
            try run("DELETE FROM bindings WHERE target = ?1") { bind($0, 1, target) }
        }
        for binding in transaction.putBindings {
            try run("INSERT OR REPLACE INTO bindings (target, source, map, two_way, unmap, checksum) VALUES (?1, ?2, ?3, ?4, ?5, ?6)") { statement in
                bind(statement, 1, binding.to)
                bind(statement, 2, binding.from)
                bind(statement, 3, binding.map)
                sqlite3_bind_int64(statement, 4, binding.twoWay ? 1 : 0)
                bind(statement, 5, binding.unmap)
                sqlite3_bind_int64(statement, 6, RowChecksum.bindingRow(binding))
            }
        }
        try run("INSERT OR REPLACE INTO meta (name, value, checksum) VALUES ('rev', ?1, ?2)") {
            sqlite3_bind_int64($0, 1, Int64(bitPattern: transaction.rev))
            sqlite3_bind_int64($0, 2, RowChecksum.revisionRow(transaction.rev))
        }
    }

    /// fsyncs the WAL, which holds every transaction committed since the last checkpoint.
    public func sync() throws(ObsError) {
        guard let db else { throw ObsError(.internal, "database \(path) is closed") }
        var file: UnsafeMutablePointer<sqlite3_file>?
        let rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file)
        guard rc == SQLITE_OK else { throw failure("cannot reach the WAL file", rc) }
        // No WAL open (nothing written since open) means there is nothing to sync.
        guard let file, let methods = file.pointee.pMethods, let xSync = methods.pointee.xSync else { return }
        let syncRC = xSync(file, SQLITE_SYNC_NORMAL)
        guard syncRC == SQLITE_OK else { throw failure("fsync of the WAL failed", syncRC) }
    }

    // MARK: - Opening

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The database, its WAL and its shared memory must be regular files if they exist: SQLite
    /// would follow a symlink planted as `obsd.db-wal` and write the WAL wherever it points.
    private static func refuseLinks(_ path: String) throws(ObsError) {
        for file in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            guard lstat(file, &info) == 0 else { continue }
            let type = info.st_mode & S_IFMT
            guard type != S_IFLNK else {
                throw ObsError(.internal, "database file \(file) is a symlink; obsd does not follow symlinks in its state directory")
            }
            guard type == S_IFREG else { throw ObsError(.internal, "database file \(file) is not a regular file") }
        }
    }

    static func openDatabase(_ path: String, flags: Int32) throws(ObsError) -> OpaquePointer {
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            var message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let handle, sqlite3_extended_errcode(handle) == SQLITE_CANTOPEN | (6 << 8) {  // SQLITE_CANTOPEN_SYMLINK, a macro Swift does not import
                message += " (a symlink on its path: obsd opens its database without following symlinks)"
            }
            sqlite3_close_v2(handle)
            throw ObsError(.internal, "cannot open database \(path): \(message)")
        }
        return handle
    }

    private static func integrityProblems(_ db: OpaquePointer, path: String) throws(ObsError) -> [String] {
        var statement: OpaquePointer?
        var rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &statement, nil)
        defer { sqlite3_finalize(statement) }
        guard rc == SQLITE_OK else {
            throw ObsError(.internal, "cannot read database \(path): \(String(cString: sqlite3_errmsg(db)))")
        }
        var lines: [String] = []
        while true {
            rc = sqlite3_step(statement)
            guard rc == SQLITE_ROW else { break }
            lines.append(text(statement, 0))
        }
        guard rc == SQLITE_DONE else {
            throw ObsError(.internal, "cannot read database \(path): \(String(cString: sqlite3_errmsg(db)))")
        }
        return lines == ["ok"] ? [] : lines
    }

    // MARK: - Statements

    func failure(_ what: String, _ rc: Int32) -> ObsError {
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
        return ObsError(.internal, "database \(path): \(what): \(message)")
    }

    func execute(_ sql: String) throws(ObsError) {
        guard let db else { throw ObsError(.internal, "database \(path) is closed") }
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw failure(sql.prefix(40).description, rc) }
    }

    /// A prepared statement for `sql`, compiled once and reused.
    private func prepared(_ sql: String) throws(ObsError) -> OpaquePointer {
        if let statement = statements[sql] {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
            return statement
        }
        guard let db else { throw ObsError(.internal, "database \(path) is closed") }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw failure("prepare", rc) }
        statements[sql] = statement
        return statement
    }

    /// Runs a statement that returns no rows.
    func run(_ sql: String, _ bindings: (OpaquePointer) -> Void) throws(ObsError) {
        let statement = try prepared(sql)
        bindings(statement)
        let rc = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE else { throw failure("write", rc) }
    }

    /// Runs a query and hands each row to `row`.
    func query(_ sql: String, _ row: (OpaquePointer) -> Void) throws(ObsError) {
        let statement = try prepared(sql)
        var rc: Int32
        repeat {
            rc = sqlite3_step(statement)
            if rc == SQLITE_ROW { row(statement) }
        } while rc == SQLITE_ROW
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE else { throw failure("read", rc) }
    }

    static func text(_ statement: OpaquePointer?, _ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    static func optionalText(_ statement: OpaquePointer?, _ column: Int32) -> String? {
        sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : text(statement, column)
    }
}

/// SQLITE_TRANSIENT: SQLite copies the bound bytes, so the Swift string may go away after binding.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

func bind(_ statement: OpaquePointer, _ index: Int32, _ text: String?) {
    guard let text else {
        sqlite3_bind_null(statement, index)
        return
    }
    sqlite3_bind_text(statement, index, text, Int32(text.utf8.count), transient)
}
