/// One key's change in one committed transaction: what watches and history carry.
struct KeyEvent {
    enum Kind {
        case change
        case delete
        case error
    }

    var kind: Kind
    var key: String
    /// change: the value before (nil when created or recovering with no good value); delete: the
    /// value removed.
    var old: JSONValue?
    /// change: the new value.
    var new: JSONValue?
    var error: ObsError?
    var rev: UInt64
    var created: Bool
    /// delete: "ttl" or "ephemeral" when not a client's delete.
    var reason: String?
}

extension KeyEvent {
    /// Roughly the memory the event keeps: what the history's byte limit counts.
    var estimatedBytes: Int {
        64 + key.utf8.count + (old?.estimatedBytes ?? 0) + (new?.estimatedBytes ?? 0) + (error?.message.utf8.count ?? 0)
    }
}
