// One client connection: its socket, its session (which frames and answers what it reads) and its
// output buffer.
//
// Output is one byte buffer: every line the session writes (its answers, and the events of its
// watches) is copied to the end of it, and the buffer is written only at the end of a loop turn,
// with one write(2), so a connection costs one system call per turn however many lines it got, and
// a line costs a copy of its bytes, not an allocation. (An event sent to a thousand watchers is
// encoded once and copied into a thousand buffers; the kernel copies each into its socket anyway.)
//
// Back-pressure: while a connection's unsent output is over the limit, obsd stops reading its
// requests (so a client that pipelines without reading cannot make obsd buffer without bound) and
// the session stops queuing events (overflow: docs/protocol.md). If the client reads nothing at all for
// client_timeout in that state, it is disconnected.
import Glibc
import ObsCore

final class Connection: SessionOutput {
    let fd: Int32
    let peer: PeerCredentials
    @exclusivity(unchecked) var session: Session?

    // The output state is touched for every line (a thousand times per event with a thousand
    // watchers), only on the daemon's loop thread and never across a call that could reach it
    // again: dynamic exclusivity checks on it cost more than the queuing itself.
    /// Lines waiting, as bytes; those before `head` are written (compacted away once they are half
    /// the buffer).
    @exclusivity(unchecked) private var output = ByteBuffer()
    @exclusivity(unchecked) private var head = 0

    /// Bytes queued and not yet written.
    var pendingBytes: Int { output.count - head }

    /// The peer closed its side (or we stopped reading): finish writing, then close.
    @exclusivity(unchecked) var readClosed = false
    /// Close as soon as the output is written (after too_large, goodbye).
    @exclusivity(unchecked) var closeAfterFlush = false
    /// Was over the output limit; the session is told when it drains below.
    @exclusivity(unchecked) var overLimit = false
    /// Monotonic time since which the output has been over the limit with no write progress.
    @exclusivity(unchecked) var stalledSince: Double?
    /// The epoll interest currently registered.
    @exclusivity(unchecked) var interest: UInt32 = 0
    /// Still in the server's table (false once dropped; its fd number may be reused).
    @exclusivity(unchecked) var isOpen = true
    /// Queued in the server's list of connections to flush this turn.
    @exclusivity(unchecked) var isDirty = false
    /// Where the connections with output this turn are listed.
    private let flushList: FlushList
    /// What decides whether a line waits for a batch to be written (nil in memory mode, where
    /// nothing waits).
    private let gate: WriteGate?
    /// Where the output waits: from byte `from` on, nothing is sent before batch `batch` is written.
    /// Ascending in both; usually empty, at most one entry per batch not yet written.
    private struct Hold {
        var from: Int
        var batch: UInt64
    }
    @exclusivity(unchecked) private var holds: [Hold] = []

    init(fd: Int32, peer: PeerCredentials, gate: WriteGate?, flushList: FlushList) {
        self.fd = fd
        self.peer = peer
        self.gate = gate
        self.flushList = flushList
    }

    func write(_ line: EncodedLine) {
        line.head.withUnsafeBytes { head in
            line.body.withUnsafeBytes { body in write(head: head, body: body, needsSync: line.needsSync) }
        }
    }

    func write(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool) {
        guard head.count + body.count > 0 else { return }
        if let gate, let batch = gate.batch(toWaitFor: needsSync), batch > (holds.last?.batch ?? 0) {
            if holds.isEmpty { gate.hold(self) }
            holds.append(Hold(from: output.count, batch: batch))
        }
        output.append(head)
        output.append(body)
        markDirty()
    }

    /// Lists the connection for this turn's flush, once.
    private func markDirty() {
        guard !isDirty else { return }
        isDirty = true
        flushList.connections.append(self)
    }

    /// Where the first line that waits for a batch starts, if one does.
    private var heldFrom: Int? { holds.first?.from }

    /// Whether some queued output may be written now (held lines may not).
    var hasSendableOutput: Bool { head < (heldFrom ?? output.count) }

    /// Every batch up to `written` is written: the lines that waited for them may go. Returns
    /// whether some lines still wait (for a later batch).
    func releaseHeld(through written: UInt64) -> Bool {
        guard let first = holds.first, first.batch <= written else { return !holds.isEmpty }
        holds.removeFirst(holds.prefix { $0.batch <= written }.count)
        markDirty()
        return !holds.isEmpty
    }

    /// `held`: everything before the held lines went out; the rest waits for a group commit.
    enum FlushResult { case done, held, blocked(progress: Bool), failed }

    /// Writes as much of the output as the socket takes (up to the held lines), with one write.
    func flush() -> FlushResult {
        let end = heldFrom ?? output.count
        guard head < end else { return heldFrom == nil ? .done : .held }
        let written = Glibc.write(fd, output.base! + head, end - head)
        if written < 0 {
            if errno == EAGAIN || errno == EINTR { return .blocked(progress: false) }
            return .failed
        }
        head += written
        if head == output.count {
            output.removeAll(keepingCapacityUpTo: Self.keptCapacity)
            head = 0
            return .done
        }
        let result: FlushResult = head == end ? .held : .blocked(progress: written > 0)
        if head > Self.keptCapacity / 4, head * 2 > output.count {
            output.removeFirst(head)
            for index in holds.indices { holds[index].from -= head }
            head = 0
        }
        return result
    }

    /// The most buffer a connection keeps once its output is written: enough for a turn's events
    /// of any ordinary watch, without every idle connection holding what a burst once needed.
    private static let keptCapacity = 1 << 18

    /// Drops whatever is still queued (the connection is being closed).
    func discardOutput() {
        output.removeAll(keepingCapacityUpTo: Self.keptCapacity)
        holds.removeAll()
        head = 0
    }
}

/// The connections that got output during a loop turn, written by the turn's flush.
final class FlushList {
    @exclusivity(unchecked) var connections: [Connection] = []
}
