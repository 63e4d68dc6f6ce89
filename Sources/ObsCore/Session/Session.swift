import Foundation

/// One connection's state machine, with no I/O: request lines in (`receive`), response and event
/// lines out (to its `SessionOutput`). Responses are written in request order; the events a
/// request causes for this session's own watches follow its response.
public final class Session {
    public let id: UInt64
    let store: Store
    public let access: Access
    let output: any SessionOutput
    var watches: [Int: Watch] = [:]
    var nextWatchID = 1
    /// Keys this session set with `ephemeral: true` (it may have lost some to other writers).
    var ephemeralKeys: Set<String> = []
    /// Events stopped at the output limit: from this revision until drained.
    var overflowed = false
    var overflowFrom: UInt64 = 0
    /// While a request is handled, lines for this session wait until its response is written.
    private var handling = false
    private var held: [EncodedLine] = []
    /// Set when the session must be closed after its output is flushed (a line over the limit).
    public private(set) var wantsClose = false
    public private(set) var isClosed = false
    /// Whether the output passed its limit and events are being dropped until `Store.sessionDrained`:
    /// the daemon disconnects a client that stays so for `client_timeout`.
    public var isOverflowing: Bool { overflowed }

    public init(store: Store, access: Access, output: any SessionOutput) {
        self.store = store
        self.access = access
        self.output = output
        id = store.nextSessionID
        store.nextSessionID += 1
        store.stats.connections += 1
    }

    var orderedWatches: [Watch] { watches.keys.sorted().map { watches[$0]! } }

    /// Handles one request line (without its newline; a trailing "\r" is ignored).
    public func receive(line: UnsafeRawBufferPointer) {
        guard !isClosed, !wantsClose else { return }
        var bytes = line
        if let last = bytes.last, last == UInt8(ascii: "\r") { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast()) }
        if bytes.count > store.configuration.maxLineBytes {
            write(LineEncoding.error(id: .null, ObsError(.tooLarge, "request line of \(bytes.count) bytes is over the limit of \(store.configuration.maxLineBytes)")))
            wantsClose = true
            return
        }
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return }
        let request: JSONValue
        do {
            request = try JSONValue.parse(bytes, maxDepth: store.configuration.maxJSONDepth)
        } catch {
            write(LineEncoding.error(id: .null, error.obsError))
            return
        }
        guard case .object(let object) = request else {
            write(LineEncoding.error(id: .null, ObsError(.badJSON, "a request must be a JSON object")))
            return
        }
        store.requestLineBytes = bytes.count
        defer { store.requestLineBytes = nil }
        handle(object)
    }

    /// Handles one request line given as text.
    public func receive(_ line: String) {
        var line = line
        line.withUTF8 { receive(line: UnsafeRawBufferPointer($0)) }
    }

    private func handle(_ object: [String: JSONValue]) {
        var id = object["id"] ?? .null
        handling = true
        let reply: Result<Reply, ObsError>
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
            reply = .success(try operation.handler(self, request))
        } catch {
            reply = .failure(error)
        }
        handling = false
        switch reply {
        case .success(let reply): write(LineEncoding.response(id: id, fields: reply.fields, raw: reply.raw, needsSync: reply.needsSync))
        case .failure(let error): write(LineEncoding.error(id: id, error))
        }
        let lines = held
        held.removeAll()
        for line in lines { write(line) }
        if !lines.isEmpty {
            for watch in watches.values where watch.progress != nil { store.scheduleProgress(watch) }
        }
    }

    private func write(_ line: EncodedLine) {
        if handling {
            held.append(line)
        } else {
            output.write(line)
        }
    }

    /// Queues an event of `watch`, unless the output is over its limit (then the session overflows
    /// and drops events until drained). Whether it was queued.
    @discardableResult
    func sendEvent(_ line: EncodedLine, watch: Watch, rev: UInt64) -> Bool {
        guard watch.active, !isClosed else { return false }
        if overflowed { return false }
        if output.pendingBytes > store.configuration.maxOutputBytes {
            overflowed = true
            overflowFrom = rev
            store.stats.overflows += 1
            return false
        }
        write(line)
        store.stats.eventsSent += 1
        if watch.progress != nil {
            watch.lastSent = store.clock.monotonic
            store.scheduleProgress(watch)
        }
        return true
    }

    /// Queues a control event (initial, synced, overflow, compacted, progress), never dropped.
    func sendControl(_ watch: Watch, _ event: String, _ fields: [(String, JSONValue)]) {
        write(EncodedLine(head: LineEncoding.head(event, watch: watch.id), body: LineEncoding.body(fields)))
        store.stats.eventsSent += 1
        watch.lastSent = store.clock.monotonic
    }

    /// Writes the `goodbye` event (no `watch` field) before the daemon closes the connection.
    public func goodbye(reason: String) {
        var writer = ObjectWriter()
        writer.field("event", "goodbye")
        writer.field("reason", reason)
        output.write(EncodedLine(body: writer.closed()))
    }

    /// Ends the session however the connection ended: its watches stop, and its ephemeral keys are
    /// removed as one transaction (reason "ephemeral").
    public func close() {
        guard !isClosed else { return }
        for watch in watches.values { removeWatch(watch) }
        watches.removeAll()
        isClosed = true
        store.stats.connections -= 1
        store.removeEphemeralKeys(ephemeralKeys, owner: id)
        ephemeralKeys.removeAll()
    }

    /// A session dropped without `close()` still stops its watches (they refer back to it).
    deinit { close() }

    func removeWatch(_ watch: Watch) {
        watch.active = false
        watch.pending.removeAll()
        for entry in watch.entries {
            entry.watches.removeAll { $0 === watch }
            store.patterns.removeIfUnused(entry)
        }
        store.stats.watches -= 1
    }
}
