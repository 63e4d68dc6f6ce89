import ObsCore

/// A blocking connection to obsd, for one thread at a time: requests with deadlines, and the
/// events of its watches. Requests may be pipelined (`send` many, then `response` each): the daemon
/// answers in order; `pipeline` does that with a bounded number unanswered. Events that arrive
/// while a response is awaited are kept for `nextEvent`.
public final class ObsConnection {
    public let path: String
    private let socket: LineSocket
    private var nextID: Int64 = 1
    /// Requests sent whose answer has not been read yet.
    private var unanswered = 0
    private var events: [WatchEvent] = []
    private var eventsStart = 0
    /// The daemon's `goodbye` reason, once it said goodbye.
    public private(set) var goodbye: String?

    /// How long connecting waits, when the caller gives no deadline, for a daemon that accepts no
    /// connection (its queue of connections to accept is full: it is stopped, stuck or swamped).
    public static let connectTimeout = 10.0

    /// Connects to obsd at `path`. While obsd accepts no connection (its queue of connections
    /// waiting to be accepted is full), it waits until `deadline` (monotonic seconds, as
    /// `monotonicNow()`), then fails with `.timedOut`; without a deadline, for `connectTimeout`,
    /// then fails with `.cannotConnect` and `.notAccepting`. `cancellation`, raised by another
    /// thread, ends that wait at once (`.cannotConnect` with `.cancelled`).
    public init(path: String, deadline: Double? = nil, cancellation: Cancellation? = nil) throws(ClientError) {
        do throws(ConnectFailure) {
            socket = try LineSocket(path: path, deadline: deadline ?? monotonicNow() + Self.connectTimeout,
                                    cancellation: cancellation)
        } catch .notAccepting where deadline != nil {
            throw .timedOut
        } catch {
            throw .cannotConnect(path: path, reason: error)
        }
        self.path = path
    }

    /// The socket's descriptor, to poll(2) alongside others: readable when a message, or the
    /// daemon's close, is there for `nextEvent` or `response` (with a deadline that has passed,
    /// they take it without waiting). Not to be read or written directly.
    public var descriptor: Int32 { socket.fd }

    /// Takes what the daemon has sent, waiting at most `seconds` for something to come, and keeps
    /// it for `response` and `nextEvent`. For a caller held up elsewhere (a slow stdout) with
    /// requests under way: obsd stops reading a connection whose answers wait unread past its
    /// `output_buffer_bytes`, and drops it after `client_timeout`.
    public func takeArrived(waitingAtMost seconds: Double) {
        socket.takeArrived(waitingAtMost: seconds)
    }

    /// Makes a blocked call on another thread return `connectionLost` (used to cancel a watch).
    public func shutDown() { socket.shutDown() }

    /// Whether the last `send` found the connection closed before a byte of its request went out:
    /// the daemon never saw that request, so it is safe to send again on another connection.
    public private(set) var lastSendReachedNoOne = false

    /// Sends a request without waiting for its answer, waiting at most until `deadline` for the
    /// daemon to take it (`.timedOut`). Answers that come meanwhile are kept for `response`.
    ///
    /// A daemon that stopped taking requests (it closed the connection, or is stopping) may still
    /// answer: the requests sent before this one (a daemon that stops reads no more, and answers
    /// what it had read), and this one too (a line over its limit is answered `too_large`, then
    /// closed). Then `send` returns, and `response` hands those answers over in order, then throws
    /// `.connectionLost` for the requests left unanswered. With no answer to wait for, `send`
    /// throws `.connectionLost` itself.
    public func send(_ op: String, _ fields: [String: JSONValue] = [:], deadline: Double? = nil) throws(ClientError) {
        var object = fields
        object["op"] = .string(op)
        object["id"] = .int(nextID)
        nextID += 1
        lastSendReachedNoOne = false
        switch socket.send(Array(JSONValue.object(object).encoded.utf8), deadline: deadline) {
        case .sent:
            unanswered += 1
        case .timedOut:
            throw .timedOut
        case .closed(let partly):
            lastSendReachedNoOne = !partly
            // Not read here: the answers that come belong to their requests, in order (an error
            // among them is that request's, not this one's).
            guard socket.hasUnread || unanswered > 0 else { throw lostAfterGoodbye(deadline: deadline) }
            unanswered += 1
        }
    }

    /// The loss, once the daemon's `goodbye` (which says why) is read, if it comes: a daemon that
    /// is stopping stops reading first and says goodbye a moment later. Waits a second at most.
    private func lostAfterGoodbye(deadline: Double?) -> ClientError {
        let until = min(deadline ?? .infinity, monotonicNow() + 1)
        while goodbye == nil, let (fields, line) = try? readMessage(deadline: until) {
            if fields["event"] != nil { events.append(WatchEvent(fields: fields, line: line)) }
        }
        return lost
    }

    /// How many requests `pipeline` keeps unanswered at most.
    public static let pipelineWindow = 64

    /// Sends `requests` pipelined, at most `window` unanswered at a time, and hands each answer to
    /// `answer` in order, as it comes (`.failure` only for the daemon's error answers, `.server`;
    /// anything else ends the pipeline with its error). So neither side holds more than `window`
    /// answers however many requests there are, and the first answers are out before the last
    /// requests are sent. `deadline` is asked anew for each request and each answer.
    public func pipeline(_ requests: [(op: String, fields: [String: JSONValue])], window: Int = pipelineWindow,
                         deadline: () -> Double?,
                         _ answer: (Int, Result<Response, ClientError>) throws -> Void) throws {
        var answered = 0
        func takeAnswer() throws {
            let result: Result<Response, ClientError>
            do throws(ClientError) {
                result = .success(try response(deadline: deadline()))
            } catch {
                guard case .server = error else { throw error }
                result = .failure(error)
            }
            try answer(answered, result)
            answered += 1
        }
        for (sent, request) in requests.enumerated() {
            while sent - answered >= max(1, window) { try takeAnswer() }
            try send(request.op, request.fields, deadline: deadline())
        }
        while answered < requests.count { try takeAnswer() }
    }

    /// The next response; an error answer throws `.server`.
    public func response(deadline: Double? = nil) throws(ClientError) -> Response {
        while true {
            let (fields, line) = try readMessage(deadline: deadline)
            if fields["event"] != nil {
                events.append(WatchEvent(fields: fields, line: line))
                continue
            }
            unanswered = max(0, unanswered - 1)
            if fields["ok"]?.boolValue == true {
                return Response(fields: fields, line: String(decoding: line, as: UTF8.self))
            }
            throw .server(Self.error(fields["error"]))
        }
    }

    /// Sends a request and waits for its answer.
    @discardableResult
    public func request(_ op: String, _ fields: [String: JSONValue] = [:], deadline: Double? = nil) throws(ClientError) -> Response {
        try send(op, fields, deadline: deadline)
        return try response(deadline: deadline)
    }

    /// The next watch event, or nil when `deadline` passes first. Responses must all have been read.
    public func nextEvent(deadline: Double? = nil) throws(ClientError) -> WatchEvent? {
        if eventsStart < events.count {
            let event = events[eventsStart]
            eventsStart += 1
            if eventsStart == events.count {
                events.removeAll()
                eventsStart = 0
            }
            return event
        }
        do {
            let (fields, line) = try readMessage(deadline: deadline)
            // A stray response (a request sent and not awaited) is not an event.
            if fields["event"] == nil {
                unanswered = max(0, unanswered - 1)
                return try nextEvent(deadline: deadline)
            }
            return WatchEvent(fields: fields, line: line)
        } catch .timedOut {
            return nil
        }
    }

    private var lost: ClientError { .connectionLost(path: path, reason: goodbye) }

    /// The next message that is not a `goodbye` (which is remembered, and the connection then ends).
    private func readMessage(deadline: Double?) throws(ClientError) -> ([String: JSONValue], [UInt8]) {
        while true {
            switch socket.readLine(deadline: deadline) {
            case .timedOut: throw .timedOut
            case .closed: throw lost
            case .line(let line):
                guard case .object(let fields)? = try? JSONValue.parse(line) else { continue }
                if fields["event"]?.stringValue == EventName.goodbye.rawValue {
                    goodbye = fields["reason"]?.stringValue ?? "goodbye"
                    continue
                }
                return (fields, line)
            }
        }
    }

    /// The ObsError an error answer carries.
    public static func error(_ value: JSONValue?) -> ObsError {
        let fields = value?.objectValue ?? [:]
        let code = fields["code"]?.stringValue ?? "internal"
        let message = fields["message"]?.stringValue ?? "the daemon answered an error without a message"
        return ObsError(ObsError.Code(rawValue: code), message,
                        details: fields.filter { $0.key != "code" && $0.key != "message" })
    }
}
