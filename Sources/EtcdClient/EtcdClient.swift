// An asynchronous etcd v3 client over etcd's JSON gateway, made for a single-threaded event loop:
// the loop submits requests and watches and gets an ID back at once; a thread of the client's own
// does the I/O through libcurl and queues the answers (completions), announced on `completionFD`,
// an eventfd for the loop's epoll set. The loop then calls `takeCompletions()`. Nothing the loop
// calls waits on the network: each call takes a mutex held only to move commands or completions.
import CCurl
import Glibc
import Synchronization

/// An etcd v3 client whose requests never block the calling thread.
public final class EtcdClient: Sendable {
    public let configuration: EtcdConfiguration
    private let mailbox: Mailbox
    private let thread: Mutex<pthread_t?>

    /// Starts the client's thread; nothing is sent until the first request.
    public init(_ configuration: EtcdConfiguration) throws(EtcdError) {
        var configuration = configuration
        try configuration.validate()
        configuration.endpoints = configuration.endpoints.map { $0.hasSuffix("/") ? String($0.dropLast()) : $0 }
        guard curlReady else { throw .invalidConfiguration("libcurl could not be initialised") }
        guard let multi = curl_multi_init() else { throw .invalidConfiguration("curl_multi_init failed") }
        let mailbox: Mailbox
        do {
            mailbox = try Mailbox(multi: MultiHandle(pointer: multi), firstEndpoint: configuration.endpoints[0],
                                  maxQueuedBytes: configuration.maxQueuedBytes)
        } catch {
            curl_multi_cleanup(multi)
            throw error
        }
        self.configuration = configuration
        self.mailbox = mailbox
        let worker = Worker(mailbox: mailbox, configuration: configuration)
        var thread = pthread_t()
        let context = Unmanaged.passRetained(worker).toOpaque()
        let rc = pthread_create(&thread, nil, { context in
            Unmanaged<Worker>.fromOpaque(context!).takeRetainedValue().run()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<Worker>.fromOpaque(context).release()
            curl_multi_cleanup(multi)
            throw .invalidConfiguration("pthread_create failed: \(String(cString: strerror(rc)))")
        }
        self.thread = Mutex(thread)
    }

    deinit { close() }

    /// Readable when completions are queued: add it to the loop's epoll set, then call
    /// `takeCompletions()`.
    public var completionFD: Int32 { mailbox.completionFD }

    /// Sends a request; its answer arrives as one `.response` completion, within `timeout`
    /// (default: the configuration's request timeout).
    public func submit(_ request: EtcdRequest, timeout: Duration? = nil) -> EtcdRequestID {
        let id = mailbox.newID()
        if !mailbox.send(.request(id, request, timeout: timeout ?? configuration.requestTimeout)) {
            mailbox.deliver(.response(id, .failure(.closed)))
        }
        return id
    }

    /// Starts a watch; its updates arrive as `.watch` completions until one that ends it
    /// (`compacted`, `failed`) or `cancelWatch`.
    public func watch(_ request: WatchRequest) -> EtcdRequestID {
        let id = mailbox.newID()
        if !mailbox.send(.watch(id, request)) {
            mailbox.deliver(.watch(id, .failed(.closed)))
        }
        return id
    }

    /// Ends a watch. No update of it is returned by `takeCompletions()` after this call.
    public func cancelWatch(_ id: EtcdRequestID) {
        _ = mailbox.send(.cancelWatch(id))
    }

    /// The completions queued since the last call, in the order they happened.
    public func takeCompletions() -> [EtcdCompletion] { mailbox.take() }

    /// The endpoint requests go to first: the last that answered.
    public var currentEndpoint: String { mailbox.state.withLock { $0.currentEndpoint } }

    /// The estimated bytes of the completions waiting to be taken.
    public var queuedBytes: Int { mailbox.state.withLock { $0.completionBytes } }

    /// Stops the client's thread; what was under way is answered `closed`. Later requests are
    /// answered `closed` at once.
    public func close() {
        guard let running = thread.withLock({ thread -> pthread_t? in
            defer { thread = nil }
            return thread
        }) else { return }
        _ = mailbox.send(.stop)
        pthread_join(running, nil)
        mailbox.state.withLock { $0.closed = true }
        curl_multi_cleanup(mailbox.multi.pointer)
    }
}

/// libcurl's global set-up, done once before the first client: not thread-safe in older versions.
private let curlReady: Bool = curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
