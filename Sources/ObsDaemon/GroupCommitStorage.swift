import ObsCore

/// Wraps the daemon's storage to give `normal` and `strict` modes their group commit. The daemon
/// answers requests only at the end of a loop turn, after `syncIfNeeded`; so the transactions of a
/// turn are merged as they commit and written at the end of the turn as one database transaction
/// (then, in `strict` mode, fsynced once), before any acknowledgement or change event is sent. Many
/// acknowledged writes share one write to the WAL (one set of SQLite's file locks, one page write
/// per page touched) and in strict mode one fsync, and none is acknowledged before them. A failed
/// write (a full disk) leaves the merged writes pending, to be tried again; a failed fsync cannot
/// be tried again (the kernel may have dropped the data), so the daemon stops.
///
/// This runs on the loop thread. Writing on a thread of its own, pipelined with the loop, was
/// built and measured and did not pay on this machine (docs/performance.md, "The second core").
final class GroupCommitStorage: StateStorage {
    private let inner: any StateStorage
    private let durability: Durability
    /// What the turn committed so far, not yet written.
    private var pending: PendingTransaction?

    /// `memory`: every commit goes straight to `inner` (`DiscardingStorage`), nothing is merged.
    init(_ inner: any StateStorage, durability: Durability) {
        self.inner = inner
        self.durability = durability
    }

    func load() throws(ObsError) -> StoredState { try inner.load() }

    func commit(_ transaction: StoredTransaction) throws(ObsError) {
        guard durability != .memory else { return try inner.commit(transaction) }
        if pending == nil { pending = PendingTransaction() }
        pending!.merge(transaction)
    }

    func sync() throws(ObsError) {
        if let merged = pending?.transaction {
            try inner.commit(merged)
            pending = nil
        }
        try inner.sync()
    }

    /// Writes (and in strict mode fsyncs) what was committed since the last call, if anything.
    func syncIfNeeded() throws(GroupCommitFailure) {
        guard let merged = pending?.transaction else { return }
        do throws(ObsError) {
            try inner.commit(merged)
        } catch {
            throw .write(error)
        }
        pending = nil
        guard durability == .strict else { return }
        do throws(ObsError) {
            try inner.sync()
        } catch {
            throw .sync(error)
        }
    }
}

/// Why a group commit failed.
enum GroupCommitFailure: Error {
    /// The database write failed and nothing of it is on disk: the writes stay pending, to be
    /// written by a later turn.
    case write(ObsError)
    /// The fsync failed: what the kernel held may be lost, so nothing more can be promised.
    case sync(ObsError)

    var message: String {
        switch self {
        case .write(let error), .sync(let error): return error.message
        }
    }
}

/// Transactions merged in commit order: for every key, definition and binding only the last put or
/// delete counts, which is what applying them one after the other leaves.
struct PendingTransaction {
    private var rev: UInt64 = 0
    private var keys: [String: StoredKey?] = [:]
    private var definitions: [String: StoredDefinition?] = [:]
    private var bindings: [String: StoredBinding?] = [:]

    mutating func merge(_ transaction: StoredTransaction) {
        rev = transaction.rev
        for key in transaction.deletedKeys { keys[key] = .some(nil) }
        for key in transaction.putKeys { keys[key.key] = key }
        for key in transaction.deletedDefinitions { definitions[key] = .some(nil) }
        for definition in transaction.putDefinitions { definitions[definition.key] = definition }
        for target in transaction.deletedBindings { bindings[target] = .some(nil) }
        for binding in transaction.putBindings { bindings[binding.to] = binding }
    }

    var transaction: StoredTransaction {
        var merged = StoredTransaction(rev: rev)
        for (name, key) in keys {
            if let key { merged.putKeys.append(key) } else { merged.deletedKeys.append(name) }
        }
        for (name, definition) in definitions {
            if let definition { merged.putDefinitions.append(definition) } else { merged.deletedDefinitions.append(name) }
        }
        for (target, binding) in bindings {
            if let binding { merged.putBindings.append(binding) } else { merged.deletedBindings.append(target) }
        }
        return merged
    }
}
