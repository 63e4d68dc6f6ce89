// libcurl's multi interface driven from the caller's thread through its socket API
// (`curl_multi_socket_action`): libcurl says which sockets it waits on (the socket callback) and
// when it wants to be called again (the timer callback). The sockets go into an epoll set of the
// client's own, beside a timerfd for the deadlines and an eventfd that announces completions made
// outside `takeCompletions`; the caller's loop watches that epoll set's descriptor, so libcurl's
// sockets wake the loop directly, with no thread in between.
//
// A request over a pooled connection would cost two `epoll_ctl` (libcurl takes the socket and
// asks for input, then gives it back with CURL_POLL_REMOVE) and two `timerfd_settime` (libcurl's
// deadlines come and go with each transfer). Neither is paid in the steady state:
// - A connection's socket that libcurl gives back to its pool stays in the epoll set, with the
//   interest it had. It is taken out only if an event comes for it while libcurl does not wait on
//   it (the member closed the idle connection, or sent something): level-triggered epoll would
//   report it on every turn otherwise. libcurl finds such a connection dead when it next takes it
//   (its own check) and makes a new one. Descriptor numbers are reused: a connection's socket is
//   known from when libcurl made it (CURLOPT_SOCKOPTFUNCTION) until it closes it
//   (CURLOPT_CLOSESOCKETFUNCTION, which closes it here), so the table never holds a number whose
//   socket was closed behind its back; any other socket libcurl waits on (a resolver's) is taken
//   out as soon as libcurl gives it back.
// - The timerfd is set only when a deadline comes earlier than the one it is set to (or it is not
//   set). One that is no longer wanted, or was moved later, fires early: that turn finds nothing
//   due and sets it to the next deadline.
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
    /// The sockets in the epoll set, with the events they are registered for: those libcurl waits
    /// on, and connections resting in its pool since (the header).
    private var registered: [Int32: UInt32] = [:]
    /// The sockets libcurl waits on now.
    private var watched: Set<Int32> = []
    /// libcurl's connection sockets, from their making to their closing.
    private var connections: Set<Int32> = []
    /// When libcurl wants `obs_curl_multi_socket_action(CURL_SOCKET_TIMEOUT)`; nil: it does not.
    private var curlDeadline: Monotonic?
    /// What the timerfd is set to.
    private var armed: Monotonic?
    private var awake = false
    private var ready = [epoll_event](repeating: epoll_event(), count: 64)
    /// The idle connections libcurl keeps (to any member): more than the requests a daemon has in
    /// flight at once, as a rule.
    static let maxIdleConnections = 32

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
        // libcurl's default keeps four idle connections per easy handle added at the moment the
        // connection is given back: with requests done one after another, as few as a handful,
        // so that after a burst it closes connections the next burst opens again.
        obs_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, MultiSocket.maxIdleConnections)
        // One transfer per connection, HTTP/2 included: libcurl 7.88's HTTP/2 streams sharing a
        // connection, driven through curl_multi_socket_action, could leave a stream's answer read
        // into libcurl's buffers and never handed over (a request stalled until the next
        // transfer on that connection woke it: seconds behind a busy watch). Connections are
        // still kept and reused, one request after another, as with HTTP/1.1.
        obs_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, 0)
        obs_curl_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, context)
        obs_curl_multi_setopt_timer_function(multi) { _, milliseconds, context in
            let this = Unmanaged<MultiSocket>.fromOpaque(context!).takeUnretainedValue()
            this.curlDeadline = milliseconds < 0 ? nil : .now + .milliseconds(milliseconds)
            return 0
        }
    }

    /// Ends libcurl's part (it closes its pooled connections): the handles must have been removed.
    func cleanup() {
        obs_curl_multi_cleanup(multi)
        for socket in registered.keys { unregister(socket) }
        watched.removeAll()
        curlDeadline = nil
    }

    /// Lets the easy handle's connections tell this set when they are made and closed (the
    /// header); libcurl keeps these callbacks with the connection, for its life in the pool.
    func adopt(_ easy: UnsafeMutableRawPointer) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        obs_curl_setopt_pointer(easy, CURLOPT_SOCKOPTDATA, context)
        obs_curl_setopt_sockopt_function(easy) { context, socket, purpose in
            if purpose == CURLSOCKTYPE_IPCXN {
                Unmanaged<MultiSocket>.fromOpaque(context!).takeUnretainedValue().made(socket)
            }
            return CURL_SOCKOPT_OK
        }
        obs_curl_setopt_pointer(easy, CURLOPT_CLOSESOCKETDATA, context)
        obs_curl_setopt_closesocket_function(easy) { context, socket in
            Unmanaged<MultiSocket>.fromOpaque(context!).takeUnretainedValue().closing(socket)
            return Glibc.close(socket) == 0 ? 0 : 1
        }
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
            // A pooled connection that became ready (the member closed it), or a socket an
            // earlier action in this round made libcurl drop: not libcurl's to hear of.
            guard watched.contains(descriptor) else {
                unregister(descriptor)
                continue
            }
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
    /// Lets libcurl run the transfers on `socket` as if it were readable: what they read from it
    /// and have not handed over yet goes out (a read that finds nothing new costs one EAGAIN).
    func act(on socket: Int32) {
        var running: Int32 = 0
        obs_curl_multi_socket_action(multi, socket, CURL_CSELECT_IN, &running)
    }

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

    /// Makes the timerfd fire by `deadline` (nil: nothing is due). It is set only when it is not
    /// set or set later than that: one set earlier fires early, and the turn it wakes sets it again.
    func arm(_ deadline: Monotonic?) {
        guard let deadline, armed.map({ deadline < $0 }) ?? true else { return }
        set(deadline)
    }

    /// Stops the timerfd, for good: the client is closed.
    func disarm() {
        guard armed != nil else { return }
        set(nil)
    }

    private func set(_ deadline: Monotonic?) {
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

    // MARK: libcurl's callbacks

    func watch(_ socket: Int32, _ what: Int32) {
        let events: UInt32
        switch what {
        case CURL_POLL_IN: events = EPOLLIN.rawValue
        case CURL_POLL_OUT: events = EPOLLOUT.rawValue
        case CURL_POLL_INOUT: events = EPOLLIN.rawValue | EPOLLOUT.rawValue
        default:
            // CURL_POLL_REMOVE (and CURL_POLL_NONE): libcurl no longer waits on it. A connection
            // going back to the pool stays registered (the header).
            watched.remove(socket)
            if !connections.contains(socket) { unregister(socket) }
            return
        }
        watched.insert(socket)
        var event = epoll_event(events: events, data: epoll_data_t(fd: socket))
        if let current = registered[socket] {
            guard current != events else { return }
            if epoll_ctl(fd, EPOLL_CTL_MOD, socket, &event) != 0, errno == ENOENT {
                epoll_ctl(fd, EPOLL_CTL_ADD, socket, &event)
            }
        } else if epoll_ctl(fd, EPOLL_CTL_ADD, socket, &event) != 0, errno == EEXIST {
            epoll_ctl(fd, EPOLL_CTL_MOD, socket, &event)
        }
        registered[socket] = events
    }

    /// libcurl made a connection's socket: its number is new, whatever the table held for it.
    func made(_ socket: Int32) {
        registered[socket] = nil
        connections.insert(socket)
    }

    /// libcurl is about to close a connection's socket.
    func closing(_ socket: Int32) {
        unregister(socket)
        watched.remove(socket)
        connections.remove(socket)
    }

    private func unregister(_ socket: Int32) {
        guard registered.removeValue(forKey: socket) != nil else { return }
        var event = epoll_event()
        epoll_ctl(fd, EPOLL_CTL_DEL, socket, &event)
    }
}
