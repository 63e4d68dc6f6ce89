// Loading the stored state, the same way at start-up and for `obsd --check`: every row is read and
// checked (its checksum, its JSON, its names, its revisions against the counter), and every row
// that fails is reported with its key. Nothing is served from a file with a damaged row: the
// daemon refuses to start and `--check` lists them all.
import CSQLite

extension SQLiteStorage {
    /// How many problems the error's message quotes; `details.problems` has them all.
    static let problemsQuoted = 5

    public func load() throws(ObsError) -> StoredState {
        var state = StoredState()
        var problems: [String] = []
        // Tables that cannot be read to the end (a damaged page).
        var unreadable: [String] = []
        let checksum = checksummed ? ", checksum" : ""
        read("meta", "SELECT name, value\(checksum) FROM meta", failures: &unreadable) { row in
            let name = Self.text(row, 0)
            let value = UInt64(bitPattern: sqlite3_column_int64(row, 1))
            switch name {
            case "rev":
                if checksummed, sqlite3_column_int64(row, 2) != RowChecksum.revisionRow(value) {
                    problems.append("the revision counter: damaged (its checksum does not match)")
                }
                state.rev = value
            case "run":
                // Written with checksums only (schema 2 and later).
                guard checksummed else { return }
                guard sqlite3_column_int64(row, 2) == RowChecksum.runRow(value) else {
                    return problems.append("the run that left the state: damaged (its checksum does not match)")
                }
                state.run = value
            default:
                break
            }
        }
        read("keys", "SELECT key, value, rev, created_rev, version, expires_at\(checksum) FROM keys ORDER BY key", failures: &unreadable) { row in
            let key = Self.text(row, 0)
            let json = Self.text(row, 1)
            let stored = (rev: UInt64(bitPattern: sqlite3_column_int64(row, 2)),
                          createdRev: UInt64(bitPattern: sqlite3_column_int64(row, 3)),
                          version: UInt64(bitPattern: sqlite3_column_int64(row, 4)),
                          expiresAt: sqlite3_column_type(row, 5) == SQLITE_NULL ? nil : sqlite3_column_double(row, 5))
            if checksummed, sqlite3_column_int64(row, 6) != RowChecksum.keyRow(key, json: json, rev: stored.rev, createdRev: stored.createdRev,
                                                                             version: stored.version, expiresAt: stored.expiresAt) {
                return problems.append("key \(Self.quoted(key)): damaged (its checksum does not match)")
            }
            guard KeyName.isValid(key) else { return problems.append("key \(Self.quoted(key)): not a valid key name") }
            do throws(JSONParseError) {
                state.keys.append(StoredKey(key: key, value: try JSONValue.parse(json), rev: stored.rev, createdRev: stored.createdRev,
                                            version: stored.version, expiresAt: stored.expiresAt))
            } catch {
                problems.append("key \(Self.quoted(key)): its value is not valid JSON (\(error))")
            }
        }
        read("definitions", "SELECT key, expr, created_rev\(checksum) FROM definitions ORDER BY key", failures: &unreadable) { row in
            let definition = StoredDefinition(key: Self.text(row, 0), expr: Self.text(row, 1),
                                              createdRev: UInt64(bitPattern: sqlite3_column_int64(row, 2)))
            if checksummed, sqlite3_column_int64(row, 3) != RowChecksum.definitionRow(definition) {
                return problems.append("computed key \(Self.quoted(definition.key)): damaged (its checksum does not match)")
            }
            guard KeyName.isValid(definition.key) else {
                return problems.append("computed key \(Self.quoted(definition.key)): not a valid key name")
            }
            state.definitions.append(definition)
        }
        read("bindings", "SELECT target, source, map, two_way, unmap\(checksum) FROM bindings ORDER BY target", failures: &unreadable) { row in
            let binding = StoredBinding(from: Self.text(row, 1), to: Self.text(row, 0), map: Self.optionalText(row, 2),
                                        twoWay: sqlite3_column_int64(row, 3) != 0, unmap: Self.optionalText(row, 4))
            if checksummed, sqlite3_column_int64(row, 5) != RowChecksum.bindingRow(binding) {
                return problems.append("binding into \(Self.quoted(binding.to)): damaged (its checksum does not match)")
            }
            guard KeyName.isValid(binding.to), KeyName.isValid(binding.from) else {
                return problems.append("binding into \(Self.quoted(binding.to)): not a valid key name")
            }
            state.bindings.append(binding)
        }
        let counter = state.rev
        replayLog(onto: &state, problems: &problems, failures: &unreadable)
        state.rev = max(state.rev, counter)
        problems += unreadable
        // A revision above the counter means the counter went back: new writes would reuse it.
        for key in state.keys where max(key.rev, key.createdRev) > state.rev {
            problems.append("key \(Self.quoted(key.key)): revision \(max(key.rev, key.createdRev)) is above the revision counter \(state.rev)")
        }
        for definition in state.definitions where definition.createdRev > state.rev {
            problems.append("computed key \(Self.quoted(definition.key)): revision \(definition.createdRev) is above the revision counter \(state.rev)")
        }
        guard problems.isEmpty else {
            let quoted = problems.prefix(Self.problemsQuoted).joined(separator: "; ")
            let more = problems.count > Self.problemsQuoted ? "; and \(problems.count - Self.problemsQuoted) more" : ""
            throw ObsError(.internal, "database \(path) has \(problems.count) \(problems.count == 1 ? "row" : "rows") that cannot be loaded: \(quoted)\(more) (obsd --check lists them all)",
                           details: ["problems": .array(problems.map { .string($0) })])
        }
        return state
    }

    /// Runs a query of `table`; a read that fails part way goes to `failures`.
    private func read(_ table: String, _ sql: String, failures: inout [String], _ row: (OpaquePointer) -> Void) {
        do throws(ObsError) {
            try query(sql, row)
        } catch {
            failures.append("table \(table): \(error.message)")
        }
    }

    /// A key as read from the file, in JSON quotes: a damaged name may hold any byte.
    private static func quoted(_ name: String) -> String {
        JSONValue.string(name).encoded
    }
}
