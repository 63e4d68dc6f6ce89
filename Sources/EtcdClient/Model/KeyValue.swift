// What etcd's answers carry about keys and about the cluster that answered.

/// One key as etcd stores it (etcd's mvccpb.KeyValue).
public struct KeyValue: Sendable, Hashable {
    public var key: [UInt8]
    public var value: [UInt8]
    /// The revision of the last creation of the key (0 in a delete event).
    public var createRevision: Int64
    /// The revision of the last change of the key.
    public var modRevision: Int64
    /// The number of changes since its creation (0 in a delete event).
    public var version: Int64
    /// The lease the key is attached to, 0 for none.
    public var lease: Int64

    public init(key: [UInt8], value: [UInt8] = [], createRevision: Int64 = 0, modRevision: Int64 = 0,
                version: Int64 = 0, lease: Int64 = 0) {
        self.key = key
        self.value = value
        self.createRevision = createRevision
        self.modRevision = modRevision
        self.version = version
        self.lease = lease
    }
}

/// The header of every etcd response: who answered, and the store's revision when it did.
public struct ResponseHeader: Sendable, Hashable {
    public var clusterID: UInt64
    public var memberID: UInt64
    public var revision: Int64
    public var raftTerm: UInt64

    public init(clusterID: UInt64 = 0, memberID: UInt64 = 0, revision: Int64 = 0, raftTerm: UInt64 = 0) {
        self.clusterID = clusterID
        self.memberID = memberID
        self.revision = revision
        self.raftTerm = raftTerm
    }
}

/// The end of the range of every key that starts with `prefix`: the prefix with its last byte
/// below 0xff incremented and what follows it dropped; `[0]` (every key) when there is none.
public func prefixRangeEnd(_ prefix: [UInt8]) -> [UInt8] {
    var end = prefix
    while let last = end.last {
        if last < 0xff {
            end[end.count - 1] = last + 1
            return end
        }
        end.removeLast()
    }
    return [0]
}
