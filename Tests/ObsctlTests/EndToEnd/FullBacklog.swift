// A Unix socket whose queue of connections waiting to be accepted is full, as obsd's is when it is
// stopped (SIGSTOP, Ctrl-Z), stuck, or swamped: a blocking connect(2) to it waits until something
// accepts, which nothing here ever does.
import Foundation
import Glibc
import TestSupport
import XCTest

final class FullBacklog {
    let path: String
    /// The listener made here (-1 when the queue filled is another process's, obsd's).
    private let listener: Int32
    /// Connections queued and never accepted.
    private var queued: [Int32] = []

    /// A listener of its own at `path`, with the smallest queue (listen(2) with 0 takes one
    /// connection on Linux), filled.
    init(listeningAt path: String) throws {
        self.path = path
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = unixAddress(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
        guard bound, listen(listener, 0) == 0 else {
            close(listener)
            throw POSIXError(.EIO)
        }
        try fill()
    }

    /// Fills the queue of the listener at `path`, which must not be accepting (a stopped obsd).
    init(filling path: String) throws {
        self.path = path
        listener = -1
        try fill()
    }

    deinit {
        for fd in queued { close(fd) }
        if listener >= 0 { close(listener) }
    }

    /// Connects without blocking until the kernel says the queue is full (EAGAIN).
    private func fill() throws {
        var address = unixAddress(path)
        for _ in 0..<100_000 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if connected == 0 {
                queued.append(fd)
                continue
            }
            let error = errno
            close(fd)
            if error == EAGAIN { return }
            throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
        }
        XCTFail("the queue of \(path) never filled")
    }
}

private func unixAddress(_ path: String) -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    return address
}

/// How many Unix stream sockets process `pid` holds that are neither connected nor listening: one
/// is a connection under way (made, and not connected yet), as one to a full queue stays.
func unconnectedUnixSockets(of pid: Int32 = getpid()) -> Int {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
    var inodes = Set<String>()
    for fd in descriptors {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
              target.hasPrefix("socket:[") else { continue }
        inodes.insert(String(target.dropFirst(8).dropLast()))
    }
    // Num RefCount Protocol Flags Type St Inode [Path]: Flags 00010000 marks a listener, Type
    // 0001 is SOCK_STREAM, St 01 is SS_UNCONNECTED.
    // Read to its end: /proc says its files are empty, and a read sized by that stops at a page.
    let bytes = (try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/net/unix")).readToEnd()) ?? nil
    let table = String(decoding: bytes ?? Data(), as: UTF8.self)
    return table.split(separator: "\n").dropFirst().filter { line in
        let fields = line.split(separator: " ")
        return fields.count >= 7 && fields[3] == "00000000" && fields[4] == "0001" && fields[5] == "01"
            && inodes.contains(String(fields[6]))
    }.count
}

extension Daemon {
    /// Stops obsd (SIGSTOP, as Ctrl-Z does) and waits until it is stopped: until then it may still
    /// accept a connection, and make room in a queue just filled.
    func suspend() {
        obsd!.signal(SIGSTOP)
        let pid = obsd!.pid
        waitFor("obsd to stop") {
            // The state follows the command name, which is in parentheses: "PID (obsd) T ...".
            let stat = (try? FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/stat")).readToEnd()) ?? nil
            let text = String(decoding: stat ?? Data(), as: UTF8.self)
            guard let end = text.range(of: ") ", options: .backwards) else { return false }
            return text[end.upperBound...].hasPrefix("T")
        }
    }

    func resume() { obsd?.signal(SIGCONT) }
}
