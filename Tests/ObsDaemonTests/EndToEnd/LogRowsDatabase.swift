// A database as an obsd of schema 3 left it: its commit log as rows of the database, each row one
// transaction `k.N` = "logged-N" at revision N, not yet folded into the tables.
import Foundation
import ObsCore
import TestSupport

/// Creates `sandbox`'s state directory with such a database of `count` log rows, closed; returns
/// the database's path.
func databaseWithLogRows(_ sandbox: Sandbox, count: UInt64 = 3) throws -> String {
    try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true,
                                            attributes: [.posixPermissions: 0o700])
    let database = sandbox.state + "/obsd.db"
    let storage = try SQLiteStorage(path: database)
    defer { storage.close() }
    for rev in 1...count {
        var group = ByteBuffer()
        var transaction = StoredTransaction(rev: rev)
        transaction.putKeys = [StoredKey(key: "k.\(rev)", value: .string("logged-\(rev)"), rev: rev, createdRev: rev, version: 1)]
        CommitLog.append(transaction, to: &group)
        try storage.commitLog(group.bytes, rev: rev)
    }
    return database
}
