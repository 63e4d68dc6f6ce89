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
    private(set) var tooLarge = false
    var paused = false
    var verdict: Verdict?

    init(_ operation: Operation, endpointIndex: Int, endpoint: String, driver: Driver, handle: EasyHandle,
         headers: HeaderList, configuration: EtcdConfiguration) {
        self.operation = operation
        self.endpointIndex = endpointIndex
        self.endpoint = endpoint
        self.driver = driver
        self.handle = handle
        self.headers = headers
        maxResponseBytes = configuration.maxResponseBytes
        framer = JSONObjectFramer(maxBytes: configuration.maxResponseBytes)
        let left = max(1, operation.deadline.millisecondsLeft)
        // A watch lasts as long as it is wanted: its setup deadline is the driver's to keep.
        handle.prepare(url: endpoint + operation.call.path, headers: headers, body: operation.call.body, for: self,
                       connectTimeoutMilliseconds: min(left, configuration.connectTimeout.milliseconds),
                       timeoutMilliseconds: operation.isWatch ? 0 : left)
    }

    /// libcurl's message for a failed transfer: the details when it left some.
    func errorMessage(_ code: CURLcode) -> String { handle.errorMessage(code) }

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
