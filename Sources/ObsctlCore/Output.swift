import Foundation
import Glibc

/// Where obsctl writes: every line goes out at once with one write(2), so a pipe sees each event
/// as it happens. Tests swap in a capture.
public final class Output: @unchecked Sendable {
    // @unchecked: lines are written from one thread at a time (the command's), or through the lock.
    private let lock = NSLock()
    private let out: Int32
    private let err: Int32

    public init(stdout: Int32 = 1, stderr: Int32 = 2) {
        out = stdout
        err = stderr
    }

    /// Writes `text` and a newline to stdout. A reader that went away (`obsctl watch | head`) ends
    /// obsctl quietly with status 0: the pipeline got what it asked for.
    public func line(_ text: String) {
        guard write(out, Array((text + "\n").utf8)) else {
            if errno == EPIPE { exit(0) }
            return
        }
    }

    /// Writes `obsctl: MESSAGE` and a newline to stderr.
    public func error(_ message: String) {
        _ = write(err, Array("obsctl: \(message)\n".utf8))
    }

    /// Writes `text` and a newline to stderr, with no prefix (what follows an error: a caret
    /// under an expression).
    public func note(_ text: String) {
        _ = write(err, Array((text + "\n").utf8))
    }

    /// Writes `text` as it is to stdout (help, scripts: they end with their own newline).
    public func raw(_ text: String) {
        if !write(out, Array(text.utf8)), errno == EPIPE { exit(0) }
    }

    private func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        lock.withLock {
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }
    }
}
