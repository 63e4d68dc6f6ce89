// The daemon's loop: one thread, one turn after another, until the shutdown sequence ends.
//
// A turn:
// 1. wait until a descriptor is ready or the next timer is due (`nextTimeout`: the store's timers,
//    the watchdog, client_timeout, a write retry, the shutdown deadline; at once if output is
//    waiting to be flushed);
// 2. dispatch what is ready (`dispatch`): signals and in-process control requests are noted, new
//    connections accepted, requests read and answered, blocked output written;
// 3. act on what was asked: reload, or start the shutdown (`beginShutdown`);
// 4. end the turn (`endTurn`): due timers run, stalled clients are dropped, the write gate writes
//    the turn's batch and releases the lines it held, every connection with output is flushed
//    once, the watchdog is fed.
// The loop ends once shutting down and every connection is gone, or the flush deadline passed.
import Glibc
import ObsCore

final class DaemonLoop {
    /// How long shutdown waits for clients to take their last bytes.
    static let flushDeadline = 3.0

    private let loop: EventLoop
    private let server: Server
    private let store: Store
    private let gate: WriteGate?
    private let cluster: EtcdLog?
    private let signals: SignalSource?
    private let control: DaemonControl?
    private let notifier: Notifier
    private let log: Logger
    private let reload: () -> Void
    private let watchdog: Double?
    @exclusivity(unchecked) private var nextWatchdog: Double?
    /// Set once shutting down: when the last flush gives up.
    @exclusivity(unchecked) private var stopping: Double?
    /// The listener taken out of the loop at shutdown: its socket file goes at the very end.
    private var stoppedListener: Listener?

    init(loop: EventLoop, server: Server, store: Store, gate: WriteGate?, cluster: EtcdLog?, signals: SignalSource?, control: DaemonControl?,
         notifier: Notifier, log: Logger, watchdog: Double?, reload: @escaping () -> Void) {
        self.loop = loop
        self.server = server
        self.store = store
        self.gate = gate
        self.cluster = cluster
        self.signals = signals
        self.control = control
        self.notifier = notifier
        self.log = log
        self.watchdog = watchdog
        self.reload = reload
        nextWatchdog = watchdog.map { monotonicSeconds() + $0 }
    }

    /// What a turn's ready descriptors asked for.
    private struct Requests {
        var stop = false
        var reload = false
    }

    /// Runs turns until the shutdown sequence has ended; throws when the daemon must stop at once
    /// (a failed fsync), after dropping every connection unanswered.
    func run() throws(DaemonError) {
        while true {
            let ready = loop.wait(timeout: nextTimeout(now: monotonicSeconds()))
            let requests = dispatch(ready, now: monotonicSeconds())
            let now = monotonicSeconds()
            if requests.reload, stopping == nil { reload() }
            if requests.stop, stopping == nil { beginShutdown(now: now) }
            try endTurn(now: now)
            if let deadline = stopping, server.connections.isEmpty || now >= deadline { break }
        }
        server.dropAll()
        stoppedListener?.removeSocketFile()
    }

    /// Step 1: seconds until something is due (nil: nothing is).
    private func nextTimeout(now: Double) -> Double? {
        // The earliest of these, without an array per turn.
        var due: Double?
        func consider(_ time: Double?) {
            if let time, time < (due ?? .infinity) { due = time }
        }
        consider(store.nextDeadline)
        consider(nextWatchdog)
        consider(server.nextExpiry(now: now).map { now + $0 })
        consider(stopping)
        consider(server.hasUnflushedOutput ? now : nil)
        consider(gate?.retryAt)
        consider(gate?.idleDueAt)
        consider(cluster?.nextDeadline)
        consider(server.acceptResumeAt)
        return due.map { max(0, $0 - now) }
    }

    /// Step 2.
    private func dispatch(_ ready: [EventLoop.Ready], now: Double) -> Requests {
        var requests = Requests()
        for event in ready {
            if let cluster, event.fd == cluster.completionFD {
                cluster.processCompletions(now: now)
            } else if let signals, event.fd == signals.fd {
                for action in signals.drain() {
                    switch action {
                    case .stop(let signal):
                        log.info("received \(signal == SIGINT ? "SIGINT" : "SIGTERM"); shutting down")
                        requests.stop = true
                    case .reload:
                        requests.reload = true
                    }
                }
            } else if let control, event.fd == control.fd {
                let asked = control.take()
                requests.stop = requests.stop || asked.stop
                requests.reload = requests.reload || asked.reload
            } else if event.fd == server.listenerFD {
                server.acceptAll(now: now)
            } else {
                if event.readable || event.hangup { server.readable(event.fd, hangup: event.hangup) }
                if event.writable { server.writable(event.fd, now: now) }
            }
        }
        return requests
    }

    /// Step 3, at a stop request: STOPPING=1, no more connections, what each client has already
    /// sent answered `shutting_down`, then `goodbye` (Server.beginShutdown); the loop then runs
    /// until the clients have their last bytes.
    private func beginShutdown(now: Double) {
        notifier.send("STOPPING=1")
        stoppedListener = server.stopAccepting()
        server.beginShutdown()
        stopping = now + Self.flushDeadline
    }

    /// Step 4.
    private func endTurn(now: Double) throws(DaemonError) {
        if let deadline = store.nextDeadline, deadline <= now { store.tick() }
        if let cluster, let deadline = cluster.nextDeadline, deadline <= now { cluster.tick(now: now) }
        server.expireStalled(now: now)
        server.resumeAccepting(now: now)
        do throws(GroupCommitFailure) {
            try gate?.endTurn(now: now)
        } catch {
            // After a failed fsync nothing can be promised: acknowledging would break strict's
            // promise, so obsd stops without acknowledging the unsynced writes.
            log.error("\(error.message); stopping without acknowledging unsynced writes")
            server.dropAll()
            (stoppedListener ?? server.stopAccepting())?.removeSocketFile()
            throw DaemonError(error.message)
        }
        server.flush(now: now)
        if let interval = watchdog, let due = nextWatchdog, due <= now {
            notifier.send("WATCHDOG=1")
            nextWatchdog = now + interval
        }
    }
}
