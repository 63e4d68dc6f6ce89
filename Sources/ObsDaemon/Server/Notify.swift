// systemd's notification protocol (sd_notify(3)): datagrams of `NAME=VALUE` lines sent to the
// AF_UNIX socket named by $NOTIFY_SOCKET. A name starting with '@' is in the abstract namespace
// (the '@' becomes a NUL byte). Without $NOTIFY_SOCKET every call does nothing.
// CLinux too: its shim includes <sys/socket.h>, and when another file of the module loads it first,
// SOCK_* and MSG_* are visible only through it.
import CLinux
import Glibc

public final class Notifier {
    private let address: [UInt8]?
    private var fd: Int32 = -1
    private let log: Logger

    public init(socketPath: String?, log: Logger) {
        self.log = log
        guard let socketPath, !socketPath.isEmpty,
              socketPath.hasPrefix("/") || socketPath.hasPrefix("@") else {
            address = nil
            return
        }
        var bytes = Array(socketPath.utf8)
        if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }
        address = bytes
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Whether a service manager listens.
    public var isActive: Bool { address != nil }

    /// Sends `state` (one or more `NAME=VALUE` lines) in one datagram.
    public func send(_ state: String) {
        guard let address else { return }
        if fd < 0 {
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                log.warn("sd_notify: \(SystemError("socket"))")
                return
            }
        }
        var target = sockaddr_un()
        target.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: target.sun_path)
        guard address.count < capacity else {
            log.warn("sd_notify: NOTIFY_SOCKET is too long")
            return
        }
        withUnsafeMutableBytes(of: &target.sun_path) { path in
            path.copyBytes(from: address)
        }
        // An abstract name's length is exact (no terminating NUL); a path may include its NUL.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + address.count + (address[0] == 0 ? 0 : 1))
        let sent = Array(state.utf8).withUnsafeBytes { bytes in
            withUnsafePointer(to: &target) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, length)
                }
            }
        }
        if sent < 0 { log.warn("sd_notify \(state.replacingNewlines()): \(SystemError("sendto"))") }
    }

    /// RELOADING=1 with the monotonic time in microseconds, as Type=notify-reload expects.
    public func reloading() {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        let microseconds = UInt64(spec.tv_sec) * 1_000_000 + UInt64(spec.tv_nsec) / 1000
        send("RELOADING=1\nMONOTONIC_USEC=\(microseconds)")
    }
}

/// The watchdog interval systemd asks for: $WATCHDOG_USEC, when $WATCHDOG_PID is unset or ours.
func watchdogInterval(_ environment: DaemonEnvironment) -> Double? {
    guard let text = environment["WATCHDOG_USEC"], let microseconds = UInt64(text), microseconds > 0 else { return nil }
    if let pid = environment["WATCHDOG_PID"], pid != String(getpid()) { return nil }
    return Double(microseconds) / 1_000_000
}
