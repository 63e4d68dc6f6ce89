/// Every event of the protocol, as written in an event line's `event` member (docs/protocol.md,
/// "Events"). Clients tell events from responses by that member.
public enum EventName: String, Sendable, CaseIterable {
    /// A snapshot item: a matching key's current state, at a watch's start or after a gap.
    case initial
    /// The snapshot or replay is complete up to `rev`; live events follow.
    case synced
    case change
    case delete
    /// A matching computed entered or stayed in the error state with a new error.
    case error
    /// A message published to a matching channel.
    case publish
    /// Events were dropped for the watch (its client's output was full); a snapshot follows.
    case overflow
    /// `since` was older than the history kept; a snapshot follows.
    case compacted
    /// Nothing happened on the watch for its `progress_ms`.
    case progress
    /// The daemon is closing the connection (no `watch` member).
    case goodbye
}
