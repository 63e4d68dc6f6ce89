// File descriptors: one per client, and obsd's own (listener, epoll, signalfd, eventfds, lock,
// database, WAL, shared memory). Started with systemd's default soft limit of 1,024, obsd would
// run out before its own max_connections, accept4 would fail with EMFILE, and the
// level-triggered listener would wake the loop again at once, forever, with the clients past the
// limit hanging unanswered. So:
// 1. at start the soft limit is raised to the hard one (LimitNOFILE= in the units sets both);
// 2. max_connections is kept under what the limit leaves once obsd's own descriptors and a margin
//    are counted, and the log says so when it is lowered;
// 3. one descriptor is kept in reserve: if accept4 still fails with EMFILE or ENFILE, the reserve
//    is closed, the client accepted, answered `limit` and closed, and the reserve taken again;
// 4. if even that fails, the listener leaves the epoll set for a while (Server.pauseAccepting).
import CLinux
import Glibc

enum DescriptorLimit {
    /// Descriptors kept free beyond those open when the ceiling is computed: SQLite's temporary
    /// files, the configuration and definitions files read on reload, sd_notify's socket, NSS.
    static let margin = 32

    /// Raises the soft RLIMIT_NOFILE to the hard one; the soft limit in force afterwards.
    @discardableResult
    static func raiseSoftLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        // An unlimited hard limit is still capped by the kernel's nr_open.
        let wanted = min(limit.rlim_max, rlim_t(1 << 20))
        if limit.rlim_cur < wanted {
            var raised = limit
            raised.rlim_cur = wanted
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// The descriptors open now.
    static func openDescriptors() -> Int {
        guard let directory = opendir("/proc/self/fd") else { return 16 }
        defer { closedir(directory) }
        var count = -1 // the directory's own descriptor
        while let entry = readdir(directory) {
            if entry.pointee.d_name.0 != UInt8(ascii: ".") { count += 1 }
        }
        return max(count, 0)
    }

    /// The most connections the descriptor limit allows next to what obsd holds now.
    static func connectionCeiling() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return .max }
        return max(1, Int(clamping: limit.rlim_cur) - openDescriptors() - margin)
    }
}

/// One descriptor held back so that a client can still be accepted, told `limit` and closed when
/// every other descriptor is in use.
final class ReservedDescriptor {
    private var fd: Int32

    init() {
        fd = eventfd(0, Int32(EFD_CLOEXEC))
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Accepts one connection from `listener` with the reserve's descriptor, sends it `line` and
    /// closes it, then takes the reserve again. Whether a connection was taken off the backlog.
    func refuse(from listener: Int32, with line: [UInt8]) -> Bool {
        guard fd >= 0 else {
            // Lost when even it could not be taken again: try now, for the next time.
            fd = eventfd(0, Int32(EFD_CLOEXEC))
            return false
        }
        close(fd)
        let client = accept4(listener, nil, nil, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
        if client >= 0 {
            // A new socket's buffer is empty: the short line goes out whole.
            _ = line.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            close(client)
        }
        fd = eventfd(0, Int32(EFD_CLOEXEC))
        return client >= 0
    }
}
