/// A lease as etcd answers a grant or a keepalive: its ID and its TTL in seconds. A keepalive
/// answers TTL 0 when the lease had expired or did not exist (its keys are gone).
public struct LeaseResponse: Sendable, Hashable {
    public var header: ResponseHeader
    public var id: Int64
    public var ttl: Int64

    public init(header: ResponseHeader, id: Int64, ttl: Int64) {
        self.header = header
        self.id = id
        self.ttl = ttl
    }
}
