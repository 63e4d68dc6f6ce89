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
    /// The body as it was encoded when the event was recorded (an error taken from the history),
    /// sent as it is.
    var encodedBody: [UInt8]?
}
