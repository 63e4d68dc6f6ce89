import Glibc
import ObsCore

/// A connected Unix stream socket read and written as lines, with deadlines. One owner at a time.
final class LineSocket {
    enum Read {
        case line([UInt8])
        case closed
        case timedOut
    }

    private(set) var fd: Int32
    /// The daemon's answers can be as long as the whole state (`dump`): no limit on the client.
    private var framer = LineFramer(maxLineBytes: .max)
    /// Lines framed but not yet read, oldest at `next`.
    private var lines: [[UInt8]] = []
    private var next = 0
    /// The daemon's side ended (end of file or an error): nothing more will be read.
    private var readEnded = false

    /// Pauses between attempts while the daemon's queue is full: short at first, as a daemon that
    /// is only swamped makes room quickly, growing to at most `maxRetryPause`.
    static let firstRetryPause = 0.001, maxRetryPause = 0.05

    /// Connects to `path`; the failure says why it could not. While the daemon's queue of
    /// connections waiting to be accepted is full (a daemon stopped, stuck, or swamped with
    /// connections), it tries again until `deadline` (monotonic seconds; then `.notAccepting`),
    /// unless `cancellation` is raised first (then `.cancelled`).
    init(path: String, deadline: Double, cancellation: Cancellation?) throws(ConnectFailure) {
        let bytes = Array(path.utf8)
        var address = sockaddr_un()
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw .pathTooLong }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        // Non-blocking while it connects: a blocking connect(2) to a Unix socket whose queue is
        // full waits until the daemon accepts, however long that takes (no timeout, unlike TCP).
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw .other(String(cString: strerror(errno))) }
        do throws(ConnectFailure) {
            try Self.connect(fd, to: address, path: path, deadline: deadline, cancellation: cancellation)
            // Blocking again: `send` and `readLine` poll before they wait, with their deadlines.
            let flags = fcntl(fd, F_GETFL)
            guard flags >= 0, fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 else {
                throw .other(String(cString: strerror(errno)))
            }
        } catch {
            // A class whose initializer throws once its properties are set is deinitialized: the
            // descriptor is closed here, and only here (closed twice, the second close could take
            // a descriptor another thread had opened meanwhile).
            close(fd)
            fd = -1
            throw error
        }
    }

    /// connect(2), tried again while the daemon's queue is full. A non-blocking connect to a Unix
    /// socket on Linux completes at once or fails at once: EAGAIN says the queue of connections
    /// waiting to be accepted is full (there is no EINPROGRESS, and polling the socket for
    /// writability tells nothing: one not yet connected polls writable at once). Nothing tells
    /// when the daemon makes room, so it tries again after a pause.
    private static func connect(_ fd: Int32, to address: sockaddr_un, path: String, deadline: Double,
                                cancellation: Cancellation?) throws(ConnectFailure) {
        let started = monotonicNow()
        var pause = firstRetryPause
        while cancellation?.isCancelled != true {
            let result = withUnsafePointer(to: address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if result == 0 { return }
            let code = errno
            guard code == EAGAIN || code == EINTR else { throw ConnectFailure.diagnose(code, path: path) }
            let left = deadline - monotonicNow()
            if left <= 0 { throw .notAccepting(seconds: monotonicNow() - started) }
            Cancellation.pause(min(pause, left), cancellation: cancellation)
            pause = min(pause * 2, maxRetryPause)
        }
        throw .cancelled
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Wakes a reader blocked on this socket from another thread; the socket then reads as closed.
    func shutDown() { shutdown(fd, Int32(SHUT_RDWR)) }

    enum Sent {
        case sent
        /// The daemon had closed the connection (or it broke). `partly`: some of the line went out
        /// before; if not, the daemon never saw a byte of it. What the daemon sent before closing
        /// is kept for `readLine` (`hasUnread`).
        case closed(partly: Bool)
        case timedOut
    }

    /// Writes `bytes` and a newline, waiting at most until `deadline` (monotonic seconds) for room
    /// to write. While it waits, the daemon's answers are read and kept for `readLine`: a daemon
    /// whose answers to this connection wait unread stops reading its requests until they are
    /// taken, so a client that sent many requests before reading any answer would otherwise wait
    /// for ever on a daemon that waits on it.
    func send(_ bytes: [UInt8], deadline: Double?) -> Sent {
        let line = bytes + [0x0A]
        var offset = 0
        while offset < line.count {
            let sent = line[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            if sent > 0 {
                offset += sent
                continue
            }
            let code = errno
            if sent < 0, code == EINTR { continue }
            guard sent < 0, code == EAGAIN || code == EWOULDBLOCK else {
                // A daemon closes after its last answers (a `too_large`, a `goodbye`): they are
                // in the socket still, and are the answers to the requests before this one.
                while receive() == .data {}
                return .closed(partly: offset > 0)
            }
            // Once the daemon's side has ended, its end reads ready for ever: only room is waited for.
            var poller = pollfd(fd: fd, events: Int16(readEnded ? POLLOUT : POLLOUT | POLLIN), revents: 0)
            guard let waitMs = Self.pollTimeout(until: deadline) else { return .timedOut }
            let ready = poll(&poller, 1, waitMs)
            if ready < 0, errno == EINTR { continue }
            // Answers first: taking them is what lets the daemon read on. A daemon that closed
            // fails the next write (its last answers, such as a `too_large`, are kept).
            if ready > 0, !readEnded, poller.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0, receive() == .closed { readEnded = true }
        }
        return .sent
    }

    /// What `poll` waits, in milliseconds, for `deadline` (-1: no deadline); nil once it passed.
    private static func pollTimeout(until deadline: Double?) -> Int32? {
        guard let deadline else { return -1 }
        let left = deadline - monotonicNow()
        if left <= 0 { return nil }
        return Int32(min(left * 1000 + 1, 1_000_000))
    }

    /// Reads what the daemon has sent, waiting at most `seconds` for something to come, and keeps
    /// it for `readLine`. (A close is left for `readLine` to find.)
    func takeArrived(waitingAtMost seconds: Double) {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(max(0, seconds * 1000))) > 0 else { return }
        while receive() == .data {}
    }

    /// Whether lines were read that `readLine` has not returned yet.
    var hasUnread: Bool { next < lines.count }

    enum Received {
        case data
        /// Nothing to read now (or a signal came first).
        case nothing
        case closed
    }

    /// Reads what the socket holds into `lines`, without waiting.
    private func receive() -> Received {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
        if count < 0 { return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK ? .nothing : .closed }
        guard count > 0 else { return .closed }
        chunk.withUnsafeBytes { raw in
            // An unlimited framer never refuses a line.
            try? framer.append(UnsafeRawBufferPointer(rebasing: raw[..<count])) { lines.append(Array($0)) }
        }
        return .data
    }

    /// The next line (without its newline), waiting at most until `deadline` (monotonic seconds).
    func readLine(deadline: Double?) -> Read {
        var looked = false
        while true {
            if next < lines.count {
                let line = lines[next]
                next += 1
                if next == lines.count {
                    lines.removeAll(keepingCapacity: true)
                    next = 0
                }
                return .line(line)
            }
            guard let waitMs = Self.pollTimeout(until: deadline) else {
                // The deadline passed: what the socket holds already is still taken, once, without
                // waiting (so `nextEvent(deadline: monotonicNow())` sees events and the close that
                // are there, not only lines read before).
                if looked { return .timedOut }
                looked = true
                if receive() == .closed { return .closed }
                continue
            }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, waitMs)
            if ready < 0, errno == EINTR { continue }
            if ready == 0 { continue }
            guard receive() != .closed else { return .closed }
        }
    }
}
