import CLinux
import Glibc
import Synchronization

/// A signal one thread raises to end another thread's waits at once: connecting to obsd (whose
/// queue of connections to accept may stay full), and the pauses between attempts to reconnect.
/// Raised once, for good: every wait from then on ends at once too.
///
/// Give the same one to `ObsConnection(path:deadline:cancellation:)` (a connection already open
/// is ended with `ObsConnection.shutDown()`), or to `WatchStream`, whose `cancel()` raises it.
public final class Cancellation: Sendable {
    private let raised = Atomic<Bool>(false)
    /// Readable once raised, so that a wait can poll it beside its timeout. -1 when the system
    /// gave no descriptor: waits then end at their timeout only, and `isCancelled` still tells.
    private let signal: Int32

    public init() {
        signal = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
    }

    deinit { if signal >= 0 { close(signal) } }

    public var isCancelled: Bool { raised.load(ordering: .acquiring) }

    /// Ends every wait on this signal, now and from now on. Any thread may call it, any number of times.
    public func cancel() {
        guard !raised.exchange(true, ordering: .acquiringAndReleasing), signal >= 0 else { return }
        // Never read back: the descriptor stays readable.
        var one: UInt64 = 1
        _ = write(signal, &one, MemoryLayout<UInt64>.size)
    }

    /// Waits `seconds`, or less when cancelled meanwhile; false when cancelled.
    @discardableResult
    public func sleep(_ seconds: Double) -> Bool {
        Self.pause(seconds, cancellation: self)
    }

    /// Waits `seconds`, ending early when `cancellation` (if any) is raised; false when it is.
    @discardableResult
    static func pause(_ seconds: Double, cancellation: Cancellation?) -> Bool {
        let end = monotonicNow() + seconds
        while cancellation?.isCancelled != true {
            let left = end - monotonicNow()
            if left <= 0 { return true }
            // poll(2) ignores a negative descriptor: with no signal to watch, it only sleeps.
            var poller = pollfd(fd: cancellation?.signal ?? -1, events: Int16(POLLIN), revents: 0)
            _ = poll(&poller, 1, Int32(min(left * 1000 + 1, 1_000_000)))
        }
        return false
    }
}
