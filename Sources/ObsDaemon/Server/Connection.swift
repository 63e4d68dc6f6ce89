// One client connection: its socket, its session (which frames and answers what it reads) and its
// output buffer.
//
// Output is a queue of EncodedLines. A line's body is shared: an event sent to a thousand watchers
// is one buffer queued a thousand times, each with its small per-watch head. The queue is written
// only at the end of a loop turn, with one writev(2) of up to IOV_MAX buffers (a head and a body
// per line), so a connection costs one system call per turn however many lines it got.
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
    var session: Session?

    // The output state is touched for every line (a thousand times per event with a thousand
    // watchers), only on the daemon's loop thread and never across a call that could reach it
    // again: dynamic exclusivity checks on it cost more than the queuing itself.
    /// Lines waiting; those before `head` are written (compacted away once they are half the queue).
    @exclusivity(unchecked) private var queue: [EncodedLine] = []
    @exclusivity(unchecked) private var head = 0
    /// Bytes of `queue[head]` (head and body together) already written.
    @exclusivity(unchecked) private var headOffset = 0
    @exclusivity(unchecked) private(set) var pendingBytes = 0

    /// The peer closed its side (or we stopped reading): finish writing, then close.
    var readClosed = false
    /// Close as soon as the output is written (after too_large, goodbye).
    var closeAfterFlush = false
    /// Was over the output limit; the session is told when it drains below.
    var overLimit = false
    /// Monotonic time since which the output has been over the limit with no write progress.
    var stalledSince: Double?
    /// The epoll interest currently registered.
    var interest: UInt32 = 0
    /// Still in the server's table (false once dropped; its fd number may be reused).
    var isOpen = true
    /// Queued in the server's list of connections to flush this turn.
    @exclusivity(unchecked) var isDirty = false
    /// Where the connections with output this turn are listed.
    private let flushList: FlushList
    /// What decides whether a line waits for a batch to be written (nil in memory mode, where
    /// nothing waits).
    private let gate: WriteGate?
    /// Where the queue waits: from `from` on, nothing is sent before batch `batch` is written.
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
        guard line.count > 0 else { return }
        if let gate, let batch = gate.batch(toWaitFor: line.needsSync), batch > (holds.last?.batch ?? 0) {
            if holds.isEmpty { gate.hold(self) }
            holds.append(Hold(from: queue.count, batch: batch))
        }
        queue.append(line)
        pendingBytes += line.count
        markDirty()
    }

    /// Lists the connection for this turn's flush, once.
    private func markDirty() {
        guard !isDirty else { return }
        isDirty = true
        flushList.connections.append(self)
    }

    /// The queue index of the first line that waits for a batch, if any.
    private var heldFrom: Int? { holds.first?.from }

    /// Whether some queued output may be written now (held lines may not).
    var hasSendableOutput: Bool { head < (heldFrom ?? queue.count) }

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

    /// Writes as much of the queue as the socket takes (up to the held lines), with one writev.
    func flush() -> FlushResult {
        let end = heldFrom ?? queue.count
        guard head < end else { return heldFrom == nil ? .done : .held }
        let written = writeQueue(queue, from: head, to: end, offset: headOffset)
        if written < 0 {
            if errno == EAGAIN || errno == EINTR { return .blocked(progress: false) }
            return .failed
        }
        consume(written)
        if head == queue.count { return .done }
        return head == end ? .held : .blocked(progress: written > 0)
    }

    /// One writev of the lines from `start` (less the `startOffset` bytes already written). The
    /// queue comes as an argument, so the loop reads no property of the class, which would cost a
    /// dynamic exclusivity check per access (per line, with a thousand watchers); its copy is gone
    /// when this returns, before `consume` mutates the queue.
    private func writeQueue(_ queue: [EncodedLine], from start: Int, to end: Int, offset startOffset: Int) -> Int {
        // The arrays are not mutated until writev returns, so their buffers stay where they are.
        withExtendedLifetime(queue) {
            // 16 KiB of vectors on the stack: no allocation per flush.
            withUnsafeTemporaryAllocation(of: iovec.self, capacity: Self.maxVectors) { vectors in
                var used = 0
                var index = start
                var skip = startOffset
                func add(_ part: [UInt8]) {
                    if skip >= part.count {
                        skip -= part.count
                        return
                    }
                    part.withUnsafeBufferPointer { buffer in
                        vectors[used] = iovec(iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress! + skip),
                                              iov_len: buffer.count - skip)
                    }
                    used += 1
                    skip = 0
                }
                while index < end, used + 2 <= Self.maxVectors {
                    add(queue[index].head)
                    add(queue[index].body)
                    index += 1
                }
                return writev(fd, vectors.baseAddress, Int32(used))
            }
        }
    }

    private func consume(_ bytes: Int) {
        if bytes == pendingBytes {
            // Everything went out (the usual case): no need to walk the lines.
            discardOutput()
            return
        }
        pendingBytes -= bytes
        var left = bytes
        while left > 0 {
            let available = queue[head].count - headOffset
            if left >= available {
                left -= available
                headOffset = 0
                queue[head] = Self.sent
                head += 1
            } else {
                headOffset += left
                left = 0
            }
        }
        if head == queue.count {
            queue.removeAll(keepingCapacity: queue.count <= 4096)
            head = 0
        } else if head > 1024, head * 2 > queue.count {
            queue.removeFirst(head)
            for index in holds.indices { holds[index].from -= head }
            head = 0
        }
    }

    /// IOV_MAX on Linux: the most buffers one writev takes.
    private static let maxVectors = 1024
    /// Replaces written lines in the queue so their buffers are freed before compaction.
    private static let sent = EncodedLine(body: [])

    /// Drops whatever is still queued (the connection is being closed).
    func discardOutput() {
        queue.removeAll(keepingCapacity: queue.capacity <= 4096)
        holds.removeAll()
        head = 0
        headOffset = 0
        pendingBytes = 0
    }
}

/// The connections that got output during a loop turn, written by the turn's flush.
final class FlushList {
    var connections: [Connection] = []
}
