// The connections side of the event loop: accepting (connection limit, SO_PEERCRED and the allow
// policy), reading and framing requests into each connection's Session, flushing each
// connection's output once per turn, back-pressure and client_timeout. It runs on the daemon's
// one loop thread, which also owns the store.
import CLinux
import Glibc
import ObsCore

final class Server {
    private let loop: EventLoop
    private let store: Store
    private let log: Logger
    // The state below is read or written for every request and every turn, by the loop's one
    // thread: where marked `@exclusivity(unchecked)`, with no dynamic exclusivity checks (they were
    // about a third of the daemon's instructions per request).
    @exclusivity(unchecked) private(set) var listener: Listener?
    @exclusivity(unchecked) var limits: Limits
    @exclusivity(unchecked) var policy: AccessPolicy

    /// The log lines clients can cause, rate-limited.
    private let clientLog: ClientLog
    /// A descriptor kept free to refuse clients with when every other one is in use.
    private let reserve = ReservedDescriptor()
    @exclusivity(unchecked) private(set) var connections: [Int32: Connection] = [:]
    /// Set by `beginShutdown`.
    @exclusivity(unchecked) private var stopping = false
    /// While `beginShutdown` reads every connection: the ones ready for their `goodbye`, which
    /// waits until every ephemeral key is removed.
    private var readyForGoodbye: [Connection]?
    /// The connections with `stalledSince` set: the only ones the client_timeout checks of each
    /// turn need to look at (a loop over every connection per turn costs the 1,000-watcher case
    /// more than its deliveries).
    @exclusivity(unchecked) private var stalled: [Int32: Connection] = [:]
    private let flushList = FlushList()
    /// The connections being flushed (`flush`).
    @exclusivity(unchecked) private var flushing: [Connection] = []
    /// Holds lines until the changes they show are written (nil in memory mode, where nothing waits).
    private let gate: WriteGate?
    @exclusivity(unchecked) private var readBuffer = [UInt8](repeating: 0, count: 65536)

    init(loop: EventLoop, listener: Listener, store: Store, gate: WriteGate?, limits: Limits,
         policy: AccessPolicy, log: Logger) throws(SystemError) {
        self.loop = loop
        self.gate = gate
        self.listener = listener
        self.store = store
        self.limits = limits
        self.policy = policy
        self.log = log
        clientLog = ClientLog(log)
        try loop.add(listener.fd, EventLoop.input)
    }

    var listenerFD: Int32? { listener?.fd }

    // MARK: - Accepting

    /// Accepts every pending connection. Out of descriptors, each waiting client is still
    /// answered `limit` and closed (through the reserved descriptor); when not even that works,
    /// accepting pauses (`pauseAccepting`) instead of waking the loop again at once.
    func acceptAll(now: Double) {
        guard let listener, acceptResumeAt == nil else { return }
        while true {
            let fd = accept4(listener.fd, nil, nil, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
            if fd >= 0 {
                admit(fd, now: now)
                continue
            }
            let error = SystemError("accept4")
            switch error.code {
            case EAGAIN, EINTR:
                return
            case ECONNABORTED, EPROTO:
                continue
            case EMFILE, ENFILE:
                let refusal = ObsError(.limit, "the daemon is out of file descriptors; try again later")
                if reserve.refuse(from: listener.fd, with: LineEncoding.error(id: .null, refusal).bytes) {
                    clientLog.warn(.outOfDescriptors, now: now, "connection refused: out of file descriptors (\(error)); raise LimitNOFILE= or lower max_connections")
                    continue
                }
                clientLog.warn(.acceptFailed, now: now, "accept: \(error); not accepting for \(Self.acceptPause) s")
                return pauseAccepting(now: now)
            default:
                clientLog.warn(.acceptFailed, now: now, "accept: \(error); not accepting for \(Self.acceptPause) s")
                return pauseAccepting(now: now)
            }
        }
    }

    /// How long the listener stays out of the epoll set after accepting failed.
    static let acceptPause = 1.0

    /// When accepting resumes, while it is paused.
    @exclusivity(unchecked) private(set) var acceptResumeAt: Double?

    private func pauseAccepting(now: Double) {
        guard let listener, acceptResumeAt == nil else { return }
        loop.remove(listener.fd)
        acceptResumeAt = now + Self.acceptPause
    }

    /// Puts the listener back once the pause is over (or a connection closed: a descriptor is free).
    func resumeAccepting(now: Double, early: Bool = false) {
        guard let listener, let due = acceptResumeAt, early || now >= due else { return }
        acceptResumeAt = nil
        do throws(SystemError) {
            try loop.add(listener.fd, EventLoop.input)
        } catch {
            clientLog.warn(.acceptFailed, now: now, "cannot watch the listener again: \(error)")
            acceptResumeAt = now + Self.acceptPause
        }
    }

    private func admit(_ fd: Int32, now: Double) {
        guard connections.count < limits.maxConnections else {
            clientLog.warn(.overConnectionLimit, now: now, "connection refused: \(limits.maxConnections) connections already open (max_connections)")
            refuse(fd, ObsError(.limit, "too many connections (max_connections is \(limits.maxConnections))"))
            return
        }
        guard let peer = PeerCredentials.of(fd) else {
            clientLog.warn(.peerCredentials, now: now, "connection refused: \(SystemError("SO_PEERCRED"))")
            close(fd)
            return
        }
        guard let access = policy.access(for: peer) else {
            clientLog.info(.notAllowed, now: now, "connection from uid \(peer.uid) (pid \(peer.pid)) refused: not in allow")
            refuse(fd, ObsError(.permissionDenied, "uid \(peer.uid) may not use this daemon"))
            return
        }
        let connection = Connection(fd: fd, peer: peer, gate: gate, flushList: flushList)
        do throws(SystemError) {
            try loop.add(fd, EventLoop.input)
        } catch {
            clientLog.warn(.registration, now: now, "connection refused: \(error)")
            close(fd)
            return
        }
        connection.interest = EventLoop.input
        connections[fd] = connection
        connection.session = Session(store: store, access: access, output: connection)
        log.debug("connection \(fd) from uid \(peer.uid) (pid \(peer.pid)), \(access.rawValue) access")
    }

    /// A new `allow` (reload): every open connection's access is computed again, as if it had just
    /// connected. A connection that lost all access gets one permission_denied line and is closed
    /// once that is written; one that lost write access gets permission_denied for its writes from
    /// now on (its watches go on: reading is still allowed).
    func apply(_ policy: AccessPolicy) {
        self.policy = policy
        for connection in Array(connections.values) {
            guard let session = connection.session, !connection.closeAfterFlush else { continue }
            let peer = connection.peer
            guard let access = policy.access(for: peer) else {
                log.info("connection \(connection.fd) from uid \(peer.uid) (pid \(peer.pid)) closed: no longer in allow")
                connection.write(LineEncoding.error(id: .null, ObsError(.permissionDenied, "uid \(peer.uid) may no longer use this daemon")))
                connection.readClosed = true
                connection.closeAfterFlush = true
                session.close()
                connection.session = nil
                updateInterest(connection)
                continue
            }
            if access != session.access {
                log.info("connection \(connection.fd) from uid \(peer.uid) (pid \(peer.pid)) now has \(access.rawValue) access")
                session.access = access
            }
        }
    }

    /// Sends one error line to a connection that is not admitted, then closes it.
    private func refuse(_ fd: Int32, _ error: ObsError) {
        // The error line is small, and a new socket's buffer is empty, so it goes out whole.
        let line = LineEncoding.error(id: .null, error).bytes
        _ = line.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        close(fd)
    }

    // MARK: - Reading

    /// Reads what `fd` has (at most a fair share per turn) and hands complete lines to its session.
    /// While stopping, it reads everything the client has sent so far, and once all of it is
    /// answered (`shutting_down`) the connection gets `goodbye`.
    func readable(_ fd: Int32, hangup: Bool) {
        guard let connection = connections[fd] else { return }
        guard !connection.readClosed else {
            if hangup { drop(connection) }
            return
        }
        // Input left registered while an answer is pending (updateInterest), and the client sent
        // more meanwhile: it stays in the socket, and input is taken out of epoll until the answer.
        if !hangup, !stopping, connection.session?.holdsRequests == true {
            return updateInterest(connection, keepingInputWhileHeld: false)
        }
        // Four buffers per turn: enough for throughput, small enough that one client cannot hold
        // the loop while others wait (level-triggered epoll reports the rest next turn). A read
        // that does not fill the buffer took everything there was: reading again would only cost
        // a system call to learn EAGAIN (and epoll reports whatever arrives after it).
        var readAll = false
        var reads = 0
        while stopping || reads < 4 {
            reads += 1
            let count = readBuffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN {
                    readAll = true
                    break
                }
                drop(connection)
                return
            }
            if count == 0, stopping {
                // The end of what the client sent before the stop (beginShutdown shut the
                // reading side): all of it is read.
                readAll = true
                break
            }
            if count == 0 {
                // EOF: answer what was complete, drop any partial line, close once flushed (and
                // once the requests held back are answered: waiting for the output to drain, or,
                // in cluster mode, for an answer still pending).
                connection.readClosed = true
                connection.closeAfterFlush = true
                if connection.session?.holdsRequests != true {
                    connection.session?.close()
                    connection.session = nil
                    if connection.pendingBytes == 0 { return drop(connection) }
                }
                return updateInterest(connection)
            }
            feed(connection, count)
            // A session holding requests back (its output over the limit, or an answer pending in
            // cluster mode) handles nothing more for now: what the client sends stays in the socket.
            if connection.readClosed || connection.pendingBytes > limits.outputBufferBytes
                || connection.session?.holdsRequests == true { break }
            if count < readBuffer.count {
                readAll = true
                break
            }
        }
        if stopping, readAll, connection.session?.holdsRequests != true {
            if readyForGoodbye != nil { readyForGoodbye!.append(connection) } else { sayGoodbye(connection) }
        }
        updateInterest(connection)
    }

    private func feed(_ connection: Connection, _ count: Int) {
        guard let session = connection.session, !connection.closeAfterFlush else { return }
        readBuffer.withUnsafeBytes { session.receive(bytes: UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        if session.wantsClose {
            clientLog.info(.lineTooLong, "connection \(connection.fd): request line over \(limits.maxLineBytes) bytes; closing")
            connection.readClosed = true
            connection.closeAfterFlush = true
        }
    }

    // MARK: - Writing

    /// Writes every connection that got output this turn, one writev each.
    func flush(now: Double) {
        // The list is swapped with the spare one (whatever this flush lists again goes to the
        // next turn's), so that neither array is ever copied: no allocation per turn.
        swap(&flushList.connections, &flushing)
        // Every connection that queued a shared line is listed here; lines queued from now on
        // (a drained connection's resync) are copied, so that none refers to the turn's lines
        // once they are taken again.
        flushList.shared.close()
        for connection in flushing {
            connection.isDirty = false
            guard connection.isOpen else { continue }
            write(connection, now: now)
        }
        flushing.removeAll(keepingCapacity: true)
        flushList.shared.reset()
    }

    /// Connections whose socket became writable again.
    func writable(_ fd: Int32, now: Double) {
        guard let connection = connections[fd] else { return }
        write(connection, now: now)
    }

    private func write(_ connection: Connection, now: Double) {
        let result = connection.flush()
        switch result {
        case .failed:
            drop(connection)
            return
        case .done:
            setStalled(connection, since: nil)
            connection.overLimit = false
            // Drained: held requests are answered, `latest` watches send what they held, an
            // overflowed session resyncs (not when closing: then only held requests matter).
            if let session = connection.session, !connection.closeAfterFlush || session.holdsRequests {
                session.outputDrained()
            }
            if connection.closeAfterFlush, connection.pendingBytes == 0, connection.session?.holdsRequests != true {
                drop(connection)
                return
            }
        case .held:
            // What could go went; the rest waits for a group commit, not for the socket.
            setStalled(connection, since: nil)
        case .blocked(let progress):
            if progress || connection.pendingBytes <= limits.outputBufferBytes {
                setStalled(connection, since: nil)
            }
        }
        if connection.pendingBytes > limits.outputBufferBytes {
            connection.overLimit = true
            // Over the limit with everything it may be sent written (the rest waits for a batch
            // the disk has not taken): the client is not the one that is slow.
            if case .held = result {} else if connection.stalledSince == nil { setStalled(connection, since: now) }
        } else if connection.overLimit || connection.session?.isOverflowing == true {
            // Back under the limit. A session can also overflow in a turn whose flush takes it
            // under the limit at once (lines that waited for a batch go out together), without
            // the connection ever having been seen over it: it resyncs then too.
            connection.overLimit = false
            connection.session?.outputDrained()
        }
        // Stopping: a connection whose output held up its goodbye reads (and answers) the rest of
        // what it sent now, even if nothing new arrives to wake epoll.
        if stopping, !connection.readClosed, connection.pendingBytes <= limits.outputBufferBytes,
           connection.session?.holdsRequests != true {
            return readable(connection.fd, hangup: false)
        }
        updateInterest(connection)
    }

    /// Input while the connection may send requests; output only while a write is blocked. Output
    /// queued this turn (the connection is dirty) is written by the end-of-turn flush without
    /// asking epoll, so a request and its answer cost no epoll_ctl at all. While a request's answer
    /// is pending (cluster mode: etcd's), input stays registered, unless `keepingInputWhileHeld` is
    /// false: a client that waits for its answer, as most do, then costs no epoll_ctl either (one
    /// to stop reading, one to read again); one that sends more meanwhile wakes the loop once,
    /// and `readable` takes input out then.
    private func updateInterest(_ connection: Connection, keepingInputWhileHeld: Bool = true) {
        guard connection.isOpen else { return }
        var wanted: UInt32 = 0
        if !connection.readClosed, connection.pendingBytes <= limits.outputBufferBytes {
            if connection.session?.holdsRequests != true
                || (keepingInputWhileHeld && !stopping && connection.interest & EventLoop.input != 0) {
                wanted |= EventLoop.input
            }
        }
        if connection.hasSendableOutput, !connection.isDirty { wanted |= EventLoop.output }
        guard wanted != connection.interest else { return }
        do throws(SystemError) {
            try loop.modify(connection.fd, wanted)
            connection.interest = wanted
        } catch {
            clientLog.warn(.epoll, "connection \(connection.fd): \(error)")
            drop(connection)
        }
    }

    // MARK: - Timeouts and closing

    private func setStalled(_ connection: Connection, since: Double?) {
        guard connection.stalledSince != since else { return }
        connection.stalledSince = since
        stalled[connection.fd] = since == nil ? nil : connection
    }

    /// Disconnects clients that have read nothing for client_timeout while over the output limit.
    func expireStalled(now: Double) {
        for connection in Array(stalled.values) {
            guard let since = connection.stalledSince, now - since >= limits.clientTimeout else { continue }
            clientLog.info(.clientTimeout, now: now, "connection \(connection.fd) (uid \(connection.peer.uid)): read nothing for \(limits.clientTimeout)s over the output limit; disconnecting")
            drop(connection)
        }
    }

    /// Seconds until the next client_timeout check is due.
    func nextExpiry(now: Double) -> Double? {
        stalled.values.compactMap { $0.stalledSince.map { $0 + limits.clientTimeout - now } }.min()
    }

    /// Closes a connection now: its session is closed (ephemeral keys go), unsent output is dropped.
    func drop(_ connection: Connection) {
        guard connection.isOpen else { return }
        connection.isOpen = false
        connections[connection.fd] = nil
        stalled[connection.fd] = nil
        loop.remove(connection.fd)
        connection.session?.close()
        connection.session = nil
        connection.discardOutput()
        close(connection.fd)
        // A descriptor is free again: accepting may work now.
        if acceptResumeAt != nil { resumeAccepting(now: monotonicSeconds(), early: true) }
    }

    /// Shutdown, first step: stop accepting. The socket file stays until the end.
    func stopAccepting() -> Listener? {
        guard let listener else { return nil }
        if acceptResumeAt == nil { loop.remove(listener.fd) }
        acceptResumeAt = nil
        self.listener = nil
        return listener
    }

    /// Shutdown, second step: every request is answered `shutting_down` from now on; each
    /// connection stops taking data, reads what its client had sent until then, answers it, and
    /// then gets `goodbye` and is closed once that is written (`readable`). A connection whose
    /// output is over its limit does so once it drains, or is dropped at the flush deadline.
    ///
    /// Every connection's ephemeral keys go before any connection gets its `goodbye` (each
    /// connection's as one transaction, as when it closes): their owners are leaving, and a
    /// watcher told `goodbye` first would never see those keys go. Also the keys of a connection
    /// whose `goodbye` comes later (its output over the limit, or an answer pending): no request
    /// sets a key any more (each answers `shutting_down`), and the others' `goodbye` goes now.
    func beginShutdown() {
        stopping = true
        store.isShuttingDown = true
        readyForGoodbye = []
        for connection in Array(connections.values) where !connection.readClosed {
            // From now on the client's sends fail (EPIPE), so "what it has already sent" is
            // exactly what the socket holds: read to its end, every request in it is answered.
            shutdown(connection.fd, Int32(SHUT_RD))
            readable(connection.fd, hangup: false)
        }
        let ready = readyForGoodbye ?? []
        readyForGoodbye = nil
        for connection in connections.values.sorted(by: { $0.fd < $1.fd }) { connection.session?.removeEphemeralKeys() }
        for connection in ready where connection.isOpen { sayGoodbye(connection) }
    }

    private func sayGoodbye(_ connection: Connection) {
        connection.readClosed = true
        connection.closeAfterFlush = true
        connection.session?.goodbye(reason: "shutdown")
    }

    /// Whether some connection got output after this turn's flush (from `Session.outputDrained`).
    var hasUnflushedOutput: Bool { !flushList.connections.isEmpty }

    /// Closes every connection that is left.
    func dropAll() {
        for connection in Array(connections.values) { drop(connection) }
    }
}
