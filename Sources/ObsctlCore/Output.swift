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
    /// obsctl quietly with status 0: the pipeline got what it asked for. Any other failure (a full
    /// disk) ends it with status 1, so `obsctl stats > f.tmp && mv f.tmp f` never keeps a cut file.
    public func line(_ text: String) {
        if let failure = write(out, Array((text + "\n").utf8)) { stdoutFailed(failure) }
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

    /// Ends obsctl quietly (status 0) as soon as the reader of a stdout pipe or socket goes away,
    /// not at the next line: a watch may print nothing for hours, and a shell waits for every
    /// program of a pipeline (`obsctl watch door --values | grep -m1 open`).
    public func exitWhenReaderLeaves() {
        var info = stat()
        guard fstat(out, &info) == 0, [S_IFIFO, S_IFSOCK].contains(info.st_mode & S_IFMT) else { return }
        let fd = out
        Thread.detachNewThread {
            // No events asked for: poll reports only POLLERR (a pipe's reader gone) or POLLHUP.
            var poller = pollfd(fd: fd, events: 0, revents: 0)
            while poll(&poller, 1, -1) < 0, errno == EINTR {}
            if poller.revents & Int16(POLLERR | POLLHUP) != 0 { exit(0) }
        }
    }

    /// Writes `text` as it is to stdout (help, scripts: they end with their own newline).
    public func raw(_ text: String) {
        if let failure = write(out, Array(text.utf8)) { stdoutFailed(failure) }
    }

    /// Ends obsctl after stdout failed with `code`, as `line` says.
    private func stdoutFailed(_ code: Int32) -> Never {
        if code == EPIPE { exit(0) }
        error("cannot write to stdout: \(String(cString: strerror(code)))")
        exit(1)
    }

    /// Writes all of `bytes`; the errno when that fails. A stdout another program left
    /// non-blocking is waited on, not failed.
    private func write(_ fd: Int32, _ bytes: [UInt8]) -> Int32? {
        lock.withLock {
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if written < 0, errno == EINTR { continue }
                if written < 0, errno == EAGAIN {
                    var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&poller, 1, -1)
                    continue
                }
                guard written > 0 else { return written < 0 ? errno : EIO }
                offset += written
            }
            return nil
        }
    }
}
