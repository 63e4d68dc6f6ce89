import Foundation

/// One connection's state machine, with no I/O: the bytes the client sent in (`receive`), response
/// and event lines out (to its `SessionOutput`). Responses are written in request order; the events a
/// request causes for this session's own watches follow its response.
public final class Session {
    // Its state is read for every request and every loop turn, by the daemon's one thread: where
    // marked `@exclusivity(unchecked)`, with no dynamic exclusivity checks (see Store).

    /// The owner of the ephemeral keys this session sets.
    public let id: UInt64
    let store: Store
    /// What the peer may do; the daemon lowers it when a reload takes access away.
    @exclusivity(unchecked) public var access: Access
    let lines: SessionLines
    /// Splits what the client sends into request lines, and enforces the line limit.
    @exclusivity(unchecked) private var framer: LineFramer
    /// Lines received while requests are held back, handled in order later: while an answer is
    /// pending (cluster mode: `answerLater`), and while the output is over its limit
    /// (`outputDrained`), so that a client pipelining requests without reading the answers (a
    /// thousand `get`s of a 1 MiB value in one 64 KiB read) cannot make obsd queue answers without
    /// bound. The daemon reads nothing more from such a connection meanwhile (`holdsRequests`), so
    /// these are at most what one read brought.
    @exclusivity(unchecked) private var waitingLines: [[UInt8]] = []
    /// The request id's own bytes, for the answer that comes later (`answerLater`) to a request
    /// whose id is a number that re-encodes differently (see `handle(line:)`).
    @exclusivity(unchecked) var pendingIDToken: [UInt8]?
    /// The parts of a `restore` sent with `more: true`, restored with the last part.
    var restoreParts = RestoreParts()
    /// This session's watches, as the store's watch unit keeps them.
    let watchClient: WatchClient
    /// Keys this session set with `ephemeral: true` (it may have lost some to other writers).
    var ephemeralKeys: Set<String> = []
    /// The size at which `ephemeralKeys` next forgets the keys this session no longer owns.
    var ephemeralPruneAt = 1024
    /// Set when the session must be closed after its output is flushed (a line over the limit):
    /// nothing it receives after that is read.
    @exclusivity(unchecked) public private(set) var wantsClose = false
    @exclusivity(unchecked) public private(set) var isClosed = false
    /// Whether the output passed its limit and events are being dropped, or requests wait, until
    /// `outputDrained()`: the daemon disconnects a client that stays so for `client_timeout`.
    public var isOverflowing: Bool { watchClient.overflowed || !waitingLines.isEmpty }
    /// Whether requests received are held back (an answer pending, or the output over its limit):
    /// the daemon reads nothing more from the connection meanwhile.
    public var holdsRequests: Bool { isWaiting || !waitingLines.isEmpty }

    public init(store: Store, access: Access, output: any SessionOutput) {
        self.store = store
        self.access = access
        lines = SessionLines(output: output)
        framer = LineFramer(maxLineBytes: store.configuration.maxLineBytes)
        watchClient = store.watches.register(lines)
        id = store.nextOwnerID
        store.nextOwnerID += 1
        store.openOwners.insert(id)
        store.requestCounters.sessionsOpened += 1
    }

    /// Handles the bytes a client sent: every complete request line among them, in order (a line
    /// cut short waits for the rest). A line over the limit is answered `too_large`, and the
    /// session then wants to be closed (`wantsClose`) and reads nothing more.
    public func receive(bytes: UnsafeRawBufferPointer) {
        guard !isClosed, !wantsClose else { return }
        do throws(LineTooLong) {
            try framer.append(bytes) { line in
                guard !isClosed else { return }
                if holdsRequests || lines.unsentBytes > store.configuration.maxOutputBytes {
                    waitingLines.append(Array(line))
                } else {
                    handle(line: line)
                }
            }
        } catch {
            let error = ObsError(.tooLarge, "request line longer than \(framer.maxLineBytes) bytes", details: ["limit": "max_line_bytes"])
            store.requestCounters.count(error)
            lines.send(LineEncoding.error(id: .null, error))
            wantsClose = true
        }
    }

    /// Handles request text: lines ended by "\n" (a last line without one is taken as ended).
    public func receive(_ text: String) {
        var text = text
        if !text.hasSuffix("\n") { text += "\n" }
        text.withUTF8 { receive(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// One framed request line (without its newline).
    private func handle(line: UnsafeRawBufferPointer) {
        if handleHot(line) { return }
        let request: JSONValue
        do {
            request = try JSONValue.parse(line, maxDepth: store.configuration.maxJSONDepth)
        } catch {
            store.requestCounters.count(error.obsError)
            lines.send(LineEncoding.error(id: .null, error.obsError))
            return
        }
        guard case .object(let object) = request else {
            let error = ObsError(.badJSON, "a request must be a JSON object")
            store.requestCounters.count(error)
            lines.send(LineEncoding.error(id: .null, error))
            return
        }
        store.requestLineBytes = line.count
        defer { store.requestLineBytes = nil }
        // Only a number's value may re-encode to other bytes (a double, or -0): then the answer
        // carries the request's own.
        var idToken: [UInt8]?
        switch object["id"] {
        case .double?, .int(0)?: idToken = RequestID.numberToken(in: line)
        default: break
        }
        lines.answer { handle(object, idToken: idToken) }
    }

    /// Runs one request through the operation table; its answer line, or nil when the answer comes
    /// later (`answerLater`).
    private func handle(_ object: [String: JSONValue], idToken: [UInt8]?) -> EncodedLine? {
        var id = object["id"] ?? .null
        do throws(ObsError) {
            switch id {
            case .array, .object:
                id = .null
                throw ObsError(.badRequest, "field 'id' must be a JSON scalar")
            default:
                break
            }
            guard let opValue = object["op"] else { throw ObsError(.badRequest, "missing field 'op'") }
            guard case .string(let name) = opValue else { throw ObsError(.badRequest, "field 'op' must be a string") }
            guard let index = Operations.indexByName[name] else { throw ObsError(.unknownOp, "unknown op '\(name)'") }
            store.requestCounters.byOperation[index] += 1
            let operation = Operations.all[index]
            if store.isShuttingDown { throw ObsError(.shuttingDown, "the daemon is stopping") }
            if operation.access == .write && access == .read {
                throw ObsError(.permissionDenied, "'\(name)' needs write access")
            }
            if operation.access == .write, let refusal = store.writeRefusal { throw refusal }
            let request = try Request(object, fields: operation.fields)
            // Kept for an answer that comes later: no other request is handled until it is given.
            pendingIDToken = idToken
            switch try perform(operation, request) {
            case .now(let reply):
                return LineEncoding.response(id: id, idToken: idToken, fields: reply.fields, raw: reply.raw, needsSync: reply.needsSync)
            case .later: return nil
            }
        } catch {
            store.requestCounters.count(error)
            return LineEncoding.error(id: id, idToken: idToken, error)
        }
    }

    // MARK: Answers that come later (cluster mode)

    /// Whether an answer is pending: the session handles nothing more (what arrives waits, in
    /// order) until it is given, and the daemon stops reading the connection meanwhile.
    public var isWaiting: Bool { lines.isWaiting }

    /// Gives the pending answer to request `id`, then handles the lines that waited for it.
    func answerLater(id: JSONValue, _ outcome: Result<Reply, ObsError>) {
        guard !isClosed else { return }
        switch outcome {
        case .success(let reply):
            answerLater(LineEncoding.response(id: id, idToken: pendingIDToken, fields: reply.fields, raw: reply.raw, needsSync: reply.needsSync))
        case .failure(let error):
            answerLater(LineEncoding.error(id: id, idToken: pendingIDToken, error))
        }
    }

    /// Gives the pending answer, encoded, then handles the lines that waited for it.
    func answerLater(_ answer: EncodedLine) {
        guard !isClosed else { return }
        pendingIDToken = nil
        lines.resolve(answer)
        // Decided while its own request was being handled: whoever handles lines goes on.
        guard !lines.isHandling else { return }
        handleWaitingLines()
    }

    /// Handles the lines held back, in order, as long as nothing holds them back any more.
    private func handleWaitingLines() {
        var next = 0
        while next < waitingLines.count, !isWaiting, !isClosed, lines.unsentBytes <= store.configuration.maxOutputBytes {
            let line = waitingLines[next]
            next += 1
            line.withUnsafeBytes { handle(line: $0) }
        }
        waitingLines.removeFirst(next)
    }

    /// Writes the `goodbye` event (no `watch` field) before the daemon closes the connection.
    public func goodbye(reason: String) {
        var writer = ObjectWriter()
        writer.field("event", EventName.goodbye.rawValue)
        writer.field("reason", reason)
        lines.send(EncodedLine(body: writer.closed()))
    }

    /// The daemon has written everything queued (or enough: below the limit): the requests held
    /// back while the output was over it are handled, then held `latest` events go out, and after
    /// an overflow each watch sends `overflow` and a fresh snapshot.
    public func outputDrained() {
        guard !isClosed else { return }
        handleWaitingLines()
        if waitingLines.isEmpty { store.watches.drained(watchClient) }
    }

    /// Ends the session however the connection ended: its watches stop, and its ephemeral keys are
    /// removed as one transaction (reason "ephemeral").
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        store.openOwners.remove(id)
        waitingLines.removeAll()
        store.watches.remove(watchClient)
        removeEphemeralKeys()
        restoreParts.drop(from: &store.restorePartsBytes)
    }

    /// Removes the ephemeral keys this session set (those it still owns) as one transaction,
    /// reason "ephemeral": at its close, or before, when the daemon stops (so that every watcher
    /// sees them go before its `goodbye`).
    public func removeEphemeralKeys() {
        store.removeEphemeralKeys(ephemeralKeys, owner: id)
        ephemeralKeys.removeAll()
    }

    /// A session dropped without `close()` still stops its watches (they refer back to it).
    deinit { close() }
}
