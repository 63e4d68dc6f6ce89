// One client connection: its socket, its session (which frames and answers what it reads) and its
// output buffer.
//
// Output is one byte buffer: every line the session writes (its answers, and the events of its
// watches) is copied to the end of it, and the buffer is written only at the end of a loop turn,
// with one write(2), so a connection costs one system call per turn however many lines it got, and
// a line costs a copy of its bytes, not an allocation. An event that several connections get is
// the exception: its line is kept once for all of them (`SharedLines`), and each connection queues
// only where it is, after its own bytes (`references`), until the turn's flush writes both with one
// writev(2). Whatever that cannot write is copied into the buffer then, so that between turns the
// buffer is all there is.
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
    var pendingBytes: Int { output.count - head + referencedBytes }

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
    /// This turn's lines queued by reference, after `output`'s bytes, as `iovec`s: the first entry
    /// is left for `output`'s unsent bytes (filled by `flush`). Empty between turns.
    @exclusivity(unchecked) private var references = ByteBuffer()
    /// Bytes of the lines in `references` and in the run (`runStart`).
    @exclusivity(unchecked) private(set) var referencedBytes = 0
    /// The last lines queued by reference, while they follow one another in the turn's memory (as
    /// the turn's events to watches with the same id do): one entry of `references` once another
    /// line or the flush ends it.
    @exclusivity(unchecked) private var runStart: UnsafeRawPointer?
    @exclusivity(unchecked) private var runEnd: UnsafeRawPointer?
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
        if referencedBytes > 0 { copyReferences() }
        hold(from: output.count, needsSync: needsSync)
        output.append(head)
        output.append(body)
        markDirty()
    }

    /// A line other connections get too: queued by reference to the turn's copy of it when there is
    /// one, copied otherwise. A line that waits for a batch is held where it will be once the
    /// references are copied behind `output`'s bytes: the batch is written at the end of the turn,
    /// before its flush, so the flush usually finds it released and writes the line from the
    /// turn's copy; if not (a failed write), the flush copies the references first.
    func write(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool, sharing: UInt64) {
        guard sharing != 0, let line = flushList.shared.line(head: head, body: body, sharing: sharing) else {
            return write(head: head, body: body, needsSync: needsSync)
        }
        hold(from: output.count + referencedBytes, needsSync: needsSync)
        refer(to: line)
        markDirty()
    }

    /// Holds what is queued from byte `from` on (counting referenced lines as if copied behind
    /// `output`) until the batch a line queued now must wait for is written, if there is one and
    /// the last hold is for an earlier batch.
    @inline(__always)
    private func hold(from: Int, needsSync: Bool) {
        guard let gate, let batch = gate.batch(toWaitFor: needsSync), batch > (holds.last?.batch ?? 0) else { return }
        if holds.isEmpty { gate.hold(self) }
        holds.append(Hold(from: from, batch: batch))
    }

    @inline(__always)
    private func refer(to line: UnsafeRawBufferPointer) {
        referencedBytes += line.count
        if line.baseAddress == runEnd {
            runEnd = line.baseAddress! + line.count
            return
        }
        endRun()
        runStart = line.baseAddress
        runEnd = line.baseAddress! + line.count
    }

    /// Lists the run of lines as an entry of `references`.
    private func endRun() {
        guard let start = runStart, let end = runEnd else { return }
        let size = MemoryLayout<iovec>.stride
        // The first entry is left for `output`'s bytes.
        references.reserve(references.count == 0 ? size * 16 : size)
        if references.count == 0 { references.didAppend(size) }
        references.end.storeBytes(of: iovec(iov_base: UnsafeMutableRawPointer(mutating: start), iov_len: end - start), as: iovec.self)
        references.didAppend(size)
        runStart = nil
        runEnd = nil
    }

    /// Copies the lines queued by reference to the end of `output`, in order.
    private func copyReferences(from entry: Int = 1) {
        endRun()
        let entries = references.base!.assumingMemoryBound(to: iovec.self)
        for index in entry..<references.count / MemoryLayout<iovec>.stride {
            output.append(UnsafeRawBufferPointer(start: entries[index].iov_base, count: entries[index].iov_len))
        }
        references.removeAll(keepingCapacityUpTo: Self.keptReferences)
        referencedBytes = 0
    }

    /// Lists the connection for this turn's flush, once.
    private func markDirty() {
        guard !isDirty else { return }
        isDirty = true
        flushList.connections.append(self)
    }

    /// Where the first line that waits for a batch starts, if one does (an offset in `output`, or
    /// past its end within the referenced lines, as if they were copied behind it).
    private var heldFrom: Int? { holds.first?.from }

    /// Whether some queued output may be written now (held lines may not).
    var hasSendableOutput: Bool { head < (heldFrom ?? output.count + referencedBytes) }

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
        if referencedBytes > 0 {
            guard !holds.isEmpty else { return flushReferences() }
            // Lines still wait for a batch (its write failed, or the socket became writable before
            // the turn's batch was written): the turn's lines are copied behind `output`, where
            // the holds' offsets already count them.
            copyReferences()
        }
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

    /// `flush` with lines queued by reference and nothing waiting for a batch: `output`'s unsent
    /// bytes and those lines, with writev. What the socket does not take is copied into `output`,
    /// since the lines' memory is taken again after this turn.
    private func flushReferences() -> FlushResult {
        endRun()
        let entries = references.base!.assumingMemoryBound(to: iovec.self)
        let count = references.count / MemoryLayout<iovec>.stride
        entries[0] = iovec(iov_base: output.base.map { $0 + head }, iov_len: output.count - head)
        // Usually a watcher has no bytes of its own: its lines alone, often a single entry.
        var index = head < output.count ? 0 : 1
        var progress = false
        while index < count {
            let batch = min(count - index, Self.maxEntriesPerWrite)
            let written = writev(fd, entries + index, Int32(batch))
            if written < 0 {
                if errno == EAGAIN || errno == EINTR { break }
                return .failed
            }
            progress = progress || written > 0
            var left = written
            let end = index + batch
            while index < end, left >= entries[index].iov_len {
                left -= entries[index].iov_len
                index += 1
            }
            if index < end {
                entries[index].iov_base! += left
                entries[index].iov_len -= left
                break
            }
        }
        if index == count {
            output.removeAll(keepingCapacityUpTo: Self.keptCapacity)
            head = 0
            references.removeAll(keepingCapacityUpTo: Self.keptReferences)
            referencedBytes = 0
            return .done
        }
        // Left: the rest of `output` (when the first entry was not all written), then lines.
        head = index == 0 ? output.count - entries[0].iov_len : output.count
        output.removeFirst(head)
        head = 0
        copyReferences(from: max(index, 1))
        return .blocked(progress: progress)
    }

    /// Entries per writev (the kernel's IOV_MAX).
    private static let maxEntriesPerWrite = 1024

    /// The most buffer a connection keeps once its output is written: enough for a turn's events
    /// of any ordinary watch, without every idle connection holding what a burst once needed.
    private static let keptCapacity = 1 << 18
    /// The same for the references of a turn.
    private static let keptReferences = 1 << 14

    /// Drops whatever is still queued (the connection is being closed).
    func discardOutput() {
        output.removeAll(keepingCapacityUpTo: Self.keptCapacity)
        references.removeAll(keepingCapacityUpTo: Self.keptReferences)
        referencedBytes = 0
        runStart = nil
        runEnd = nil
        holds.removeAll()
        head = 0
    }
}

/// The connections that got output during a loop turn, written by the turn's flush, and the lines
/// they share.
final class FlushList {
    @exclusivity(unchecked) var connections: [Connection] = []
    let shared = SharedLines()
}
