// One request, watch or authentication as the client carries it out: the endpoints it
// has tried, the failures it met, its deadline.

final class Operation {
    enum Kind {
        case request(EtcdRequest)
        case watch(WatchRequest)
        /// Fetching a token for etcd's user and password (the client's own, with no ID).
        case authenticate
    }

    let id: EtcdRequestID
    let kind: Kind
    let call: WireCall
    /// For a request, when it fails; for a watch, by when it must be created.
    let deadline: Monotonic
    /// The endpoint of the first attempt; later attempts take the next ones in turn.
    var firstEndpoint = 0
    var attempts = 0
    /// "endpoint: what went wrong" of the last failed attempts (one round's worth), for the
    /// `unavailable` message.
    private(set) var failures: [String] = []
    /// When a resting operation is tried again.
    var retryAt = Monotonic(nanoseconds: 0)
    /// A refused token is fetched again once per operation, not in a loop.
    var reauthenticated = false
    /// Attempts answered in HTTP/1.1 by a member asked for HTTP/2 on a pooled connection
    /// (EasyHandle.Version.http2Pooled): sent again with prior knowledge, a few times at most.
    var http1Answers = 0
    /// The watch has reported `.created`: from then on, a cut is reported rather than retried.
    var watchCreated = false

    init(id: EtcdRequestID, kind: Kind, call: WireCall, deadline: Monotonic) {
        self.id = id
        self.kind = kind
        self.call = call
        self.deadline = deadline
    }

    func recordFailure(_ failure: String, endpoints: Int) {
        failures.append(failure)
        if failures.count > endpoints { failures.removeFirst(failures.count - endpoints) }
    }

    var isWatch: Bool {
        if case .watch = kind { return true }
        return false
    }

    /// Whether the operation may be sent again after an attempt that reached etcd and lost its
    /// answer (a write may have been applied then).
    var mayRepeat: Bool {
        switch kind {
        case .request(let request): request.isIdempotent
        case .watch, .authenticate: true
        }
    }

    /// The member may not answer the status when it has no leader (that is what it reports).
    var requiresLeader: Bool {
        if case .request(.status) = kind { return false }
        return true
    }
}
