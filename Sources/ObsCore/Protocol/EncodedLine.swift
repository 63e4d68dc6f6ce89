/// One output line, ready for the socket: the bytes of `head` then `body`, ending with "\n".
///
/// An event sent to many watches is encoded once: every copy shares the same `body` storage (a
/// Swift array copied without copying its bytes) and only the small `head`
/// (`{"event":"change","watch":N`) is per watch. A daemon can write both with one `writev`.
public struct EncodedLine: Sendable {
    /// Bytes specific to this line; may be empty.
    public let head: [UInt8]
    /// Bytes shared with the other lines carrying the same event; ends with "\n".
    public let body: [UInt8]
    /// Durability hook: this line acknowledges a transaction that changed persisted state, or
    /// reports a change (a change event), so it (and every line after it on the same connection)
    /// must not be sent before the changes committed so far are written (and, in `strict` mode,
    /// synced). The daemon writes on another thread, after the commit, and holds such lines until
    /// then, also while a write has failed (when it lets other lines, read answers, go at once).
    public let needsSync: Bool

    public init(head: [UInt8] = [], body: [UInt8], needsSync: Bool = false) {
        self.head = head
        self.body = body
        self.needsSync = needsSync
    }

    /// Total length in bytes.
    public var count: Int { head.count + body.count }

    /// The whole line as one array (a copy: for tests and simple writers).
    public var bytes: [UInt8] { head + body }

    /// The line without its newline, as text.
    public var text: String { String(decoding: bytes.dropLast(), as: UTF8.self) }
}

/// Where a session writes its lines: the daemon's connection (or a test's capture).
public protocol SessionOutput: AnyObject {
    /// Queues a line for the peer.
    func write(_ line: EncodedLine)
    /// Queues the line made of `head` then `body` (ending with "\n"), copying the bytes: how the
    /// session writes its answers and events, with no `EncodedLine` (and no allocation) per line.
    func write(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool)
    /// `write(head:body:needsSync:)` of an event that other outputs get too: `sharing` is a number
    /// that stands for `body`'s bytes (nonzero, the same number only ever for the same bytes), so
    /// that an output which sends lines by reference can keep one copy of the line for every
    /// connection that gets it with the same head. The bytes are valid only during the call.
    func write(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool, sharing: UInt64)
    /// Bytes written but not yet sent to the peer: past the store's limit, watches stop queuing.
    var pendingBytes: Int { get }
}

extension SessionOutput {
    /// An output that keeps lines as `EncodedLine`s (a test's capture) gets one per line.
    public func write(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool) {
        write(EncodedLine(head: Array(head), body: Array(body), needsSync: needsSync))
    }

    /// An output that copies every line gets the shared ones as any other.
    public func write(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool, sharing: UInt64) {
        write(head: head, body: body, needsSync: needsSync)
    }
}
