// The database's schema: creating a new file (whole, or not at all), reading the version of an
// existing one, and migrating version 1 (rows without checksums) to version 2, version 2 to
// version 3 (the log of commits: SQLiteStorage+Log.swift), and version 3 to 4 (the log may also be
// in files beside the database).
import CSQLite
#if canImport(Glibc)
import Glibc
#else
import Darwin
#endif

extension SQLiteStorage {
    static let tables = """
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL, checksum INTEGER NOT NULL);
        CREATE TABLE keys (
            key TEXT PRIMARY KEY, value TEXT NOT NULL, rev INTEGER NOT NULL,
            created_rev INTEGER NOT NULL, version INTEGER NOT NULL, expires_at REAL,
            checksum INTEGER NOT NULL);
        CREATE TABLE definitions (
            key TEXT PRIMARY KEY, expr TEXT NOT NULL, created_rev INTEGER NOT NULL,
            checksum INTEGER NOT NULL);
        CREATE TABLE bindings (
            target TEXT PRIMARY KEY, source TEXT NOT NULL, map TEXT, two_way INTEGER NOT NULL,
            unmap TEXT, checksum INTEGER NOT NULL);
        \(logTable)
        """

    /// Commits not yet checkpointed into the tables above, as CommitLog records (one row per group
    /// of commits: SQLiteStorage+Log.swift).
    static let logTable = "CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY, rev INTEGER NOT NULL, data BLOB NOT NULL, checksum INTEGER NOT NULL);"

    /// Makes a new database at `path`: built as `path.new`, synced, then linked to `path` (which
    /// fails rather than replace a file that appeared meanwhile) and the directory synced. A crash
    /// at any point leaves either no `path` or a complete one.
    static func create(_ path: String) throws(ObsError) {
        // A WAL without its database is what is left when the database was deleted or moved: SQLite
        // would replay its pages onto the new file. What it holds is someone's data; never that.
        guard !exists(path + "-wal") else {
            throw ObsError(.internal, "database \(path) is missing but its WAL \(path)-wal is there: the database was deleted or moved; put it back, or remove the WAL to start with an empty store")
        }
        let temporary = path + ".new"
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(temporary + suffix) }
        do throws(ObsError) {
            let db = try openDatabase(temporary, flags: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW)
            let rc = sqlite3_exec(db, "PRAGMA journal_mode=WAL; BEGIN; \(tables) INSERT INTO schema_version (version) VALUES (\(schemaVersion)); COMMIT;", nil, nil, nil)
            let message = String(cString: sqlite3_errmsg(db))
            // Closing checkpoints the WAL into the file and removes the WAL.
            sqlite3_close_v2(db)
            guard rc == SQLITE_OK else { throw ObsError(.internal, "cannot create database \(path): \(message)") }
            try syncFile(temporary, what: "database")
            guard link(temporary, path) == 0 else {
                throw ObsError(.internal, "cannot create database \(path): \(String(cString: strerror(errno)))")
            }
            unlink(temporary)
            let slash = path.lastIndex(of: "/")
            try syncFile(slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? ".", what: "state directory")
        } catch {
            unlink(temporary)
            throw error
        }
    }

    private static func syncFile(_ path: String, what: String) throws(ObsError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        defer { if fd >= 0 { closeDescriptor(fd) } }
        guard fd >= 0, fsync(fd) == 0 else {
            throw ObsError(.internal, "cannot sync \(what) \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The version in `schema_version`. Throws when the file has no schema at all (an empty file,
    /// an empty database: what it held is gone, and writing to it would hide that) or a version
    /// this code does not know.
    func storedSchemaVersion() throws(ObsError) -> Int64 {
        var tables = 0
        try query("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'") {
            tables = Int(sqlite3_column_int64($0, 0))
        }
        guard tables == 1 else {
            var info = stat()
            let size = lstat(path, &info) == 0 ? "\(info.st_size) bytes" : "unreadable"
            throw ObsError(.internal, "database \(path) exists but holds no obsd schema (\(size)); an absent file is a fresh start, an empty one is not: restore it from a backup, or move it away to start with an empty store")
        }
        var versions: [Int64] = []
        try query("SELECT version FROM schema_version") { versions.append(sqlite3_column_int64($0, 0)) }
        guard versions.count == 1, let version = versions.first, (1...Self.schemaVersion).contains(version) else {
            throw ObsError(.internal, "database \(path) has schema version \(versions.map(String.init).joined(separator: ", ")); this obsd reads version \(Self.schemaVersion)")
        }
        return version
    }

    /// Version 1 to 2, in one transaction: every row loaded (and so checked) as version 1 stored
    /// it, then written again with its checksum.
    func migrateFromVersion1() throws(ObsError) {
        checksummed = false
        let state = try load()
        checksummed = true
        try execute("BEGIN IMMEDIATE")
        do throws(ObsError) {
            for table in ["meta", "keys", "definitions", "bindings"] {
                try execute("ALTER TABLE \(table) ADD COLUMN checksum INTEGER NOT NULL DEFAULT 0")
            }
            var rows = StoredTransaction(rev: state.rev)
            rows.putKeys = state.keys
            rows.putDefinitions = state.definitions
            rows.putBindings = state.bindings
            try writeRows(rows)
            try execute("UPDATE schema_version SET version = 2")
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}

extension SQLiteStorage {
    /// Version 2 to 3: the log table (empty).
    func migrateFromVersion2() throws(ObsError) {
        try execute("BEGIN IMMEDIATE")
        do throws(ObsError) {
            try execute(Self.logTable)
            try execute("UPDATE schema_version SET version = 3")
            try execute("COMMIT")
            hasLog = true
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }
}

extension SQLiteStorage {
    /// Version 3 to 4: no table changes (the log files are beside the database, not in it).
    func migrateFromVersion3() throws(ObsError) {
        try execute("UPDATE schema_version SET version = 4")
    }
}

/// close(2), out of reach of `SQLiteStorage.close()`, which would shadow it inside the type.
private func closeDescriptor(_ fd: Int32) {
    close(fd)
}
