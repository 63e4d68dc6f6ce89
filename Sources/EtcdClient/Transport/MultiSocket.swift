// libcurl's multi interface driven from the caller's thread through its socket API
// (`curl_multi_socket_action`): libcurl says which sockets it waits on (the socket callback) and
// when it wants to be called again (the timer callback). The sockets go into an epoll set of the
// client's own, beside a timerfd for the deadlines and an eventfd that announces completions made
// outside `takeCompletions`; the caller's loop watches that epoll set's descriptor, so libcurl's
// sockets wake the loop directly, with no thread in between.
import CCurl
import CLinux
import Glibc

final class MultiSocket {
    let multi: UnsafeMutableRawPointer
    /// The epoll set the caller watches: readable when a socket is ready, a deadline passed or
    /// completions are waiting.
    let fd: Int32
    private let timer: Int32
    private let wakeup: Int32
    /// The sockets libcurl waits on, with the epoll events asked for.
    private var watched: [Int32: UInt32] = [:]
    /// When libcurl wants `obs_curl_multi_socket_action(CURL_SOCKET_TIMEOUT)`; nil: it does not.
    private var curlDeadline: Monotonic?
    /// What the timerfd is set to.
    private var armed: Monotonic?
    private var awake = false
    private var ready = [epoll_event](repeating: epoll_event(), count: 64)

    init() throws(EtcdError) {
        guard let multi = obs_curl_multi_init() else { throw .invalidConfiguration("curl_multi_init failed") }
        let fd = epoll_create1(Int32(EPOLL_CLOEXEC))
        let timer = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC) | Int32(TFD_NONBLOCK))
        let wakeup = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard fd >= 0, timer >= 0, wakeup >= 0 else {
            let reason = String(cString: strerror(errno))
            for descriptor in [fd, timer, wakeup] where descriptor >= 0 { Glibc.close(descriptor) }
            obs_curl_multi_cleanup(multi)
            throw .invalidConfiguration("cannot make the client's epoll set: \(reason)")
        }
        self.multi = multi
        self.fd = fd
        self.timer = timer
        self.wakeup = wakeup
        for descriptor in [timer, wakeup] {
            var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: descriptor))
            epoll_ctl(fd, EPOLL_CTL_ADD, descriptor, &event)
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        obs_curl_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, context)
        obs_curl_multi_setopt_socket_function(multi) { _, socket, what, context, _ in
            Unmanaged<MultiSocket>.fromOpaque(context!).takeUnretainedValue().watch(socket, what)
            return 0
        }
        obs_curl_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, context)
        obs_curl_multi_setopt_timer_function(multi) { _, milliseconds, context in
            let this = Unmanaged<MultiSocket>.fromOpaque(context!).takeUnretainedValue()
            this.curlDeadline = milliseconds < 0 ? nil : .now + .milliseconds(milliseconds)
            return 0
        }
    }

    /// Ends libcurl's part: the handles must have been removed.
    func cleanup() {
        obs_curl_multi_cleanup(multi)
        watched.removeAll()
        curlDeadline = nil
    }

    deinit {
        Glibc.close(fd)
        Glibc.close(timer)
        Glibc.close(wakeup)
    }

    // MARK: Called by the driver

    /// Lets libcurl act on every socket that is ready, and takes the timer's and the eventfd's
    /// readiness (the driver then checks its deadlines anyway).
    func serveReady() {
        let count = ready.withUnsafeMutableBufferPointer { epoll_wait(fd, $0.baseAddress, Int32($0.count), 0) }
        guard count > 0 else { return }
        for index in 0..<Int(count) {
            let descriptor = ready[index].data.fd
            let events = ready[index].events
            if descriptor == timer || descriptor == wakeup {
                var value: UInt64 = 0
                _ = read(descriptor, &value, 8)
                if descriptor == timer { armed = nil } else { awake = false }
                continue
            }
            // A socket an earlier action in this round made libcurl drop is not handed back.
            guard watched[descriptor] != nil else { continue }
            var action: Int32 = 0
            if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue) != 0 { action |= CURL_CSELECT_IN }
            if events & EPOLLOUT.rawValue != 0 { action |= CURL_CSELECT_OUT }
            if events & EPOLLERR.rawValue != 0 { action |= CURL_CSELECT_ERR }
            var running: Int32 = 0
            obs_curl_multi_socket_action(multi, descriptor, action, &running)
        }
    }

    /// Lets libcurl run its timeouts while they are due: new transfers start this way, and one
    /// step of libcurl often asks for the next at once. False if it still wants more (the caller
    /// comes back after other work).
    func runDueTimeouts() -> Bool {
        for _ in 0..<16 {
            guard let deadline = curlDeadline, deadline <= .now else { return true }
            curlDeadline = nil
            var running: Int32 = 0
            obs_curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
        }
        return curlDeadline.map { $0 > .now } ?? true
    }

    /// libcurl's next deadline.
    var deadline: Monotonic? { curlDeadline }

    /// Sets the timerfd to `deadline` (nil: disarmed), unless it is set so already.
    func arm(_ deadline: Monotonic?) {
        guard deadline != armed else { return }
        armed = deadline
        var setting = itimerspec()
        if let deadline {
            // 0 would disarm the timer: a deadline already past is the clock's first nanosecond.
            let nanoseconds = max(1, deadline.nanoseconds)
            setting.it_value = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        }
        timerfd_settime(timer, Int32(TFD_TIMER_ABSTIME), &setting, nil)
    }

    /// Makes the epoll set readable until the next `serveReady`: completions are waiting.
    func wake() {
        guard !awake else { return }
        awake = true
        var one: UInt64 = 1
        _ = write(wakeup, &one, 8)
    }

    // MARK: libcurl's socket callback

    private func watch(_ socket: Int32, _ what: Int32) {
        let events: UInt32
        switch what {
        case CURL_POLL_IN: events = EPOLLIN.rawValue
        case CURL_POLL_OUT: events = EPOLLOUT.rawValue
        case CURL_POLL_INOUT: events = EPOLLIN.rawValue | EPOLLOUT.rawValue
        default:
            // CURL_POLL_REMOVE (and CURL_POLL_NONE): libcurl no longer waits on it.
            if watched.removeValue(forKey: socket) != nil {
                var event = epoll_event()
                epoll_ctl(fd, EPOLL_CTL_DEL, socket, &event)
            }
            return
        }
        var event = epoll_event(events: events, data: epoll_data_t(fd: socket))
        if let current = watched[socket] {
            guard current != events else { return }
            epoll_ctl(fd, EPOLL_CTL_MOD, socket, &event)
        } else if epoll_ctl(fd, EPOLL_CTL_ADD, socket, &event) != 0, errno == EEXIST {
            epoll_ctl(fd, EPOLL_CTL_MOD, socket, &event)
        }
        watched[socket] = events
    }
}
