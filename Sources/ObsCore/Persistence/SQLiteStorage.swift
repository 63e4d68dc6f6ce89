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
//    database, or a damaged one, is reported with its path and left exactly as it was.
import CSQLite

/// Persists the store's state in a SQLite database file.
public final class SQLiteStorage: StateStorage {
    /// The schema this code reads and writes, kept in the `schema_version` table.
    public static let schemaVersion: Int64 = 1

    /// The database file's path, as given.
    public let path: String
    private var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]

    /// Opens (or creates) the database at `path`, checks its integrity and creates the schema.
    ///
    /// Throws `internal` naming the file when it cannot be opened, is not a database, fails the
    /// integrity check, or has a schema version this code does not know. `busyTimeout` (seconds) is
    /// how long a commit waits for another process that holds the file's write lock.
    public init(path: String, busyTimeout: Double = 5) throws(ObsError) {
        self.path = path
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        db = handle
        guard rc == SQLITE_OK else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(handle)
            db = nil
            throw ObsError(.internal, "cannot open database \(path): \(message)")
        }
        do throws(ObsError) {
            // A busy timeout only matters if an operator opens the file (sqlite3 CLI, backup) while
            // obsd runs; without it such a reader would make a commit fail at once.
            sqlite3_busy_timeout(handle, Int32(busyTimeout * 1000))
            let problems = try integrityProblems()
            guard problems.isEmpty else {
                throw ObsError(.internal, "database \(path) failed its integrity check: \(problems.joined(separator: "; "))")
            }
            try execute("PRAGMA journal_mode=WAL")
            try execute("PRAGMA synchronous=NORMAL")
            try createSchema()
        } catch {
            close()
            throw error
        }
    }

    deinit { close() }

    /// Runs `PRAGMA integrity_check` on the file at `path` without changing it, and returns the
    /// problems found (empty when the database is sound). Throws when the file cannot be read as a
    /// database at all.
    public static func check(path: String) throws(ObsError) -> [String] {
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY, nil)
        defer { sqlite3_close_v2(handle) }
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            throw ObsError(.internal, "cannot open database \(path): \(message)")
        }
        return try runIntegrityCheck(handle, path: path)
    }

    /// Closes the database; SQLite checkpoints the WAL into the main file. Idempotent.
    public func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    public func load() throws(ObsError) -> StoredState {
        var state = StoredState()
        try query("SELECT value FROM meta WHERE name = 'rev'") { row in
            state.rev = UInt64(bitPattern: sqlite3_column_int64(row, 0))
        }
        var decodeError: ObsError?
        try query("SELECT key, value, rev, created_rev, version, expires_at FROM keys ORDER BY key") { row in
            let key = Self.text(row, 0)
            let json = Self.text(row, 1)
            do throws(JSONParseError) {
                let value = try JSONValue.parse(json)
                state.keys.append(StoredKey(
                    key: key, value: value,
                    rev: UInt64(bitPattern: sqlite3_column_int64(row, 2)),
                    createdRev: UInt64(bitPattern: sqlite3_column_int64(row, 3)),
                    version: UInt64(bitPattern: sqlite3_column_int64(row, 4)),
                    expiresAt: sqlite3_column_type(row, 5) == SQLITE_NULL ? nil : sqlite3_column_double(row, 5)))
            } catch {
                decodeError = ObsError(.internal, "database \(path): key \(key) holds invalid JSON: \(error)")
            }
        }
        if let decodeError { throw decodeError }
        try query("SELECT key, expr, created_rev FROM definitions ORDER BY key") { row in
            state.definitions.append(StoredDefinition(
                key: Self.text(row, 0), expr: Self.text(row, 1),
                createdRev: UInt64(bitPattern: sqlite3_column_int64(row, 2))))
        }
        try query("SELECT target, source, map, two_way, unmap FROM bindings ORDER BY target") { row in
            state.bindings.append(StoredBinding(
                from: Self.text(row, 1), to: Self.text(row, 0), map: Self.optionalText(row, 2),
                twoWay: sqlite3_column_int64(row, 3) != 0, unmap: Self.optionalText(row, 4)))
        }
        return state
    }

    public func commit(_ transaction: StoredTransaction) throws(ObsError) {
        try execute("BEGIN IMMEDIATE")
        do throws(ObsError) {
            for key in transaction.deletedKeys {
                try run("DELETE FROM keys WHERE key = ?1") { bind($0, 1, key) }
            }
            for key in transaction.putKeys {
                try run("INSERT OR REPLACE INTO keys (key, value, rev, created_rev, version, expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)") { statement in
                    bind(statement, 1, key.key)
                    bind(statement, 2, key.value.encoded)
                    sqlite3_bind_int64(statement, 3, Int64(bitPattern: key.rev))
                    sqlite3_bind_int64(statement, 4, Int64(bitPattern: key.createdRev))
                    sqlite3_bind_int64(statement, 5, Int64(bitPattern: key.version))
                    if let expiresAt = key.expiresAt {
                        sqlite3_bind_double(statement, 6, expiresAt)
                    } else {
                        sqlite3_bind_null(statement, 6)
                    }
                }
            }
            for key in transaction.deletedDefinitions {
                try run("DELETE FROM definitions WHERE key = ?1") { bind($0, 1, key) }
            }
            for definition in transaction.putDefinitions {
                try run("INSERT OR REPLACE INTO definitions (key, expr, created_rev) VALUES (?1, ?2, ?3)") { statement in
                    bind(statement, 1, definition.key)
                    bind(statement, 2, definition.expr)
                    sqlite3_bind_int64(statement, 3, Int64(bitPattern: definition.createdRev))
                }
            }
            for target in transaction.deletedBindings {
                try run("DELETE FROM bindings WHERE target = ?1") { bind($0, 1, target) }
            }
            for binding in transaction.putBindings {
                try run("INSERT OR REPLACE INTO bindings (target, source, map, two_way, unmap) VALUES (?1, ?2, ?3, ?4, ?5)") { statement in
                    bind(statement, 1, binding.to)
                    bind(statement, 2, binding.from)
                    bind(statement, 3, binding.map)
                    sqlite3_bind_int64(statement, 4, binding.twoWay ? 1 : 0)
                    bind(statement, 5, binding.unmap)
                }
            }
            try run("INSERT OR REPLACE INTO meta (name, value) VALUES ('rev', ?1)") {
                sqlite3_bind_int64($0, 1, Int64(bitPattern: transaction.rev))
            }
            try execute("COMMIT")
        } catch {
            // ROLLBACK can fail only if SQLite already rolled back on its own (I/O error, full disk).
            try? execute("ROLLBACK")
            throw error
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

    // MARK: - Schema

    private func createSchema() throws(ObsError) {
        try execute("""
            CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS keys (
                key TEXT PRIMARY KEY, value TEXT NOT NULL, rev INTEGER NOT NULL,
                created_rev INTEGER NOT NULL, version INTEGER NOT NULL, expires_at REAL);
            CREATE TABLE IF NOT EXISTS definitions (
                key TEXT PRIMARY KEY, expr TEXT NOT NULL, created_rev INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS bindings (
                target TEXT PRIMARY KEY, source TEXT NOT NULL, map TEXT, two_way INTEGER NOT NULL,
                unmap TEXT);
            """)
        var versions: [Int64] = []
        try query("SELECT version FROM schema_version") { versions.append(sqlite3_column_int64($0, 0)) }
        switch versions {
        case []:
            try execute("INSERT INTO schema_version (version) VALUES (\(Self.schemaVersion))")
        case [Self.schemaVersion]:
            break
        default:
            throw ObsError(.internal, "database \(path) has schema version \(versions.map(String.init).joined(separator: ", ")); this obsd reads version \(Self.schemaVersion)")
        }
    }

    private func integrityProblems() throws(ObsError) -> [String] {
        guard let db else { throw ObsError(.internal, "database \(path) is closed") }
        return try Self.runIntegrityCheck(db, path: path)
    }

    private static func runIntegrityCheck(_ db: OpaquePointer, path: String) throws(ObsError) -> [String] {
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

    private func failure(_ what: String, _ rc: Int32) -> ObsError {
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
    private func run(_ sql: String, _ bindings: (OpaquePointer) -> Void) throws(ObsError) {
        let statement = try prepared(sql)
        bindings(statement)
        let rc = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE else { throw failure("write", rc) }
    }

    /// Runs a query and hands each row to `row`.
    private func query(_ sql: String, _ row: (OpaquePointer) -> Void) throws(ObsError) {
        let statement = try prepared(sql)
        var rc: Int32
        repeat {
            rc = sqlite3_step(statement)
            if rc == SQLITE_ROW { row(statement) }
        } while rc == SQLITE_ROW
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE else { throw failure("read", rc) }
    }

    private static func text(_ statement: OpaquePointer?, _ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    private static func optionalText(_ statement: OpaquePointer?, _ column: Int32) -> String? {
        sqlite3_column_type(statement, column) == SQLITE_NULL ? nil : text(statement, column)
    }
}

/// SQLITE_TRANSIENT: SQLite copies the bound bytes, so the Swift string may go away after binding.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

private func bind(_ statement: OpaquePointer, _ index: Int32, _ text: String?) {
    guard let text else {
        sqlite3_bind_null(statement, index)
        return
    }
    sqlite3_bind_text(statement, index, text, Int32(text.utf8.count), transient)
}
