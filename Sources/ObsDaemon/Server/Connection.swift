// One client connection: its socket, its line framer, its session and its output buffer.
//
// Output is a queue of encoded lines. Lines are shared, immutable arrays: an event sent to a
// thousand watchers is one buffer queued a thousand times. The queue is written only at the end
// of a loop turn, with one writev(2) of up to IOV_MAX lines, so a connection costs one system call
// per turn however many responses and events it got.
//
// Back-pressure: while a connection's unsent output is over the limit, obsd stops reading its
// requests (so a client that pipelines without reading cannot make obsd buffer without bound) and
// the session stops queuing events (overflow, model.md). If the client reads nothing at all for
// client_timeout in that state, it is disconnected.
import Glibc
import ObsCore

final class Connection: ConnectionOutput {
    let fd: Int32
    let peer: PeerCredentials
    var session: (any ServiceSession)?
    var framer: LineFramer

    /// Lines waiting; those before `head` are written (compacted away once they are half the queue).
    private var queue: [[UInt8]] = []
    private var head = 0
    /// Bytes of `queue[head]` already written.
    private var headOffset = 0
    private(set) var pendingBytes = 0

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
    /// Queued in the server's list of connections to flush this turn.
    var isDirty = false
    private let markDirty: (Connection) -> Void

    init(fd: Int32, peer: PeerCredentials, maxLineBytes: Int, markDirty: @escaping (Connection) -> Void) {
        self.fd = fd
        self.peer = peer
        framer = LineFramer(maxLineBytes: maxLineBytes)
        self.markDirty = markDirty
    }

    func write(_ line: [UInt8]) {
        guard !line.isEmpty else { return }
        queue.append(line)
        pendingBytes += line.count
        if !isDirty {
            isDirty = true
            markDirty(self)
        }
    }

    enum FlushResult { case done, blocked(progress: Bool), failed }

    /// Writes as much of the queue as the socket takes, with one writev.
    func flush() -> FlushResult {
        guard head < queue.count else { return .done }
        let count = min(queue.count - head, Self.maxVectors)
        var vectors = [iovec](repeating: iovec(), count: count)
        // The arrays are not mutated until writev returns, so their buffers stay where they are.
        let written: Int = withExtendedLifetime(queue) {
            for index in 0..<count {
                queue[head + index].withUnsafeBufferPointer { buffer in
                    let skip = index == 0 ? headOffset : 0
                    vectors[index] = iovec(
                        iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress! + skip),
                        iov_len: buffer.count - skip)
                }
            }
            return vectors.withUnsafeBufferPointer { writev(fd, $0.baseAddress, Int32(count)) }
        }
        if written < 0 {
            if errno == EAGAIN || errno == EINTR { return .blocked(progress: false) }
            return .failed
        }
        consume(written)
        return head == queue.count ? .done : .blocked(progress: written > 0)
    }

    private func consume(_ bytes: Int) {
        pendingBytes -= bytes
        var left = bytes
        while left > 0 {
            let available = queue[head].count - headOffset
            if left >= available {
                left -= available
                headOffset = 0
                queue[head] = []
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
            head = 0
        }
    }

    /// IOV_MAX on Linux: the most buffers one writev takes.
    private static let maxVectors = 1024

    /// Drops whatever is still queued (the connection is being closed).
    func discardOutput() {
        queue.removeAll()
        head = 0
        headOffset = 0
        pendingBytes = 0
    }
}

/// A protocol error line not tied to a request (`id` null), as the daemon sends it before closing.
func errorLine(_ code: ObsError.Code, _ message: String) -> [UInt8] {
    Array("{\"id\":null,\"ok\":false,\"error\":{\"code\":\"\(code.rawValue)\",\"message\":\(JSONValue.string(message).encoded)}}\n".utf8)
}

/// The `goodbye` event sent once before the daemon closes a connection.
func goodbyeLine(_ reason: String) -> [UInt8] {
    Array("{\"event\":\"goodbye\",\"reason\":\(JSONValue.string(reason).encoded)}\n".utf8)
}
