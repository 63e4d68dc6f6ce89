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

    /// Connects to `path`; the failure says why it could not.
    init(path: String) throws(ConnectFailure) {
        let bytes = Array(path.utf8)
        var address = sockaddr_un()
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw .pathTooLong }
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .other(String(cString: strerror(errno))) }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw ConnectFailure.diagnose(code, path: path)
        }
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Wakes a reader blocked on this socket from another thread; the socket then reads as closed.
    func shutDown() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// Writes `bytes` and a newline; false when the connection broke.
    func send(_ bytes: [UInt8]) -> Bool {
        let line = bytes + [0x0A]
        var offset = 0
        while offset < line.count {
            let sent = line[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// The next line (without its newline), waiting at most until `deadline` (monotonic seconds).
    func readLine(deadline: Double?) -> Read {
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
            var waitMs: Int32 = -1
            if let deadline {
                let left = deadline - monotonicNow()
                if left <= 0 { return .timedOut }
                waitMs = Int32(min(left * 1000 + 1, 1_000_000))
            }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, waitMs)
            if ready < 0, errno == EINTR { continue }
            if ready == 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = recv(fd, &chunk, chunk.count, 0)
            if count < 0, errno == EINTR || errno == EAGAIN { continue }
            guard count > 0 else { return .closed }
            chunk.withUnsafeBytes { raw in
                // An unlimited framer never refuses a line.
                try? framer.append(UnsafeRawBufferPointer(rebasing: raw[..<count])) { lines.append(Array($0)) }
            }
        }
    }
}
