import CMicroHTTPD
import Glibc

/// The HTTP server under `obsctl web`: libmicrohttpd does the protocol (parsing, chunked bodies,
/// keep-alive, timeouts); this class turns its callbacks into one `HTTPRequest` -> `HTTPResponse`
/// call. One thread per connection, so a streaming body may block in `read` until it has bytes.
final class HTTPServer: @unchecked Sendable {
    // @unchecked: `daemon` is written by init and by stop (the owner's thread) only; the rest never changes.
    typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse

    private var daemon: OpaquePointer?
    fileprivate let handler: Handler
    fileprivate let isAuthorized: @Sendable (HTTPRequest) -> Bool
    fileprivate let maxBodyBytes: Int
    fileprivate let authorizedIdleTimeout: UInt32
    fileprivate let connections: ConnectionGuard
    /// Serves on `listeningSocket` (bound and listening; the server owns it from now on). At most
    /// `connectionLimit` connections (each a thread). A connection idle for `idleTimeout` seconds
    /// is closed; once it has sent a request that `isAuthorized` (asked when the request's head is
    /// in, before its body and its answer), for `authorizedIdleTimeout` seconds. Until then it
    /// is also one of at most `connectionsWithoutToken`, and closed `secondsWithoutToken` after it
    /// was accepted, busy or not (`ConnectionGuard`). With `localPeers` (a loopback listener),
    /// the connections of this process's user are closed after other users'.
    init(listeningSocket fd: Int32, maxBodyBytes: Int, connectionLimit: Int, idleTimeout: Int, authorizedIdleTimeout: Int,
         connectionsWithoutToken: Int, secondsWithoutToken: Double, localPeers: Bool,
         isAuthorized: @escaping @Sendable (HTTPRequest) -> Bool, handler: @escaping Handler) throws(WebError) {
        self.handler = handler
        self.isAuthorized = isAuthorized
        self.maxBodyBytes = maxBodyBytes
        self.authorizedIdleTimeout = UInt32(authorizedIdleTimeout)
        connections = localPeers
            ? ConnectionGuard(maxWithoutToken: connectionsWithoutToken, secondsWithoutToken: secondsWithoutToken, isOwnUser: PeerOwner.isOwnUser)
            : ConnectionGuard(maxWithoutToken: connectionsWithoutToken, secondsWithoutToken: secondsWithoutToken)
        let flags = MHD_USE_THREAD_PER_CONNECTION.rawValue | MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_POLL.rawValue
        daemon = obs_mhd_start(flags, fd, accessHandler, Unmanaged.passUnretained(self).toOpaque(), requestCompleted,
                               connectionNotified, UInt32(connectionLimit), UInt32(idleTimeout))
        guard daemon != nil else {
            close(fd)
            throw WebError("cannot start the HTTP server (libmicrohttpd)")
        }
        connections.watch()
    }

    /// Stops accepting, ends every connection and joins their threads. Streaming bodies must
    /// return from `read` for this to finish (WebServer cancels them first).
    func stop() {
        guard let daemon else { return }
        self.daemon = nil
        connections.stop()
        MHD_stop_daemon(daemon)
    }

    deinit { stop() }
}

/// A request being received: its head, and its body so far.
private final class PendingRequest {
    var request: HTTPRequest
    init(_ request: HTTPRequest) { self.request = request }
}

/// libmicrohttpd calls this once with the headers, once per chunk of body, and once more at the
/// end of the body; the response is queued on that last call.
private func accessHandler(_ context: UnsafeMutableRawPointer?, _ connection: OpaquePointer?, _ url: UnsafePointer<CChar>?,
                           _ method: UnsafePointer<CChar>?, _ version: UnsafePointer<CChar>?, _ upload: UnsafePointer<CChar>?,
                           _ uploadSize: UnsafeMutablePointer<Int>?, _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> MHD_Result {
    guard let context, let connection, let url, let method, let uploadSize, let state else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    guard let stored = state.pointee else {
        var request = HTTPRequest(method: String(cString: method), path: String(cString: url))
        collect(connection, .GET_ARGUMENT_KIND) { request.query[$0] = $1 }
        collect(connection, .HEADER_KIND) { request.headers[$0.lowercased()] = $1 }
        // The connection of someone who has the token keeps the longer timeout from now on: an
        // event stream stays quiet between keep-alives, a page between its requests.
        let authorized = server.isAuthorized(request)
        if authorized { _ = obs_mhd_set_timeout(connection, server.authorizedIdleTimeout) }
        server.connections.headReceived(UInt(bitPattern: connection), withToken: authorized)
        state.pointee = Unmanaged.passRetained(PendingRequest(request)).toOpaque()
        return .YES
    }
    let pending = Unmanaged<PendingRequest>.fromOpaque(stored).takeUnretainedValue()
    if uploadSize.pointee > 0 {
        // Past the limit the rest is read and dropped: memory stays bounded, the answer is 413.
        if let upload, !pending.request.bodyTooLarge {
            if pending.request.body.count + uploadSize.pointee > server.maxBodyBytes {
                pending.request.bodyTooLarge = true
                pending.request.body = []
            } else {
                pending.request.body += UnsafeRawBufferPointer(start: upload, count: uploadSize.pointee)
            }
        }
        uploadSize.pointee = 0
        return .YES
    }
    return queue(server.handler(pending.request), on: connection)
}

private func requestCompleted(_ context: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
                              _ state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ reason: MHD_RequestTerminationCode) {
    guard let state, let stored = state.pointee else { return }
    Unmanaged<PendingRequest>.fromOpaque(stored).release()
    state.pointee = nil
}

/// libmicrohttpd accepted a connection, or is done with one (its socket still open): both on its
/// own thread, the one that accepts.
private func connectionNotified(_ context: UnsafeMutableRawPointer?, _ connection: OpaquePointer?,
                                _ socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?, _ code: MHD_ConnectionNotificationCode) {
    guard let context, let connection else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(context).takeUnretainedValue()
    switch code {
    case .CONNECTION_NOTIFY_STARTED: server.connections.started(UInt(bitPattern: connection), socket: obs_mhd_connection_fd(connection))
    case .CONNECTION_NOTIFY_CLOSED: server.connections.closed(UInt(bitPattern: connection))
    @unknown default: break
    }
}

/// Calls `body` with each name and value of one kind (query arguments, headers).
private func collect(_ connection: OpaquePointer, _ kind: MHD_ValueKind, _ body: (String, String) -> Void) {
    withoutActuallyEscaping(body) { body in
        var visitor = body
        withUnsafeMutablePointer(to: &visitor) { pointer in
            _ = MHD_get_connection_values(connection, kind, { context, _, name, value in
                guard let context, let name else { return .YES }
                let visit = context.assumingMemoryBound(to: ((String, String) -> Void).self).pointee
                visit(String(cString: name), value.map { String(cString: $0) } ?? "")
                return .YES
            }, pointer)
        }
    }
}

private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> MHD_Result {
    let made: OpaquePointer?
    switch response.body {
    case .bytes(let bytes):
        made = bytes.withUnsafeBytes {
            MHD_create_response_from_buffer($0.count, UnsafeMutableRawPointer(mutating: $0.baseAddress), .RESPMEM_MUST_COPY)
        }
    case .stream(let stream):
        let box = Unmanaged.passRetained(StreamBox(stream)).toOpaque()
        made = MHD_create_response_from_callback(UInt64.max, 32 << 10, readStream, box, freeStream)
        if made == nil { freeStream(box) }
    }
    guard let made else { return .NO }
    defer { MHD_destroy_response(made) }
    for (name, value) in response.headers { MHD_add_response_header(made, name, value) }
    return MHD_queue_response(connection, UInt32(response.status), made)
}

/// A streaming body, as a class libmicrohttpd can hold by pointer.
private final class StreamBox {
    let stream: any StreamingBody
    init(_ stream: any StreamingBody) { self.stream = stream }
}

private func readStream(_ context: UnsafeMutableRawPointer?, _ position: UInt64, _ buffer: UnsafeMutablePointer<CChar>?, _ max: Int) -> Int {
    guard let context, let buffer, max > 0 else { return -2 }
    let box = Unmanaged<StreamBox>.fromOpaque(context).takeUnretainedValue()
    // -1 is MHD_CONTENT_READER_END_OF_STREAM (a macro Swift does not import).
    return box.stream.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: max)) ?? -1
}

private func freeStream(_ context: UnsafeMutableRawPointer?) {
    guard let context else { return }
    let box = Unmanaged<StreamBox>.fromOpaque(context).takeRetainedValue()
    box.stream.close()
}
