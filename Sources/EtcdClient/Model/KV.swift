// Reads, writes and deletes of keys (etcd's KV service), alone or as operations of a transaction.

/// Reads one key, or every key in [key, rangeEnd).
public struct RangeRequest: Sendable, Hashable {
    public var key: [UInt8]
    /// nil: the key alone; otherwise the range's end, exclusive (`[0]`: every key from `key` on).
    public var rangeEnd: [UInt8]?
    /// The store as of this revision; 0 for the newest.
    public var revision: Int64
    /// At most this many keys; 0 for no limit.
    public var limit: Int64
    /// Only the number of keys, no keys.
    public var countOnly: Bool
    /// Keys without their values.
    public var keysOnly: Bool
    /// Answered by the member from its own state, without asking the leader (may be stale).
    public var serializable: Bool

    public init(key: [UInt8], rangeEnd: [UInt8]? = nil, revision: Int64 = 0, limit: Int64 = 0,
                countOnly: Bool = false, keysOnly: Bool = false, serializable: Bool = false) {
        self.key = key
        self.rangeEnd = rangeEnd
        self.revision = revision
        self.limit = limit
        self.countOnly = countOnly
        self.keysOnly = keysOnly
        self.serializable = serializable
    }

    /// Every key that starts with `prefix`, as of `revision` (0: the newest).
    public static func prefix(_ prefix: [UInt8], revision: Int64 = 0, countOnly: Bool = false) -> RangeRequest {
        RangeRequest(key: prefix, rangeEnd: prefixRangeEnd(prefix), revision: revision, countOnly: countOnly)
    }
}

/// The keys a range found (`count` is the number in the range, even past `limit` or with `countOnly`).
public struct RangeResponse: Sendable, Hashable {
    public var header: ResponseHeader
    public var kvs: [KeyValue]
    /// More keys are in the range than `limit` let through.
    public var more: Bool
    public var count: Int64

    public init(header: ResponseHeader, kvs: [KeyValue] = [], more: Bool = false, count: Int64 = 0) {
        self.header = header
        self.kvs = kvs
        self.more = more
        self.count = count
    }
}

/// Writes one key.
public struct PutRequest: Sendable, Hashable {
    public var key: [UInt8]
    public var value: [UInt8]
    /// The lease to attach the key to; 0 for none (the key then outlives any lease it had).
    public var lease: Int64
    /// Answer with the key as it was before.
    public var prevKV: Bool

    public init(key: [UInt8], value: [UInt8], lease: Int64 = 0, prevKV: Bool = false) {
        self.key = key
        self.value = value
        self.lease = lease
        self.prevKV = prevKV
    }
}

/// The revision a put made, and the key before it when asked.
public struct PutResponse: Sendable, Hashable {
    public var header: ResponseHeader
    public var prevKV: KeyValue?

    public init(header: ResponseHeader, prevKV: KeyValue? = nil) {
        self.header = header
        self.prevKV = prevKV
    }
}

/// Deletes one key, or every key in [key, rangeEnd).
public struct DeleteRangeRequest: Sendable, Hashable {
    public var key: [UInt8]
    public var rangeEnd: [UInt8]?
    /// Answer with the keys deleted.
    public var prevKV: Bool

    public init(key: [UInt8], rangeEnd: [UInt8]? = nil, prevKV: Bool = false) {
        self.key = key
        self.rangeEnd = rangeEnd
        self.prevKV = prevKV
    }
}

/// How many keys a delete removed, and which when asked.
public struct DeleteRangeResponse: Sendable, Hashable {
    public var header: ResponseHeader
    public var deleted: Int64
    public var prevKVs: [KeyValue]

    public init(header: ResponseHeader, deleted: Int64 = 0, prevKVs: [KeyValue] = []) {
        self.header = header
        self.deleted = deleted
        self.prevKVs = prevKVs
    }
}
