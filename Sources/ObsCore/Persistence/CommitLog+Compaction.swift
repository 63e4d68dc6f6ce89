/// A group of commits rewritten as one transaction: what obsd does to its open batch while the
/// commit log cannot be written (a full disk), so that commits made meanwhile (TTL expiries,
/// bindings fed by the clock) keep it within a bound instead of growing it for as long as the disk
/// stays full (docs/architecture.md, "The commit log").
///
/// Why it replays the same: replaying records leaves, for each key, definition and binding, what
/// the last record naming it says, and the revision of the last transaction (CommitLog.swift). The
/// compacted group is one transaction at that revision holding exactly those last records, byte
/// for byte, so replaying it onto any state leaves what replaying the group does. (Replays that
/// skip transactions up to a revision, `after`, agree for any `after` that is not strictly inside
/// the group's revisions: a frame of the log is skipped whole or not at all, since the rows'
/// revision is always some frame's last.)
extension CommitLog {
    /// Appends `records` (a group of whole transactions whose last is at `rev`) to `buffer` as one
    /// transaction at `rev`: the last record naming each key, definition and binding, in the order
    /// they came. Throws where a record does not read, or the transactions do not end at `rev`.
    public static func compact(_ records: UnsafeRawBufferPointer, rev: UInt64, into buffer: inout ByteBuffer) throws(Damage) {
        guard !records.isEmpty else { return }
        guard records[0] == Kind.transaction.rawValue else { throw Damage(offset: 0) }
        let groups = [(records: records, rev: rev)]
        let (changes, _) = try changes(of: groups, after: 0)
        var last: [Range<Int>] = []
        try forEachLast(of: changes, in: groups) { change, _ in last.append(change.body.lowerBound - 5..<change.body.upperBound) }
        append(StoredTransaction(rev: rev), to: &buffer)
        for record in last.reversed() { buffer.append(UnsafeRawBufferPointer(rebasing: records[record])) }
    }
}
