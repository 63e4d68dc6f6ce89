// An asynchronous etcd v3 client, over etcd's gRPC API (HTTP/2) or its JSON gateway (HTTP/1.1),
// made for a single-threaded event loop:
// the loop submits requests and watches and gets an ID back at once; the client does the I/O
// through libcurl's multi interface on the loop's own thread, in the calls the loop makes. Its
// sockets and deadlines are gathered in one epoll set, `completionFD`, which the loop adds to its
// own: when it is readable, the loop calls `takeCompletions()`, which lets libcurl read and write
// what is ready and returns the answers and watch news that came of it. Nothing the loop calls
// waits on the network, and no other thread is involved: a request is written to its socket in
// `submit`, and its answer read in the `takeCompletions` after the socket became readable.
import CCurl
import Glibc

/// An etcd v3 client whose requests never block the calling thread. Not thread-safe: one thread
/// (the loop's) makes every call.
public final class EtcdClient {
    /// What the client was made with, and the TLS material of the last `replaceTLS`.
    public var configuration: EtcdConfiguration { driver.configuration }
    let driver: Driver

    /// Makes the client; nothing is sent until the first request.
    public init(_ configuration: EtcdConfiguration) throws(EtcdError) {
        var configuration = configuration
        try configuration.validate()
        configuration.endpoints = configuration.endpoints.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        if let curlUnavailable { throw .libraryUnavailable(curlUnavailable) }
        if configuration.api == .grpc, obs_curl_has_http2() == 0 {
            throw .libraryUnavailable("this host's libcurl was built without HTTP/2, which etcd's gRPC API needs: "
                                      + "use etcd's JSON gateway (etcd_api = json)")
        }
        if let unsupported = EasyHandle.tlsUnsupported(configuration) { throw .libraryUnavailable(unsupported) }
        driver = try Driver(configuration: configuration)
    }

    /// Replaces the TLS material given as bytes (after certificates were renewed): every
    /// connection made from now on uses the new material, and libcurl gives no request a
    /// connection made with the old. Requests under way and watches finish on their connections.
    public func replaceTLS(_ material: TLSMaterial) throws(EtcdError) {
        var next = configuration
        next.tls = material
        try next.validate()
        if let unsupported = EasyHandle.tlsUnsupported(next) { throw .libraryUnavailable(unsupported) }
        driver.replaceTLS(material)
    }

    deinit { close() }

    /// Readable when the client has something to do (a socket is ready, a deadline passed) or
    /// completions are waiting: add it to the loop's epoll set, then call `takeCompletions()`.
    public var completionFD: Int32 { driver.sockets.fd }

    /// Sends a request; its answer arrives as one `.response` completion, within `timeout`
    /// (default: the configuration's request timeout).
    public func submit(_ request: EtcdRequest, timeout: Duration? = nil) -> EtcdRequestID {
        driver.submit(request, timeout: timeout ?? configuration.requestTimeout)
    }

    /// Starts a watch; its updates arrive as `.watch` completions until one that ends it
    /// (`compacted`, `failed`) or `cancelWatch`.
    public func watch(_ request: WatchRequest) -> EtcdRequestID {
        driver.watch(request)
    }

    /// Ends a watch. No update of it is returned by `takeCompletions()` after this call.
    public func cancelWatch(_ id: EtcdRequestID) {
        driver.cancelWatch(id)
    }

    /// Does the I/O that is ready and returns the completions since the last call, in the order
    /// they happened: at most about `maxBytesPerTake` of them (watches that would hand over more
    /// wait for the next call, and `completionFD` stays readable meanwhile).
    public func takeCompletions() -> [EtcdCompletion] { driver.takeCompletions() }

    /// The endpoint requests go to first: the last that answered.
    public var currentEndpoint: String { driver.currentEndpoint }

    /// The endpoint a watch is on now; nil when it is being set up again or has ended.
    public func endpoint(ofWatch id: EtcdRequestID) -> String? { driver.watches[id]?.endpoint }

    /// The most connections to etcd a client with `configuration` holds at once when it keeps
    /// `watches` watches: a request or a watch has one each while under way, and libcurl keeps
    /// some idle ones for the next requests. (Its epoll set, timer and eventfd are three more
    /// descriptors, open from the start.)
    public static func connectionsAtMost(_ configuration: EtcdConfiguration, watches: Int) -> Int {
        configuration.maxConcurrentRequests + watches + MultiSocket.maxIdleConnections
    }

    /// Requests sent and not answered yet (at most `maxConcurrentRequests`), and requests waiting
    /// for one of them to finish.
    public var requestsUnderWay: (sent: Int, waiting: Int) { (driver.requestsSent, driver.requestsWaiting) }

    /// Ends every transfer; what was under way is answered `closed`. Later requests are answered
    /// `closed` at once.
    public func close() { driver.close() }
}

/// libcurl loaded and set up, once, before the first client (CCurl.h): nil, or why it cannot be.
private let curlUnavailable: String? = obs_curl_load().map { String(cString: $0) }
