// A thin epoll wrapper. Level-triggered: a connection that still has input after its fair share of
// reads in one turn is reported again on the next turn, so one busy client cannot starve others,
// and no edge can be lost. Each registration carries the fd itself as its token.
import CLinux
import Glibc

final class EventLoop {
    struct Ready {
        var fd: Int32
        var readable: Bool
        var writable: Bool
        /// Error or hang-up: the fd should be read to EOF and closed.
        var hangup: Bool
    }

    static let input = EPOLLIN.rawValue
    static let output = EPOLLOUT.rawValue

    private let epoll: Int32
    @exclusivity(unchecked) private var events = [epoll_event](repeating: epoll_event(), count: 256)
    /// What the last wait found; its storage is reused by the next (the turn has let go of it by
    /// then), so a turn allocates nothing.
    @exclusivity(unchecked) private var ready: [Ready] = []

    init() throws(SystemError) {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw SystemError("epoll_create1") }
    }

    deinit { close(epoll) }

    func add(_ fd: Int32, _ interest: UInt32) throws(SystemError) {
        try control(EPOLL_CTL_ADD, fd, interest)
    }

    func modify(_ fd: Int32, _ interest: UInt32) throws(SystemError) {
        try control(EPOLL_CTL_MOD, fd, interest)
    }

    /// Stops watching `fd`; closing it would too, but only once no other descriptor shares it.
    func remove(_ fd: Int32) {
        var event = epoll_event()
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, fd, &event)
    }

    /// Waits up to `timeout` seconds (nil: forever) for ready descriptors.
    func wait(timeout: Double?) -> [Ready] {
        let milliseconds: Int32
        if let timeout {
            // Round up so a timer is never woken a little early and spun on.
            milliseconds = Int32(min(max(0, (timeout * 1000).rounded(.up)), 3_600_000))
        } else {
            milliseconds = -1
        }
        let count = events.withUnsafeMutableBufferPointer { buffer in
            epoll_wait(epoll, buffer.baseAddress, Int32(buffer.count), milliseconds)
        }
        ready.removeAll(keepingCapacity: true)
        for index in 0..<Int(max(0, count)) {
            let flags = events[index].events
            ready.append(Ready(
                fd: events[index].data.fd,
                readable: flags & EPOLLIN.rawValue != 0,
                writable: flags & EPOLLOUT.rawValue != 0,
                hangup: flags & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0))
        }
        return ready
    }

    private func control(_ operation: Int32, _ fd: Int32, _ interest: UInt32) throws(SystemError) {
        var event = epoll_event()
        event.events = interest
        event.data.fd = fd
        guard epoll_ctl(epoll, operation, fd, &event) == 0 else { throw SystemError("epoll_ctl") }
    }
}
