// The load generator's connections: non-blocking Unix sockets driven by one thread through epoll.
// One thread drives every connection of a run (50 clients, or 1,000 watchers), so the generator
// takes at most one of the machine's two cores and leaves the other to the server under test.
import CLinux
import Foundation

struct BenchError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

final class ClientConnection {
    let fd: Int32
    let wire: Wire
    private var input: [UInt8] = []
    private var inputStart = 0
    private var output: [UInt8] = []
    private var outputStart = 0
    private(set) var replies = 0
    private(set) var deliveries = 0
    /// Replies still owed for what was sent.
    var inFlight = 0
    /// Whether EPOLLOUT is registered (output is waiting for room).
    var wantsOutput = false

    init(path: String, wire: Wire) throws(BenchError) {
        self.wire = wire
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        // Blocking connect: it waits for room in the listen backlog instead of failing.
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw BenchError("connect \(path): \(reason)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { close(fd) }

    /// Queues `bytes`, which hold `replies` commands; `Poller.flush` writes them.
    func queue(_ bytes: [UInt8], replies: Int = 1) {
        output += bytes
        inFlight += replies
    }

    /// Writes queued output until the socket is full; whether some is left.
    @discardableResult
    func writeSome() -> Bool {
        while outputStart < output.count {
            let count = output.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + outputStart, raw.count - outputStart, Int32(MSG_NOSIGNAL))
            }
            if count < 0 { break }
            outputStart += count
        }
        if outputStart == output.count {
            output.removeAll(keepingCapacity: true)
            outputStart = 0
            return false
        }
        if outputStart > 65536 {
            output.removeFirst(outputStart)
            outputStart = 0
        }
        return true
    }

    /// Reads what arrived and counts complete items; the number of new replies and deliveries, or
    /// nil at end of stream.
    func readAvailable() -> (replies: Int, deliveries: Int)? {
        var newReplies = 0
        var newDeliveries = 0
        while true {
            let count = Self.scratch.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count == 0 { return nil }
            if count < 0 { break }
            input.append(contentsOf: Self.scratch[0..<count])
            if count < Self.scratch.count { break }
        }
        input.withUnsafeBufferPointer { buffer in
            while let (item, end) = wire.scan(buffer, from: inputStart) {
                inputStart = end
                switch item {
                case .reply: newReplies += 1
                case .delivery: newDeliveries += 1
                case .other: break
                }
            }
        }
        if inputStart == input.count {
            input.removeAll(keepingCapacity: true)
            inputStart = 0
        } else if inputStart > 65536 {
            input.removeFirst(inputStart)
            inputStart = 0
        }
        replies += newReplies
        deliveries += newDeliveries
        inFlight -= newReplies
        return (newReplies, newDeliveries)
    }

    /// One read buffer for every connection: they are all driven by one thread at a time.
    nonisolated(unsafe) private static var scratch = [UInt8](repeating: 0, count: 262_144)
}

/// epoll over a run's connections, level-triggered.
final class Poller {
    private let epoll: Int32
    private var events = [epoll_event](repeating: epoll_event(), count: 1024)
    private var byFD: [Int32: ClientConnection] = [:]

    init() {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    }

    deinit { close(epoll) }

    func add(_ connection: ClientConnection) {
        byFD[connection.fd] = connection
        control(EPOLL_CTL_ADD, connection, EPOLLIN.rawValue)
    }

    /// Writes pending output, registering for EPOLLOUT while some is left.
    func flush(_ connection: ClientConnection) {
        let left = connection.writeSome()
        guard left != connection.wantsOutput else { return }
        connection.wantsOutput = left
        control(EPOLL_CTL_MOD, connection, EPOLLIN.rawValue | (left ? EPOLLOUT.rawValue : 0))
    }

    /// Waits up to `milliseconds` and calls `readable` for each connection with input.
    func poll(milliseconds: Int32, readable: (ClientConnection) -> Void) {
        let count = events.withUnsafeMutableBufferPointer { epoll_wait(epoll, $0.baseAddress, Int32($0.count), milliseconds) }
        guard count > 0 else { return }
        for index in 0..<Int(count) {
            guard let connection = byFD[events[index].data.fd] else { continue }
            if events[index].events & EPOLLOUT.rawValue != 0 { flush(connection) }
            if events[index].events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                readable(connection)
            }
        }
    }

    private func control(_ operation: Int32, _ connection: ClientConnection, _ interest: UInt32) {
        var event = epoll_event()
        event.events = interest
        event.data.fd = connection.fd
        _ = epoll_ctl(epoll, operation, connection.fd, &event)
    }
}

/// Seconds on the monotonic clock.
func benchNow() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
