// Signals arrive on a signalfd that the event loop watches like any socket, so a handler never runs
// in signal context and the loop sees SIGTERM, SIGINT and SIGHUP in order with everything else.
// The signals are blocked first, in the main thread before any other starts, so every thread
// inherits the mask and none of them takes the default action (termination).
import CLinux
import Glibc
import Synchronization

final class SignalSource {
    enum Action { case stop(signal: Int32), reload }

    let fd: Int32

    init() throws(SystemError) {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, signal) }
        guard pthread_sigmask(SIG_BLOCK, &set, nil) == 0 else { throw SystemError("pthread_sigmask") }
        fd = signalfd(-1, &set, Int32(SFD_NONBLOCK | SFD_CLOEXEC))
        guard fd >= 0 else { throw SystemError("signalfd") }
    }

    deinit { close(fd) }

    /// The signals received since the last call, in order.
    func drain() -> [Action] {
        var actions: [Action] = []
        var info = signalfd_siginfo()
        while read(fd, &info, MemoryLayout<signalfd_siginfo>.size) == MemoryLayout<signalfd_siginfo>.size {
            let signal = Int32(info.ssi_signo)
            actions.append(signal == SIGHUP ? .reload : .stop(signal: signal))
        }
        return actions
    }
}

/// Stops and reloads asked for from another thread (tests, and anything embedding the daemon):
/// an eventfd the loop watches, so a request wakes it at once.
public final class DaemonControl: @unchecked Sendable {
    let fd: Int32
    private let requests = Mutex((stop: false, reload: false))

    public init() {
        fd = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
    }

    deinit { close(fd) }

    /// Asks the daemon to shut down as on SIGTERM.
    public func requestStop() {
        requests.withLock { $0.stop = true }
        wake()
    }

    /// Asks the daemon to reload its configuration as on SIGHUP.
    public func requestReload() {
        requests.withLock { $0.reload = true }
        wake()
    }

    /// The requests since the last call.
    func take() -> (stop: Bool, reload: Bool) {
        var counter: UInt64 = 0
        _ = read(fd, &counter, 8)
        return requests.withLock { asked in
            defer { asked = (false, false) }
            return asked
        }
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(fd, &one, 8)
    }
}
