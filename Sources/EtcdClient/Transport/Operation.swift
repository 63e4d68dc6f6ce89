// One request, watch or authentication as the client carries it out: the endpoints it
// has tried, the failures it met, its deadline.

final class Operation {
    enum Kind {
        case request(EtcdRequest)
        case watch(WatchRequest)
        /// Fetching a token for etcd's user and password (the client's own, with no ID).
        case authenticate
        /// A `status` over a new connection to the member whose connection ended right after its
        /// TLS handshake under a write: whether the member refuses the client certificate
        /// (Driver+Outcomes.swift). The client's own, with no ID.
        case probe(HandshakeProbe)
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
    /// An attempt of this write may have reached a member that could apply it (it was sent, then
    /// cut or left unanswered): a write that may be sent again fails over all the same, and its
    /// `unavailable` says so if it comes to that.
    var mayHaveBeenApplied = false

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
        case .watch, .authenticate, .probe: true
        }
    }

    /// Whether etcd may change something for the operation: a write (reads and watches change
    /// nothing, and an authentication nothing that matters here).
    var changesState: Bool {
        switch kind {
        case .request(.range), .request(.status), .watch, .authenticate, .probe: false
        case .request: true
        }
    }

    /// The member may not answer the status when it has no leader (that is what it reports).
    var requiresLeader: Bool {
        switch kind {
        case .request(.status), .probe: false
        default: true
        }
    }
}

/// A write whose connection ended right after its TLS handshake, waiting for a probe of the member
/// to tell whether the member refused the handshake.
final class HandshakeProbe {
    let write: Operation
    let endpointIndex: Int
    let endpoint: String
    /// libcurl's message for the write's failure.
    let failure: String

    init(write: Operation, endpointIndex: Int, endpoint: String, failure: String) {
        self.write = write
        self.endpointIndex = endpointIndex
        self.endpoint = endpoint
        self.failure = failure
    }
}
