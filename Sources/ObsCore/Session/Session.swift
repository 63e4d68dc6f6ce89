import Foundation

/// One connection's state machine, with no I/O: the bytes the client sent in (`receive`), response
/// and event lines out (to its `SessionOutput`). Responses are written in request order; the events a
/// request causes for this session's own watches follow its response.
public final class Session {
    /// The owner of the ephemeral keys this session sets.
    public let id: UInt64
    let store: Store
    /// What the peer may do; the daemon lowers it when a reload takes access away.
    public var access: Access
    let lines: SessionLines
    /// Splits what the client sends into request lines, and enforces the line limit.
    private var framer: LineFramer
    /// This session's watches, as the store's watch unit keeps them.
    let watchClient: WatchClient
    /// Keys this session set with `ephemeral: true` (it may have lost some to other writers).
    var ephemeralKeys: Set<String> = []
    /// The size at which `ephemeralKeys` next forgets the keys this session no longer owns.
    var ephemeralPruneAt = 1024
    /// Set when the session must be closed after its output is flushed (a line over the limit):
    /// nothing it receives after that is read.
    public private(set) var wantsClose = false
    public private(set) var isClosed = false
    /// Request lines that arrived while the output was over its limit, each ended by "\n": they
    /// are answered once it drains (`outputDrained`). A client that pipelines requests without
    /// reading the answers (a thousand `get`s of a 1 MiB value in one 64 KiB read) would otherwise
    /// make obsd queue answers without bound; the daemon stops reading such a client meanwhile, so
    /// this holds what one read brought at most.
    private var deferred: [UInt8] = []
    /// Whether the output passed its limit and events are being dropped, or requests wait, until
    /// `outputDrained()`: the daemon disconnects a client that stays so for `client_timeout`.
    public var isOverflowing: Bool { watchClient.overflowed || !deferred.isEmpty }
    /// Whether requests received wait for the output to drain before they are answered.
    public var hasDeferredRequests: Bool { !deferred.isEmpty }

    public init(store: Store, access: Access, output: any SessionOutput) {
        self.store = store
        self.access = access
        lines = SessionLines(output: output)
        framer = LineFramer(maxLineBytes: store.configuration.maxLineBytes)
        watchClient = store.watches.register(lines)
        id = store.nextOwnerID
        store.nextOwnerID += 1
    }

    /// Handles the bytes a client sent: every complete request line among them, in order (a line
    /// cut short waits for the rest). A line over the limit is answered `too_large`, and the
    /// session then wants to be closed (`wantsClose`) and reads nothing more.
    public func receive(bytes: UnsafeRawBufferPointer) {
        guard !isClosed, !wantsClose else { return }
        do throws(LineTooLong) {
            try framer.append(bytes) { line in
                guard !isClosed else { return }
                if !deferred.isEmpty || lines.unsentBytes > store.configuration.maxOutputBytes {
                    deferred.append(contentsOf: line)
                    deferred.append(0x0A)
                } else {
                    handle(line: line)
                }
            }
        } catch {
            lines.send(LineEncoding.error(id: .null, ObsError(.tooLarge, "request line longer than \(framer.maxLineBytes) bytes")))
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
        let request: JSONValue
        do {
            request = try JSONValue.parse(line, maxDepth: store.configuration.maxJSONDepth)
        } catch {
            lines.send(LineEncoding.error(id: .null, error.obsError))
            return
        }
        guard case .object(let object) = request else {
            lines.send(LineEncoding.error(id: .null, ObsError(.badJSON, "a request must be a JSON object")))
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

    /// Runs one request through the operation table; its answer line.
    private func handle(_ object: [String: JSONValue], idToken: [UInt8]?) -> EncodedLine {
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
            guard let operation = Operations.byName[name] else { throw ObsError(.unknownOp, "unknown op '\(name)'") }
            if store.isShuttingDown { throw ObsError(.shuttingDown, "the daemon is stopping") }
            if operation.access == .write && access == .read {
                throw ObsError(.permissionDenied, "'\(name)' needs write access")
            }
            if operation.access == .write, let refusal = store.writeRefusal { throw refusal }
            let request = try Request(object, fields: operation.fields)
            let reply = try perform(operation, request)
            return LineEncoding.response(id: id, idToken: idToken, fields: reply.fields, raw: reply.raw, needsSync: reply.needsSync)
        } catch {
            return LineEncoding.error(id: id, idToken: idToken, error)
        }
    }

    /// Writes the `goodbye` event (no `watch` field) before the daemon closes the connection.
    public func goodbye(reason: String) {
        var writer = ObjectWriter()
        writer.field("event", EventName.goodbye.rawValue)
        writer.field("reason", reason)
        lines.send(EncodedLine(body: writer.closed()))
    }

    /// The daemon has written everything queued: held `latest` events go out, and after an
    /// overflow each watch sends `overflow` and a fresh snapshot.
    public func outputDrained() {
        guard !isClosed else { return }
        answerDeferred()
        if deferred.isEmpty { store.watches.drained(watchClient) }
    }

    /// Answers the deferred requests, in order, until the output is over its limit again.
    private func answerDeferred() {
        guard !deferred.isEmpty else { return }
        let waiting = deferred
        var start = 0
        waiting.withUnsafeBytes { bytes in
            while start < bytes.count, !isClosed, lines.unsentBytes <= store.configuration.maxOutputBytes {
                let end = bytes[start...].firstIndex(of: 0x0A)!
                handle(line: UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
                start = end + 1
            }
        }
        deferred = Array(waiting[start...])
    }

    /// Ends the session however the connection ended: its watches stop, and its ephemeral keys are
    /// removed as one transaction (reason "ephemeral").
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        deferred.removeAll()
        store.watches.remove(watchClient)
        store.removeEphemeralKeys(ephemeralKeys, owner: id)
        ephemeralKeys.removeAll()
    }

    /// A session dropped without `close()` still stops its watches (they refer back to it).
    deinit { close() }
}
