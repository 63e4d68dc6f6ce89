/// Where the watch unit writes one client's lines: the only thing it knows of a connection. The
/// session implements it (events a request causes wait until that request's answer is written);
/// tests use a recording sink.
protocol WatchSink: AnyObject {
    /// Queues one line for the client.
    func send(_ line: EncodedLine)
    /// Queues the line made of `head` then `body`, copying the bytes (no `EncodedLine` per line).
    func send(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool)
    /// `send(head:body:needsSync:)` of an event that other clients get too (`sharing`: see
    /// `SessionOutput.write(head:body:needsSync:sharing:)`).
    func send(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool, sharing: UInt64)
    /// Bytes queued for the client and not yet taken by it: past the limit, the client's watches
    /// overflow.
    var unsentBytes: Int { get }
}

extension WatchSink {
    /// A sink that keeps `EncodedLine`s (a test's recording) gets one per line.
    func send(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool) {
        send(EncodedLine(head: Array(head), body: Array(body), needsSync: needsSync))
    }

    func send(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool, sharing: UInt64) {
        send(head: head, body: body, needsSync: needsSync)
    }
}

/// What the watch unit reads of the store: the state of the keys a snapshot shows.
protocol WatchedState: AnyObject {
    /// Every existing key matching one of `patterns`, sorted by name, with its state now (a
    /// computed brought up to date first).
    func snapshot(matching patterns: [KeyPattern]) -> [KeyState]
}

/// One key's state in a snapshot.
struct KeyState {
    var key: String
    var kind: KeyKind
    /// A value, or (a computed) an error; never `.missing`.
    var content: KeyContent
    /// The key's own last-change revision.
    var rev: UInt64
}
