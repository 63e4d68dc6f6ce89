// One attempt of an operation on one endpoint: a libcurl easy handle, the HTTP request it sends,
// and what it has received. A unary answer is kept whole (up to the bound) until the transfer
// ends; a watch's stream is cut into messages as it arrives (JSON objects from the gateway, gRPC
// frames from etcd's own API) and handed to the driver. For gRPC, the call's outcome comes in
// header or trailer lines (`grpc-status`, `grpc-message`), gathered as they arrive.
import CCurl

final class Transfer {
    /// What the driver decided while the transfer was still running (in a libcurl callback, where
    /// it may not remove the handle): carried out once libcurl returns.
    enum Verdict {
        /// The watch has reported its end; nothing more to do.
        case ended
        /// The attempt failed in a way another endpoint may not: try the next one.
        case tryNext(String)
        /// etcd refused the token: fetch a new one, then try again.
        case reauthenticate
    }

    let operation: Operation
    let endpointIndex: Int
    let endpoint: String
    /// The easy handle, the transfer's until it is done; a unary request's then goes back to the
    /// driver's spares (EasyHandle.swift).
    let handle: EasyHandle
    var easy: UnsafeMutableRawPointer { handle.easy }
    unowned let driver: Driver
    /// Kept for as long as libcurl may send them.
    private let headers: HeaderList
    private let maxResponseBytes: Int
    /// A unary answer, as received.
    private(set) var body: [UInt8] = []
    /// A watch's stream, cut into messages.
    private var framer: JSONObjectFramer
    private var grpcFramer: GRPCFramer
    /// A gRPC call answered in HTTP/1.1 (and stopped): nothing was done; send it again.
    private(set) var answeredInHTTP1 = false
    /// gRPC's outcome of the call, once its trailers (or headers) came.
    var grpcStatus = GRPCStatus()
    /// A watch's events of the last revision of a fragment, waiting for the next fragment (which
    /// may hold more of that revision).
    var heldEvents: [WatchEvent] = []
    /// How the transfer speaks HTTP (EasyHandle.Version).
    let version: EasyHandle.Version
    private(set) var tooLarge = false
    /// A gRPC watch's messages that the round's completions had no room for, oldest first, from
    /// `backlogStart` on (the ones before it were handed over).
    private var backlog: [ArraySlice<UInt8>] = []
    private var backlogStart = 0
    private var backlogBytes = 0
    /// A gRPC watch's events of a message larger than a round's completions take (up to 1,000
    /// revisions, up to `maxResponseBytes`), cut at revision boundaries, oldest first: handed
    /// over a round's worth at a time, before any later message (Driver.deliverWatchEvents).
    var eventSlices: [(revision: Int64, events: ArraySlice<WatchEvent>)] = []
    /// How the stream ended, told once the backlog before it is handed over.
    private var pendingFailure: EtcdError?
    /// A gRPC watch's stream stopped because its backlog passed `maxBacklogBytes`: out of
    /// libcurl (Driver.stopStream), it hands over its backlog, then ends `watchBehind`.
    private(set) var streamStopped = false
    private let maxBacklogBytes: Int
    /// A gRPC watch received bytes in this `takeCompletions` (Driver.takeCompletions).
    var receivedInCall = false
    var paused = false
    var verdict: Verdict?

    init(_ operation: Operation, endpointIndex: Int, endpoint: String, driver: Driver, handle: EasyHandle,
         headers: HeaderList, version: EasyHandle.Version, configuration: EtcdConfiguration) {
        self.operation = operation
        self.endpointIndex = endpointIndex
        self.endpoint = endpoint
        self.driver = driver
        self.handle = handle
        self.headers = headers
        maxResponseBytes = configuration.maxResponseBytes
        maxBacklogBytes = configuration.maxWatchBacklogBytes
        framer = JSONObjectFramer(maxBytes: configuration.maxResponseBytes)
        grpcFramer = GRPCFramer(maxBytes: configuration.maxResponseBytes)
        self.version = version
        let left = max(1, operation.deadline.millisecondsLeft)
        // A watch lasts as long as it is wanted: its setup deadline is the driver's to keep.
        handle.prepare(url: endpoint + operation.call.path, headers: headers, body: operation.call.body, for: self,
                       connectTimeoutMilliseconds: min(left, configuration.connectTimeout.milliseconds),
                       timeoutMilliseconds: operation.isWatch ? 0 : left, version: version)
    }

    /// The HTTP version of the answer: 2 for HTTP/2, 1 for HTTP/1.x, 0 before any answer.
    var answeredHTTPVersion: Int {
        var version = 0
        obs_curl_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        switch version {
        case Int(CURL_HTTP_VERSION_2_0): return 2
        case Int(CURL_HTTP_VERSION_1_0), Int(CURL_HTTP_VERSION_1_1): return 1
        default: return version == 0 ? 0 : 2
        }
    }

    /// One header or trailer line; false stops the transfer.
    func receiveHeader(_ line: UnsafeRawBufferPointer) -> Bool {
        guard operation.call.isGRPC else { return true }
        if version == .http2Pooled, line.starts(with: "HTTP/1.".utf8) {
            // libcurl found no HTTP/2 connection to reuse and asked over a new one in HTTP/1.1
            // (EasyHandle.Version.http2Pooled): the member's 404 did nothing. Stopping here
            // closes that connection, so that no later request is sent over it.
            answeredInHTTP1 = true
            return false
        }
        grpcStatus.take(line)
        return true
    }

    /// libcurl's message for a failed transfer: the details when it left some.
    func errorMessage(_ code: CURLcode) -> String { handle.errorMessage(code) }

    var httpStatus: Int {
        var status = 0
        obs_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return status
    }

    /// What libcurl's failure `code` tells of the request: whether it may have reached the member
    /// (TransportFailure.swift).
    func failure(_ code: CURLcode) -> TransportFailure {
        func offset(_ info: CURLINFO) -> Int {
            var value: curl_off_t = 0
            obs_curl_getinfo_offset(easy, info, &value)
            return Int(value)
        }
        func long(_ info: CURLINFO) -> Int {
            var value = 0
            obs_curl_getinfo_long(easy, info, &value)
            return value
        }
        return TransportFailure(code: code, message: errorMessage(code), requestBytes: long(CURLINFO_REQUEST_SIZE),
                                uploadBytes: offset(CURLINFO_SIZE_UPLOAD_T),
                                responseBytes: long(CURLINFO_HEADER_SIZE) + offset(CURLINFO_SIZE_DOWNLOAD_T),
                                handshakeCompleted: offset(CURLINFO_APPCONNECT_TIME_T) > 0)
    }

    /// Bytes from libcurl. A unary answer over the bound stops the transfer (0 makes libcurl fail
    /// it with CURLE_WRITE_ERROR); a watch hands each whole message over, or pauses while the
    /// round's completions reach their bound (libcurl keeps these bytes and offers them again on
    /// resume).
    func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard operation.isWatch else {
            guard body.count + bytes.count <= maxResponseBytes else {
                tooLarge = true
                return 0
            }
            body.append(contentsOf: bytes)
            return bytes.count
        }
        guard verdict == nil else { return bytes.count }
        if operation.call.isGRPC { return receiveGRPCStream(bytes) }
        guard driver.roomForWatches() else {
            paused = true
            return Int(CURL_WRITEFUNC_PAUSE)
        }
        let messages: [[UInt8]]
        do {
            messages = try framer.append(bytes)
        } catch .tooLarge {
            driver.endWatch(self, .failed(.responseTooLarge(limit: maxResponseBytes)))
            return bytes.count
        } catch {
            driver.endWatch(self, .failed(.malformedResponse("a watch stream that is not JSON objects")))
            return bytes.count
        }
        for message in messages where verdict == nil {
            driver.watchMessage(message, from: self)
        }
        return bytes.count
    }

    // MARK: - A gRPC watch's stream

    /// A gRPC watch's bytes: its messages go to the driver while the round's completions have
    /// room, and wait in `backlog` otherwise. The stream is never paused: libcurl 7.88 could
    /// leave a paused HTTP/2 stream stalled for good once resumed (its window never opened
    /// again, or its buffered bytes never handed over), where an HTTP/1.1 transfer resumes
    /// cleanly. A backlog past `maxBacklogBytes` (its owner takes the messages slower than etcd
    /// sends them: a host applying a long history of large values) stops the stream instead:
    /// the transfer leaves libcurl, which reads no more of it, and what the backlog holds is
    /// handed over as room comes, then the watch ends `watchBehind`, for its owner to watch
    /// again at once from the last revision it took. Memory stays bounded, nothing is lost, and
    /// etcd sends again only what was on its way, where dropping the backlog had it send up to
    /// `maxBacklogBytes` again every time.
    private func receiveGRPCStream(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard verdict == nil, !streamStopped else { return bytes.count }
        receivedInCall = true
        let messages = grpcFramer.append(bytes)
        for message in messages {
            if backlogStart == backlog.count, eventSlices.isEmpty, driver.roomForWatchMessages() {
                driver.grpcWatchMessage(message, from: self)
                if verdict != nil { break }
            } else {
                backlog.append(message)
                backlogBytes += message.count
                driver.watchesBacklogged = true
                if backlogBytes > maxBacklogBytes {
                    // The messages after this one, and a framing failure after them, come again
                    // on the next watch.
                    streamStopped = true
                    receivedInCall = false
                    pendingFailure = .watchBehind(limit: maxBacklogBytes)
                    driver.stopStream(self)
                    break
                }
            }
        }
        if verdict == nil, !streamStopped, let failure = grpcFramer.failure {
            // After the messages before it, which the backlog may still hold: they go first.
            let error: EtcdError = switch failure {
            case .tooLarge: .responseTooLarge(limit: maxResponseBytes)
            case .compressed: .malformedResponse("a compressed gRPC message, which the client did not ask for")
            }
            if backlogStart == backlog.count, eventSlices.isEmpty {
                driver.endWatch(self, .failed(error))
            } else {
                pendingFailure = error
            }
        }
        return bytes.count
    }

    /// Hands over what waits (the slices of a message's events, then the backlog's messages)
    /// while the round has room; whether some is left.
    func drainBacklog() -> Bool {
        driver.handOverEventSlices(self)
        while eventSlices.isEmpty, backlogStart < backlog.count, verdict == nil, driver.roomForWatchMessages() {
            let message = backlog[backlogStart]
            backlogStart += 1
            backlogBytes -= message.count
            driver.grpcWatchMessage(message, from: self)
        }
        if verdict != nil { eventSlices.removeAll() }
        if verdict != nil || backlogStart == backlog.count {
            clearBacklog()
        } else if backlogStart > 1024, backlogStart > backlog.count / 2 {
            backlog.removeFirst(backlogStart)
            backlogStart = 0
        }
        if verdict == nil, backlogStart == backlog.count, eventSlices.isEmpty, let error = pendingFailure {
            pendingFailure = nil
            driver.endWatch(self, .failed(error))
        }
        return backlogStart < backlog.count || !eventSlices.isEmpty
    }

    private func clearBacklog() {
        backlog.removeAll()
        backlogStart = 0
        backlogBytes = 0
    }
}
