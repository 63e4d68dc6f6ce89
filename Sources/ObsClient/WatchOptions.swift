import ObsCore

/// What a watch asks the daemon for (the `watch` operation of docs/protocol.md), and whether the client resumes it.
public struct WatchOptions: Sendable {
    public var keys: [String]
    public var initial = true
    public var since: UInt64?
    /// The daemon's run `since` was seen in (hello's `run`): a daemon whose state does not
    /// continue that run answers `compacted` and a snapshot rather than a replay. Without it,
    /// `since` is taken on trust.
    public var run: String?
    public var latest = false
    public var throttle: Double?
    public var debounce: Double?
    public var progress: Double?
    public var channels = true
    /// Reconnect with backoff when the connection drops, resuming after the last revision seen (or,
    /// when the daemon holds another state, starting afresh after a `reset`: `WatchStream`).
    public var reconnect = false

    public init(keys: [String]) { self.keys = keys }

    /// The request fields; `resumeAfter` replaces the snapshot with a replay from that revision;
    /// `afresh` asks for the snapshot whatever `since` and `initial` say (after a reset, the
    /// state the caller saw is gone: `WatchStream`).
    /// `seenIn` is the run `resumeAfter` was seen in.
    func fields(resumeAfter: UInt64?, seenIn: String? = nil, afresh: Bool = false) -> [String: JSONValue] {
        var fields: [String: JSONValue] = ["keys": .array(keys.map { .string($0) })]
        if !afresh, let since = resumeAfter ?? since {
            fields["since"] = .int(Int64(since))
            if let run = resumeAfter != nil ? seenIn : run { fields["run"] = .string(run) }
        }
        if !initial, !afresh { fields["initial"] = .bool(false) }
        if latest { fields["mode"] = .string("latest") }
        if let throttle { fields["throttle_ms"] = .int(Int64((throttle * 1000).rounded())) }
        if let debounce { fields["debounce_ms"] = .int(Int64((debounce * 1000).rounded())) }
        if let progress { fields["progress_ms"] = .int(Int64((progress * 1000).rounded())) }
        if !channels { fields["channels"] = .bool(false) }
        return fields
    }
}
