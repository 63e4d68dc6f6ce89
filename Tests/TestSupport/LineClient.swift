// A raw line client on the daemon's socket: the protocol as a test sends it, byte for byte.
import Foundation
import Glibc

/// A blocking client on the daemon's socket, with a read timeout so a test can never hang.
/// Used by one thread at a time.
public final class Client: @unchecked Sendable {
    public let fd: Int32
    private var buffer: [UInt8] = []
    private var atEOF = false
    /// At most this many bytes per read, and this pause (µs) after each: a client that reads
    /// steadily but slowly.
    public var readChunkBytes = 65536
    public var pauseAfterReadMicroseconds: UInt32 = 0

    public init(_ path: String, timeout: Int = 20) throws {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        fd = try connectedSocket(AF_UNIX, to: address, timeout: timeout)
    }

    deinit { close(fd) }

    /// Sends all of `text`; false if the connection broke.
    @discardableResult
    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// Whether the last `readLine` that returned nil did so at its read timeout, with the
    /// connection still open (rather than at EOF or on an error).
    public private(set) var timedOut = false

    /// The next line without its newline; nil at EOF, on error or after the read timeout.
    public func readLine() -> String? {
        timedOut = false
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: readChunkBytes)
            let count = recv(fd, &chunk, chunk.count, 0)
            if count < 0, errno == EINTR { continue }
            if count == 0 { atEOF = true }
            guard count > 0 else {
                timedOut = count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
                return nil
            }
            buffer += chunk[..<count]
            if pauseAfterReadMicroseconds > 0 { usleep(pauseAfterReadMicroseconds) }
        }
    }

    /// Whether the daemon closed the connection (EOF) with nothing more to read.
    public func readsEOF() -> Bool {
        buffer.isEmpty && readLine() == nil && atEOF
    }

    public func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }
}

/// A stream socket of `family` connected to `address` (a `sockaddr_un` or `sockaddr_in`), each of
/// its reads and writes waiting at most `timeout` seconds, so that a test cannot hang on it.
public func connectedSocket<Address>(_ family: Int32, to address: Address, timeout: Int) throws -> Int32 {
    let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    var address = address
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
    }
    guard result == 0 else {
        let error = errno
        close(fd)
        throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
    }
    var time = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    return fd
}
