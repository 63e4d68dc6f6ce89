// Leases: keys attached to one are deleted when it expires or is revoked.

/// A lease granted: its ID and its TTL in seconds.
public struct LeaseGrantResponse: Sendable, Hashable {
    public var header: ResponseHeader
    public var id: Int64
    public var ttl: Int64

    public init(header: ResponseHeader, id: Int64, ttl: Int64) {
        self.header = header
        self.id = id
        self.ttl = ttl
    }
}

/// A lease renewed: its new TTL in seconds, 0 when the lease had expired or did not exist.
public struct LeaseKeepAliveResponse: Sendable, Hashable {
    public var header: ResponseHeader
    public var id: Int64
    public var ttl: Int64

    public init(header: ResponseHeader, id: Int64, ttl: Int64) {
        self.header = header
        self.id = id
        self.ttl = ttl
    }
}
