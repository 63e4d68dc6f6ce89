// One attempt of an operation on one endpoint: a libcurl easy handle, the HTTP request it sends,
// and what it has received. A unary answer is kept whole (up to the bound) until the transfer
// ends; a watch's stream is cut into messages as it arrives and handed to the driver.
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
    let easy: UnsafeMutableRawPointer
    unowned let driver: Driver
    private var headers: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
    private let maxResponseBytes: Int
    /// A unary answer, as received.
    private(set) var body: [UInt8] = []
    /// A watch's stream, cut into messages.
    private var framer: JSONObjectFramer
    private(set) var tooLarge = false
    var paused = false
    var verdict: Verdict?

    init(_ operation: Operation, endpointIndex: Int, endpoint: String, driver: Driver, token: String?,
         configuration: EtcdConfiguration) {
        self.operation = operation
        self.endpointIndex = endpointIndex
        self.endpoint = endpoint
        self.driver = driver
        maxResponseBytes = configuration.maxResponseBytes
        framer = JSONObjectFramer(maxBytes: configuration.maxResponseBytes)
        errorBuffer.initialize(to: 0)
        guard let easy = obs_curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        self.easy = easy

        var lines = ["Content-Type: application/json", "Expect:"]
        if let token, !token.isEmpty { lines.append("Authorization: \(token)") }
        // etcd's "require leader" metadata: a member without a leader refuses at once (unary
        // calls) or ends the stream (watches) instead of waiting or staying silent.
        if operation.requiresLeader { lines.append("Grpc-Metadata-hasleader: true") }
        for line in lines { headers = obs_curl_slist_append(headers, line) }

        obs_curl_setopt_string(easy, CURLOPT_URL, endpoint + operation.call.path)
        obs_curl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        obs_curl_setopt_long(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        obs_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        obs_curl_setopt_slist(easy, CURLOPT_HTTPHEADER, headers)
        obs_curl_setopt_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(operation.call.body.count))
        operation.call.body.withUnsafeBytes { bytes in
            _ = obs_curl_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
        }
        obs_curl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        driver.sockets.adopt(easy)
        obs_curl_setopt_write_function(easy, { data, size, count, context in
            guard let context else { return 0 }
            let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
            return transfer.receive(UnsafeRawBufferPointer(start: data, count: size * count))
        })
        obs_curl_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(self).toOpaque())

        let left = max(1, operation.deadline.millisecondsLeft)
        obs_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, min(left, configuration.connectTimeout.milliseconds))
        // A watch lasts as long as it is wanted: its setup deadline is the driver's to keep.
        if !operation.isWatch { obs_curl_setopt_long(easy, CURLOPT_TIMEOUT_MS, left) }
        obs_curl_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
        obs_curl_setopt_long(easy, CURLOPT_TCP_KEEPIDLE, configuration.keepAliveSeconds)
        obs_curl_setopt_long(easy, CURLOPT_TCP_KEEPINTVL, configuration.keepAliveSeconds)
        if let caFile = configuration.caFile { obs_curl_setopt_string(easy, CURLOPT_CAINFO, caFile) }
        if let certFile = configuration.certFile { obs_curl_setopt_string(easy, CURLOPT_SSLCERT, certFile) }
        if let keyFile = configuration.keyFile { obs_curl_setopt_string(easy, CURLOPT_SSLKEY, keyFile) }
    }

    deinit {
        obs_curl_easy_cleanup(easy)
        obs_curl_slist_free_all(headers)
        errorBuffer.deallocate()
    }

    /// libcurl's message for a failed transfer: the details when it left some.
    func errorMessage(_ code: CURLcode) -> String {
        let details = String(cString: errorBuffer)
        return details.isEmpty ? String(cString: obs_curl_easy_strerror(code)) : details
    }

    var httpStatus: Int {
        var status = 0
        obs_curl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return status
    }

    /// Whether the request may have reached the member: a connection was made for it, or bytes of
    /// it were sent (over a connection reused from the pool, whose connect time is 0). A request
    /// that did neither reached no one and may go to another member.
    var connected: Bool {
        var microseconds: curl_off_t = 0
        obs_curl_getinfo_offset(easy, CURLINFO_CONNECT_TIME_T, &microseconds)
        var requestBytes = 0
        obs_curl_getinfo_long(easy, CURLINFO_REQUEST_SIZE, &requestBytes)
        return microseconds > 0 || requestBytes > 0
    }

    /// Bytes from libcurl. A unary answer over the bound stops the transfer (0 makes libcurl fail
    /// it with CURLE_WRITE_ERROR); a watch hands each whole message over, or pauses while the
    /// round's completions reach their bound (libcurl keeps these bytes and offers them again on
    /// resume).
    private func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard operation.isWatch else {
            guard body.count + bytes.count <= maxResponseBytes else {
                tooLarge = true
                return 0
            }
            body.append(contentsOf: bytes)
            return bytes.count
        }
        guard verdict == nil else { return bytes.count }
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
}
