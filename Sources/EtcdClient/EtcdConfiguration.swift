/// How the client talks to etcd.
public enum EtcdAPI: String, Sendable, Hashable, CaseIterable {
    /// etcd's own API: gRPC over HTTP/2 (protobuf messages). What etcd's own clients speak, and
    /// the cheapest for etcd: about a third less of its CPU per write than the gateway.
    case grpc
    /// etcd's JSON gateway over HTTP/1.1 (`/v3/kv/put`...): for a path to etcd that carries only
    /// HTTP/1.1, or a libcurl built without HTTP/2. Every gateway request costs etcd a JSON
    /// conversion and a second gRPC call inside the member.
    case json
}

/// Where etcd is and how to talk to it. Every limit has its default here.
public struct EtcdConfiguration: Sendable, Hashable {
    /// The API the client speaks.
    public var api: EtcdAPI = .grpc
    /// The members' client URLs, `http://host:port` or `https://host:port`, tried in turn.
    public var endpoints: [String]
    /// The CA that signed the members' certificates (PEM): the only CA trusted then. nil: the
    /// system's CAs.
    public var caFile: String?
    /// The client certificate and its key (PEM), for members started with --client-cert-auth.
    public var certFile: String?
    public var keyFile: String?
    /// The same as bytes, for a caller that reads the files itself (obsd does, under its rules for
    /// the files it reads): each one given here takes the place of its file, which must then be nil.
    public var tls = TLSMaterial()
    /// etcd's user and password, when etcd runs with authentication enabled.
    public var user: String?
    public var password: String?
    /// How long a request may take, across every endpoint it is tried on.
    public var requestTimeout: Duration = .seconds(5)
    /// How long connecting to one endpoint may take before the next is tried.
    public var connectTimeout: Duration = .seconds(1)
    /// The largest answer, or message of a watch, accepted; a larger one is an error.
    public var maxResponseBytes = 64 << 20
    /// The most bytes of completions one `takeCompletions` returns (beyond what one read of a
    /// socket completes): watches that would hand over more wait for the next call (etcd and TCP
    /// hold their events meanwhile), so that one call's work stays short and the loop serves its
    /// other clients between calls.
    public var maxBytesPerTake = 1 << 20
    /// The most bytes of messages a gRPC watch keeps that `takeCompletions` had no room for
    /// (`maxBytesPerTake`): past it the watch stops reading, hands over what it kept, then ends
    /// `watchBehind`, to be watched again from the last revision taken. (The gateway's watches
    /// pause instead.)
    public var maxWatchBacklogBytes = 32 << 20
    /// The most requests (not watches) under way at once. Each has a connection of its own
    /// (libcurl 7.88 multiplexes HTTP/2 streams unreliably: MultiSocket.swift), so this bounds the
    /// connections a client opens to etcd however many requests its callers make at once; later
    /// ones wait, in the order submitted, within their own deadline.
    public var maxConcurrentRequests = 64
    /// Seconds between TCP keepalive probes on idle connections, so that a watch to a host that
    /// vanished from the network is cut rather than silent.
    public var keepAliveSeconds = 5

    public init(endpoints: [String]) {
        self.endpoints = endpoints
    }

    /// Checks what can be checked without a connection.
    public func validate() throws(EtcdError) {
        guard !endpoints.isEmpty else { throw .invalidConfiguration("no endpoint") }
        for endpoint in endpoints where !(endpoint.hasPrefix("http://") || endpoint.hasPrefix("https://")) {
            throw .invalidConfiguration("endpoint \(endpoint) is not an http:// or https:// URL")
        }
        guard (tls.ca == nil || caFile == nil) && (tls.certificate == nil || certFile == nil) && (tls.key == nil || keyFile == nil) else {
            throw .invalidConfiguration("a CA, certificate or key is given both as a file and as bytes")
        }
        guard (certFile == nil && tls.certificate == nil) == (keyFile == nil && tls.key == nil) else {
            throw .invalidConfiguration("a client certificate needs its key, and a key its certificate")
        }
        guard (user == nil) == (password == nil) else {
            throw .invalidConfiguration("a user needs a password, and a password a user")
        }
        guard requestTimeout > .zero, connectTimeout > .zero else {
            throw .invalidConfiguration("timeouts must be positive")
        }
        guard maxResponseBytes > 0, maxBytesPerTake > 0, maxWatchBacklogBytes > 0 else {
            throw .invalidConfiguration("byte bounds must be positive")
        }
        guard maxConcurrentRequests > 0 else { throw .invalidConfiguration("maxConcurrentRequests must be positive") }
    }
}

/// TLS certificates and a key as their bytes (PEM), as a file holds them.
public struct TLSMaterial: Sendable, Hashable {
    /// The CA certificates that signed the members' certificates: the only ones trusted then.
    public var ca: [UInt8]?
    /// The client certificate (and the chain to its CA, if any).
    public var certificate: [UInt8]?
    /// The client certificate's private key.
    public var key: [UInt8]?

    public init(ca: [UInt8]? = nil, certificate: [UInt8]? = nil, key: [UInt8]? = nil) {
        self.ca = ca
        self.certificate = certificate
        self.key = key
    }
}
