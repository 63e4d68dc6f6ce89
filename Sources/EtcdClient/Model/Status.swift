/// One member's view of itself and of the cluster (etcd's maintenance status).
public struct StatusResponse: Sendable, Hashable {
    public var header: ResponseHeader
    /// etcd's version, "3.4.23" say.
    public var version: String
    public var dbSize: Int64
    /// The leader's member ID, 0 when this member knows of none.
    public var leader: UInt64
    public var raftIndex: UInt64
    public var raftTerm: UInt64
    /// What is wrong with the member, "etcdserver: no leader" say.
    public var errors: [String]

    public init(header: ResponseHeader, version: String = "", dbSize: Int64 = 0, leader: UInt64 = 0,
                raftIndex: UInt64 = 0, raftTerm: UInt64 = 0, errors: [String] = []) {
        self.header = header
        self.version = version
        self.dbSize = dbSize
        self.leader = leader
        self.raftIndex = raftIndex
        self.raftTerm = raftTerm
        self.errors = errors
    }
}
