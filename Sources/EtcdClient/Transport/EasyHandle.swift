// A libcurl easy handle with the options every request shares, set once, and the header lists
// requests share. A unary request's handle goes back to the driver's spares when its transfer is
// done, and the next request sets only what is its own (URL, headers, body, timeouts, the
// transfer its bytes go to): a fresh handle for each request cost its making, a dozen options set
// and its buffers allocated again (about 2-3 µs of libcurl's CPU per request, measured).
import CCurl

final class EasyHandle {
    /// How a transfer speaks HTTP.
    enum Version: Equatable {
        /// HTTP/1.1: the JSON gateway.
        case http1
        /// HTTP/2 over TLS, agreed in the handshake (ALPN).
        case http2TLS
        /// HTTP/2 over plain TCP on a new connection, with prior knowledge (a plain-TCP gRPC server
        /// takes nothing else). libcurl 7.88 (Debian 12's) breaks a transfer with prior knowledge
        /// that it puts on a connection from its pool (curl PR #10643, fixed in 8.0), so such a
        /// transfer always makes a new connection; after it, the connection rests in the pool.
        case http2PriorKnowledge
        /// HTTP/2 over plain TCP on an idle connection from the pool that already speaks it (the
        /// driver's `idleHTTP2` says when there should be one). Should libcurl have none, it asks
        /// over a new connection in HTTP/1.1 with an upgrade etcd does not take: the member
        /// answers 404 without doing anything, the transfer stops at its status line (which
        /// closes that connection) and the driver sends the request again with prior knowledge.
        case http2Pooled
    }

    let easy: UnsafeMutableRawPointer
    /// What the handle is set to (nil: nothing yet).
    private var version: Version?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))

    /// The driver's TLS generation when the handle was made: a handle of an older one is not reused.
    let tlsGeneration: Int

    init(_ configuration: EtcdConfiguration, sockets: MultiSocket, tlsGeneration: Int) {
        self.tlsGeneration = tlsGeneration
        guard let easy = obs_curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        self.easy = easy
        errorBuffer.initialize(to: 0)
        obs_curl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        obs_curl_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        // Straight to the endpoints, whatever proxy the environment names: libcurl otherwise takes
        // http_proxy, https_proxy and all_proxy (a desktop's or a build machine's, meant for the
        // web) for etcd's members too, where a cluster's traffic does not belong and gRPC's plain
        // HTTP/2 cannot pass (a proxy in front of etcd is an endpoint of its own). An empty proxy
        // disables them; "no proxy for any host" also spares libcurl reading no_proxy and the
        // others from the environment at every request.
        obs_curl_setopt_string(easy, CURLOPT_PROXY, "")
        obs_curl_setopt_string(easy, CURLOPT_NOPROXY, "*")
        obs_curl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)
        obs_curl_setopt_write_function(easy, { data, size, count, context in
            guard let context else { return 0 }
            let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
            return transfer.receive(UnsafeRawBufferPointer(start: data, count: size * count))
        })
        obs_curl_setopt_header_function(easy, { data, size, count, context in
            guard let context else { return 0 }
            let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
            return transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: size * count)) ? size * count : 0
        })
        obs_curl_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1)
        obs_curl_setopt_long(easy, CURLOPT_TCP_KEEPIDLE, configuration.keepAliveSeconds)
        obs_curl_setopt_long(easy, CURLOPT_TCP_KEEPINTVL, configuration.keepAliveSeconds)
        _ = Self.setTLS(easy, configuration)
        sockets.adopt(easy)
    }

    /// Sets the handle's CA, client certificate and key, from files or bytes; the first option
    /// libcurl refused, if any. Given a CA, libcurl trusts it alone: without clearing its
    /// built-in CA directory (Debian's libcurl searches /etc/ssl/certs), every CA of the system
    /// would be trusted beside it. Bytes are copied by libcurl; a handle whose certificate
    /// differs is never given a connection made with another (libcurl compares them).
    static func setTLS(_ easy: UnsafeMutableRawPointer, _ configuration: EtcdConfiguration) -> CURLoption? {
        var refused: CURLoption?
        func check(_ code: CURLcode, _ option: CURLoption) { if code != CURLE_OK, refused == nil { refused = option } }
        func setBytes(_ option: CURLoption, _ bytes: [UInt8]) {
            bytes.withUnsafeBytes { raw in
                var blob = curl_blob(data: UnsafeMutableRawPointer(mutating: raw.baseAddress), len: raw.count,
                                     flags: UInt32(CURL_BLOB_COPY))
                check(withUnsafeMutablePointer(to: &blob) { obs_curl_setopt_pointer(easy, option, $0) }, option)
            }
        }
        if configuration.caFile != nil || configuration.tls.ca != nil {
            check(obs_curl_setopt_pointer(easy, CURLOPT_CAPATH, nil), CURLOPT_CAPATH)
        }
        if let caFile = configuration.caFile { check(obs_curl_setopt_string(easy, CURLOPT_CAINFO, caFile), CURLOPT_CAINFO) }
        if let ca = configuration.tls.ca {
            check(obs_curl_setopt_pointer(easy, CURLOPT_CAINFO, nil), CURLOPT_CAINFO)
            setBytes(CURLOPT_CAINFO_BLOB, ca)
        }
        if let certFile = configuration.certFile { check(obs_curl_setopt_string(easy, CURLOPT_SSLCERT, certFile), CURLOPT_SSLCERT) }
        if let certificate = configuration.tls.certificate { setBytes(CURLOPT_SSLCERT_BLOB, certificate) }
        if let keyFile = configuration.keyFile { check(obs_curl_setopt_string(easy, CURLOPT_SSLKEY, keyFile), CURLOPT_SSLKEY) }
        if let key = configuration.tls.key { setBytes(CURLOPT_SSLKEY_BLOB, key) }
        return refused
    }

    /// nil when libcurl takes `configuration`'s TLS options; else why not.
    static func tlsUnsupported(_ configuration: EtcdConfiguration) -> String? {
        guard let easy = obs_curl_easy_init() else { return "curl_easy_init failed: out of memory" }
        defer { obs_curl_easy_cleanup(easy) }
        guard let option = setTLS(easy, configuration) else { return nil }
        return "this host's libcurl does not take TLS option \(option.rawValue) (certificates given as bytes need libcurl 7.77 with OpenSSL)"
    }

    deinit {
        obs_curl_easy_cleanup(easy)
        errorBuffer.deallocate()
    }

    /// Sets what is the request's own. A timeout of 0 is none (a watch's).
    func prepare(url: String, headers: HeaderList, body: [UInt8], for transfer: Transfer,
                 connectTimeoutMilliseconds: Int, timeoutMilliseconds: Int, version: Version) {
        errorBuffer[0] = 0
        obs_curl_setopt_string(easy, CURLOPT_URL, url)
        obs_curl_setopt_slist(easy, CURLOPT_HTTPHEADER, headers.list)
        obs_curl_setopt_offset(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count))
        body.withUnsafeBytes { bytes in
            _ = obs_curl_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress))
        }
        obs_curl_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(transfer).toOpaque())
        obs_curl_setopt_pointer(easy, CURLOPT_HEADERDATA, Unmanaged.passUnretained(transfer).toOpaque())
        if version != self.version {
            self.version = version
            let httpVersion = switch version {
            case .http1: CURL_HTTP_VERSION_1_1
            case .http2TLS: CURL_HTTP_VERSION_2TLS
            case .http2PriorKnowledge: CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE
            case .http2Pooled: CURL_HTTP_VERSION_2_0
            }
            obs_curl_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(httpVersion))
            obs_curl_setopt_long(easy, CURLOPT_FRESH_CONNECT, version == .http2PriorKnowledge ? 1 : 0)
            // Over HTTP/2 libcurl 7.88 reads a connection 32 KiB at a time and hands a stream's
            // bytes over through this buffer: one at least as large takes every read whole, so
            // that no rest waits in libcurl for the transfer to run again (Driver's
            // collectGRPCWatchLeftovers is the net beneath).
            obs_curl_setopt_long(easy, CURLOPT_BUFFERSIZE, version == .http1 ? 16 << 10 : 64 << 10)
        }
        obs_curl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, connectTimeoutMilliseconds)
        obs_curl_setopt_long(easy, CURLOPT_TIMEOUT_MS, timeoutMilliseconds)
    }

    /// libcurl's message for a failed transfer: the details when it left some.
    func errorMessage(_ code: CURLcode) -> String {
        let details = String(cString: errorBuffer)
        return details.isEmpty ? String(cString: obs_curl_easy_strerror(code)) : details
    }
}

/// The request headers of one kind of request (with or without etcd's "require leader", with the
/// token of the moment), shared by the transfers that send them: freed with the last of them.
final class HeaderList {
    let list: UnsafeMutablePointer<curl_slist>?

    init(api: EtcdAPI, token: String?, requiresLeader: Bool) {
        var lines: [String]
        switch api {
        case .json:
            lines = ["Content-Type: application/json", "Expect:"]
            if let token, !token.isEmpty { lines.append("Authorization: \(token)") }
            // etcd's "require leader" metadata: a member without a leader refuses at once (unary
            // calls) or ends the stream (watches) instead of waiting or staying silent.
            if requiresLeader { lines.append("Grpc-Metadata-hasleader: true") }
        case .grpc:
            // The same metadata as gRPC headers; "te: trailers" is gRPC's own requirement.
            lines = ["Content-Type: application/grpc", "TE: trailers", "Expect:"]
            if let token, !token.isEmpty { lines.append("token: \(token)") }
            if requiresLeader { lines.append("hasleader: true") }
        }
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines { list = obs_curl_slist_append(list, line) }
        self.list = list
    }

    deinit { obs_curl_slist_free_all(list) }
}
