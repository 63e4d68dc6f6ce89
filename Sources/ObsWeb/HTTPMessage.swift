/// One HTTP request as the routes see it: parsed by libmicrohttpd, with no socket attached, so that
/// the routes are tested without one.
struct HTTPRequest: Sendable {
    var method: String
    var path: String
    /// The query string's arguments, decoded.
    var query: [String: String] = [:]
    /// Header fields by lowercased name.
    var headers: [String: String] = [:]
    var body: [UInt8] = []
    /// The body was longer than the server accepts; `body` holds only its start.
    var bodyTooLarge = false

    init(method: String, path: String, query: [String: String] = [:], headers: [String: String] = [:], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }
}

/// A body written as it is produced (Server-Sent Events): the server calls `read` from the
/// connection's own thread whenever the client can take more, and `close` once when it is done.
protocol StreamingBody: AnyObject, Sendable {
    /// Fills `buffer` with at least one byte and returns the count, waiting as long as it must;
    /// nil ends the body.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int?
    /// The client went away or the server stops: `read` will not be called again.
    func close()
}

/// One HTTP response.
struct HTTPResponse: Sendable {
    enum Body: Sendable {
        case bytes([UInt8])
        case stream(any StreamingBody)
    }

    var status: Int
    var headers: [(name: String, value: String)]
    var body: Body

    init(status: Int, headers: [(name: String, value: String)] = [], body: Body = .bytes([])) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `text` as `contentType`.
    init(status: Int, contentType: String, _ text: String) {
        self.init(status: status, headers: [("Content-Type", contentType)], body: .bytes(Array(text.utf8)))
    }
}
