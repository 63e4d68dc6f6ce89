// Watches: every change to a key or a range, from a revision on, in revision order.

/// What to watch.
public struct WatchRequest: Sendable, Hashable {
    public var key: [UInt8]
    public var rangeEnd: [UInt8]?
    /// The first revision to report; 0 for changes after the watch is created.
    public var startRevision: Int64
    /// Each event also carries the key as it was before.
    public var prevKV: Bool
    /// etcd sends `.progress` now and then while nothing changes (the member's notify interval).
    public var progressNotify: Bool
    /// etcd splits a message larger than its `--max-request-bytes` into fragments, which the
    /// client joins again at revision boundaries: no update holds part of a revision, and none
    /// holds more than a revision beyond that size. Without it, a watch that fell behind gets up
    /// to 1,000 revisions in one message, which may pass `maxResponseBytes` and end the watch
    /// (`responseTooLarge`) every time it is set up again. Off by default: etcd 3.4 splits a
    /// message in a time that grows with the square of its events (100,000 events of 50 bytes
    /// took it 40 s, where it sends them whole in 5), so a watch that fell behind on many small
    /// events comes several times slower with it. Ask for it once a watch failed as too large.
    public var fragment: Bool

    public init(key: [UInt8], rangeEnd: [UInt8]? = nil, startRevision: Int64 = 0, prevKV: Bool = false,
                progressNotify: Bool = false, fragment: Bool = false) {
        self.key = key
        self.rangeEnd = rangeEnd
        self.startRevision = startRevision
        self.prevKV = prevKV
        self.progressNotify = progressNotify
        self.fragment = fragment
    }

    /// Every key that starts with `prefix`, from `startRevision` on.
    public static func prefix(_ prefix: [UInt8], startRevision: Int64 = 0, prevKV: Bool = false, fragment: Bool = false) -> WatchRequest {
        WatchRequest(key: prefix, rangeEnd: prefixRangeEnd(prefix), startRevision: startRevision, prevKV: prevKV, fragment: fragment)
    }
}

/// One change: the key after it (a delete carries the key and its mod revision only).
public struct WatchEvent: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case put
        case delete
    }

    public var kind: Kind
    public var kv: KeyValue
    /// The key before the change, when the watch asked for it and the key existed.
    public var prevKV: KeyValue?

    /// The revision of the change.
    public var revision: Int64 { kv.modRevision }

    public init(kind: Kind, kv: KeyValue, prevKV: KeyValue? = nil) {
        self.kind = kind
        self.kv = kv
        self.prevKV = prevKV
    }
}

/// What a watch reports. `compacted` and `failed` end it: no update follows either.
public enum WatchUpdate: Sendable, Hashable {
    /// The watch is in place; `revision` is the store's revision then, and `clusterID` the ID of
    /// the etcd cluster whose member serves the watch (0 when the member did not say). A watch
    /// stays on the connection it was created on, so every update after this one comes from
    /// that cluster.
    case created(revision: Int64, clusterID: UInt64)
    /// Changes, in revision order; one message may hold several revisions (each event's
    /// `revision`). `revision` is the header's: the store's revision when etcd sent them.
    case events(revision: Int64, [WatchEvent])
    /// Nothing changed in the range up to `revision` (asked for with `progressNotify`).
    case progress(revision: Int64)
    /// The start revision is older than etcd keeps: read the range anew, and watch from after
    /// that read. `compactRevision` is the oldest revision etcd still has.
    case compacted(compactRevision: Int64)
    /// The watch was cut (the member died or lost its leader, or it was refused): watch again
    /// from one past the last revision seen.
    case failed(EtcdError)
}

/// Joins a watch's fragments at revision boundaries (WatchRequest.fragment): the events `held`
/// from the fragments before, then `events`, are `complete` up to the last revision; while `more`
/// fragments follow, that last revision's events are `held` for them (the next may hold more of
/// it). Events come in revision order.
func joinFragment(held: [WatchEvent], _ events: [WatchEvent], more: Bool) -> (complete: [WatchEvent], held: [WatchEvent]) {
    let all = held + events
    guard more, let last = all.last?.revision else { return (all, []) }
    let cut = (all.lastIndex { $0.revision != last }).map { $0 + 1 } ?? 0
    return (Array(all[..<cut]), Array(all[cut...]))
}
