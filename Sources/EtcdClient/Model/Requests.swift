// The requests EtcdClient sends, their answers, and what the daemon's loop receives.

/// Names a submitted request or watch in the completions that answer it.
public struct EtcdRequestID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let value: UInt64

    public init(_ value: UInt64) { self.value = value }

    public static func < (lhs: EtcdRequestID, rhs: EtcdRequestID) -> Bool { lhs.value < rhs.value }
    public var description: String { "#\(value)" }
}

/// One request to etcd with one answer.
public enum EtcdRequest: Sendable, Hashable {
    case range(RangeRequest)
    case put(PutRequest)
    case deleteRange(DeleteRangeRequest)
    case txn(Txn)
    /// Drops the history before `revision`; `physical` answers only once the space is freed.
    case compact(revision: Int64, physical: Bool)
    /// A lease of `ttl` seconds (`id` 0: etcd picks the ID).
    case leaseGrant(ttl: Int64, id: Int64 = 0)
    /// Renews a lease for its TTL.
    case leaseKeepAlive(id: Int64)
    /// Ends a lease now, deleting its keys.
    case leaseRevoke(id: Int64)
    /// The answering member's status.
    case status
}

/// The answer to an `EtcdRequest`, of the same case.
public enum EtcdResponse: Sendable, Hashable {
    case range(RangeResponse)
    case put(PutResponse)
    case deleteRange(DeleteRangeResponse)
    case txn(TxnResponse)
    case compact(ResponseHeader)
    case leaseGrant(LeaseResponse)
    case leaseKeepAlive(LeaseResponse)
    case leaseRevoke(ResponseHeader)
    case status(StatusResponse)

    /// The header of the answer: the member that gave it and the store's revision.
    public var header: ResponseHeader {
        switch self {
        case .range(let response): response.header
        case .put(let response): response.header
        case .deleteRange(let response): response.header
        case .txn(let response): response.header
        case .compact(let header), .leaseRevoke(let header): header
        case .leaseGrant(let response): response.header
        case .leaseKeepAlive(let response): response.header
        case .status(let response): response.header
        }
    }
}

/// What `EtcdClient.takeCompletions` hands the loop: an answer, or news from a watch.
public enum EtcdCompletion: Sendable, Hashable {
    case response(EtcdRequestID, Result<EtcdResponse, EtcdError>)
    case watch(EtcdRequestID, WatchUpdate)

    /// The request or watch this completion belongs to.
    public var id: EtcdRequestID {
        switch self {
        case .response(let id, _), .watch(let id, _): id
        }
    }
}
