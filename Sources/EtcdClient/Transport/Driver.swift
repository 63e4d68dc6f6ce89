// The client's state, run from the caller's thread: libcurl's multi handle (through MultiSocket)
// and every transfer, the operations under way, the completions not yet taken. It never touches
// the caller's state and never waits: every call does what the sockets and timers allow and
// returns.
// - `submit`, `watch`: the operation's first transfer is added and started at once (its request
//   is written to the socket before the call returns, when the connection allows).
// - `takeCompletions`, when the epoll set is readable:
//   1. resume the watches paused for a full round of completions in the last call;
//   2. let libcurl act on the ready sockets (`curl_multi_socket_action`); watch messages are
//      handed over from its write callback as they arrive;
//   3. let libcurl run its due timeouts, carry out each finished transfer (an answer or a failure,
//      or another attempt on the next endpoint: Driver+Outcomes.swift), fail the watches not
//      created by their deadline, try again the operations whose rest between two rounds of
//      endpoints is over, send the requests waiting for one of the `maxConcurrentRequests` under
//      way to finish; again while any of that made more due;
//   4. set the timerfd to the nearest deadline, and return the completions.
import CCurl
import Glibc

final class Driver {
    enum TokenState {
        /// No user configured: requests carry no token.
        case notNeeded
        case missing
        case fetching
        /// Empty when etcd has authentication disabled (it then answers without a token).
        case have(String)
    }

    private(set) var configuration: EtcdConfiguration
    /// Counts the TLS material's replacements: easy handles made before the last are not reused.
    private var tlsGeneration = 0
    let sockets: MultiSocket
    var multi: UnsafeMutableRawPointer { sockets.multi }
    private(set) var transfers: [UnsafeMutableRawPointer: Transfer] = [:]
    /// Watches by ID, while a transfer serves them.
    var watches: [EtcdRequestID: Transfer] = [:]
    /// The endpoint new operations try first: the last that answered.
    var preferred = 0
    var token: TokenState
    var waitingForToken: [Operation] = []
    /// Operations resting between two rounds of endpoints (Driver+Outcomes.swift).
    var resting: [Operation] = []
    /// Transfers of requests (not watches) in libcurl: at most `maxConcurrentRequests`.
    private(set) var requestsSent = 0
    /// Requests waiting for one of those to finish, oldest first from `waitingHead`.
    private var waiting: [Operation] = []
    private var waitingHead = 0
    /// No waiting request's deadline is earlier (it may be one already sent): the queue is looked
    /// through for expired requests only once this has passed, not on every round.
    private var earliestWaiting: Monotonic?
    var requestsWaiting: Int { waiting.count - waitingHead }
    /// Transfers given a verdict inside a callback, to carry out after libcurl returns.
    var decided: [Transfer] = []
    private var nextID: UInt64 = 1
    private(set) var closed = false
    /// Easy handles of unary requests that are done, for the next ones (EasyHandle.swift).
    private var spareHandles: [EasyHandle] = []
    /// More than the requests a daemon has in flight at once, as a rule; the spares beyond are freed.
    private static let maxSpareHandles = 32
    /// For each plain-HTTP endpoint (gRPC), how many idle HTTP/2 connections to it libcurl's
    /// pool is believed to hold (EasyHandle.Version): one more for each transfer done over
    /// HTTP/2, one fewer for each sent over one; none once an attempt found none, or failed.
    var idleHTTP2: [Int]
    /// gRPC requests answered in HTTP/1.1 over a connection libcurl made for them, and sent again.
    var http1Answers = 0
    /// The header lists of the current token, with and without "require leader".
    private var headerLists: (token: String?, leader: HeaderList, noLeader: HeaderList)?

    /// Completions not yet taken, and about the bytes they hold.
    private var completions: [EtcdCompletion] = []
    private var completionBytes = 0
    /// Watches stopped reading in this round because its completions reached the bound.
    private var watchesPaused = false
    /// gRPC watches keep messages this round had no room for.
    var watchesBacklogged = false
    /// gRPC watches whose stream stopped in a callback (Transfer.receiveGRPCStream: a full
    /// backlog), to take out of libcurl once it returns. They stay in `watches` while they hand
    /// over their backlog, and leave it as they end.
    private var stoppedStreams: [Transfer] = []

    init(configuration: EtcdConfiguration) throws(EtcdError) {
        self.configuration = configuration
        sockets = try MultiSocket()
        token = configuration.user == nil ? .notNeeded : .missing
        idleHTTP2 = Array(repeating: 0, count: configuration.endpoints.count)
    }

    var currentEndpoint: String { configuration.endpoints[preferred] }

    /// New TLS material for the transfers started from now on; those under way, the watches
    /// among them, finish on their connections.
    func replaceTLS(_ material: TLSMaterial) {
        configuration.tls = material
        tlsGeneration += 1
        spareHandles.removeAll()
    }

    // MARK: - The client's calls

    func submit(_ request: EtcdRequest, timeout: Duration) -> EtcdRequestID {
        let id = newID()
        guard !closed else {
            deliver(.response(id, .failure(.closed)))
            sockets.wake()
            return id
        }
        start(Operation(id: id, kind: .request(request), call: request.call(configuration.api), deadline: .now + timeout))
        kick()
        return id
    }

    func watch(_ request: WatchRequest) -> EtcdRequestID {
        let id = newID()
        guard !closed else {
            deliver(.watch(id, .failed(.closed)))
            sockets.wake()
            return id
        }
        start(Operation(id: id, kind: .watch(request), call: request.call(configuration.api), deadline: .now + configuration.requestTimeout))
        kick()
        return id
    }

    func cancelWatch(_ id: EtcdRequestID) {
        completions.removeAll { $0.id == id }
        completionBytes = completions.reduce(0) { $0 + $1.estimatedBytes }
        guard !closed else { return }
        if let transfer = watches[id] { remove(transfer) }
        waitingForToken.removeAll { $0.id == id }
        resting.removeAll { $0.id == id }
        kick()
    }

    func takeCompletions() -> [EtcdCompletion] {
        if !closed, watchesBacklogged {
            // First what gRPC watches received and could not hand over in the last call.
            watchesBacklogged = false
            for transfer in Array(watches.values) where transfer.drainBacklog() { watchesBacklogged = true }
        }
        if !closed {
            if watchesPaused {
                watchesPaused = false
                for transfer in transfers.values where transfer.paused {
                    transfer.paused = false
                    obs_curl_easy_pause(transfer.easy, CURLPAUSE_CONT)
                }
            }
            sockets.serveReady()
            settle()
            collectGRPCWatchLeftovers()
            // Watches held back: come again at once, after the loop has dealt with these.
            if watchesPaused || watchesBacklogged { sockets.wake() }
        } else {
            sockets.serveReady()
        }
        let taken = completions
        completions.removeAll(keepingCapacity: true)
        completionBytes = 0
        return taken
    }

    /// libcurl 7.88 may read more of an HTTP/2 stream than it hands over in one go, and keep the
    /// rest in its connection's buffer to hand over when it runs that transfer again, which
    /// nothing else may prompt (the socket has nothing more to read): a watch then held changes
    /// until the next one came. So a gRPC watch that received bytes in this call is run once
    /// more, and again while that brings more (a few times at most).
    private func collectGRPCWatchLeftovers() {
        for _ in 0..<4 {
            var prompted = false
            for transfer in watches.values where transfer.receivedInCall && transfers[transfer.easy] === transfer {
                transfer.receivedInCall = false
                var socket: curl_socket_t = -1
                guard obs_curl_getinfo_socket(transfer.easy, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK, socket >= 0 else { continue }
                sockets.act(on: socket)
                prompted = true
            }
            guard prompted else { return }
            settle()
        }
        for transfer in watches.values { transfer.receivedInCall = false }
    }

    /// Every operation still under way is answered `closed`, and libcurl is let go.
    func close() {
        guard !closed else { return }
        closed = true
        var pending = waitingForToken + resting + waiting[waitingHead...]
        waitingForToken.removeAll()
        resting.removeAll()
        waiting.removeAll()
        waitingHead = 0
        earliestWaiting = nil
        for transfer in Array(watches.values) where transfers[transfer.easy] !== transfer {
            // A watch whose stream stopped (`stopStream`), out of libcurl already.
            remove(transfer)
            pending.append(transfer.operation)
        }
        for transfer in Array(transfers.values) {
            remove(transfer)
            pending.append(transfer.operation)
        }
        for operation in pending where !isAuthentication(operation) { fail(operation, .closed) }
        spareHandles.removeAll()
        sockets.cleanup()
        sockets.disarm()
        if !completions.isEmpty { sockets.wake() }
    }

    // MARK: - Running

    /// After a call that added or removed transfers: lets libcurl start them, and announces what
    /// completed meanwhile (a request that failed at once) on the epoll set.
    private func kick() {
        settle()
        if !completions.isEmpty { sockets.wake() }
    }

    /// Steps 3 and 4 of the header.
    private func settle() {
        var rounds = 0
        while true {
            let timeoutsDone = sockets.runDueTimeouts()
            collectFinished()
            expireWatchSetups()
            retryRested()
            sendWaiting()
            rounds += 1
            let more = (sockets.deadline.map { $0 <= .now } ?? false) || !decided.isEmpty
            guard more, timeoutsDone, rounds < 16 else { break }
        }
        sockets.arm(nextDeadline)
    }

    private func newID() -> EtcdRequestID {
        defer { nextID += 1 }
        return EtcdRequestID(nextID)
    }

    /// Starts an operation on the preferred endpoint, once a token is at hand if one is needed.
    func start(_ operation: Operation) {
        switch token {
        case .missing:
            waitingForToken.append(operation)
            authenticate()
        case .fetching:
            waitingForToken.append(operation)
        case .notNeeded, .have:
            operation.firstEndpoint = preferred
            operation.attempts = 0
            attempt(operation)
        }
    }

    /// Sends the operation to its next endpoint, or, for a request when `maxConcurrentRequests`
    /// are under way, makes it wait for one of them.
    func attempt(_ operation: Operation) {
        if !operation.isWatch {
            guard requestsSent < configuration.maxConcurrentRequests else {
                waiting.append(operation)
                if earliestWaiting.map({ operation.deadline < $0 }) ?? true { earliestWaiting = operation.deadline }
                return
            }
            requestsSent += 1
        }
        let index = (operation.firstEndpoint + operation.attempts) % configuration.endpoints.count
        var bearer: String?
        if case .have(let value) = token, !isAuthentication(operation) { bearer = value }
        let handle = operation.isWatch ? EasyHandle(configuration, sockets: sockets, tlsGeneration: tlsGeneration)
            : spareHandles.popLast() ?? EasyHandle(configuration, sockets: sockets, tlsGeneration: tlsGeneration)
        let endpoint = configuration.endpoints[index]
        let version: EasyHandle.Version = if !operation.call.isGRPC {
            .http1
        } else if endpoint.hasPrefix("https:") {
            .http2TLS
        } else {
            idleHTTP2[index] > 0 ? .http2Pooled : .http2PriorKnowledge
        }
        if version == .http2Pooled { idleHTTP2[index] -= 1 }
        let transfer = Transfer(operation, endpointIndex: index, endpoint: endpoint, driver: self,
                                handle: handle, headers: headers(token: bearer, requiresLeader: operation.requiresLeader),
                                version: version, configuration: configuration)
        transfers[transfer.easy] = transfer
        if operation.isWatch { watches[operation.id] = transfer }
        obs_curl_multi_add_handle(multi, transfer.easy)
    }

    private func headers(token: String?, requiresLeader: Bool) -> HeaderList {
        if let lists = headerLists, lists.token == token { return requiresLeader ? lists.leader : lists.noLeader }
        let lists = (token: token, leader: HeaderList(api: configuration.api, token: token, requiresLeader: true),
                     noLeader: HeaderList(api: configuration.api, token: token, requiresLeader: false))
        headerLists = lists
        return requiresLeader ? lists.leader : lists.noLeader
    }

    /// Takes the transfer out of libcurl and out of the tables.
    func remove(_ transfer: Transfer) {
        // A watch whose stream stopped is out of libcurl already (`stopStream`).
        if transfer.operation.isWatch, watches[transfer.operation.id] === transfer {
            watches[transfer.operation.id] = nil
        }
        // A handle given back to the spares may serve another transfer by now.
        guard transfers[transfer.easy] === transfer else { return }
        transfers[transfer.easy] = nil
        if !transfer.operation.isWatch { requestsSent -= 1 }
        obs_curl_multi_remove_handle(multi, transfer.easy)
    }

    /// Stops a gRPC watch's stream (from libcurl's write callback, where the handle may not be
    /// removed): libcurl reads no more of it once it returns, and the watch stays in `watches`
    /// while it hands over its backlog (Transfer.receiveGRPCStream).
    func stopStream(_ transfer: Transfer) {
        stoppedStreams.append(transfer)
    }

    private func takeStoppedStreamsOut() {
        guard !stoppedStreams.isEmpty else { return }
        for transfer in stoppedStreams where transfers[transfer.easy] === transfer {
            transfers[transfer.easy] = nil
            obs_curl_multi_remove_handle(multi, transfer.easy)
        }
        stoppedStreams.removeAll()
    }

    private func collectFinished() {
        takeStoppedStreamsOut()
        var left: Int32 = 0
        while let message = obs_curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                  let transfer = transfers[easy] else { continue }
            let code = message.pointee.data.result
            remove(transfer)
            finished(transfer, code)
            // A watch's handle may have been paused; a unary one is as good as new.
            if !transfer.operation.isWatch, spareHandles.count < Self.maxSpareHandles,
               transfer.handle.tlsGeneration == tlsGeneration {
                spareHandles.append(transfer.handle)
            }
        }
        let decided = self.decided
        self.decided.removeAll()
        for transfer in decided {
            let inLibcurl = transfers[transfer.easy] === transfer
            remove(transfer)
            // Not in libcurl: a watch whose stream stopped, ended once its backlog was handed over.
            if inLibcurl { finished(transfer, nil) }
        }
    }

    private func expireWatchSetups() {
        guard !watches.isEmpty else { return }
        let now = Monotonic.now
        for transfer in Array(watches.values) where !transfer.operation.watchCreated && transfer.operation.deadline < now {
            remove(transfer)
            failOver(transfer.operation, at: transfer, "no answer within \(configuration.requestTimeout)")
        }
    }

    /// Sends waiting requests while fewer than `maxConcurrentRequests` are under way, and fails
    /// those whose deadline passed while they waited.
    private func sendWaiting() {
        guard waitingHead < waiting.count else { return }
        let now = Monotonic.now
        while requestsSent < configuration.maxConcurrentRequests, waitingHead < waiting.count {
            let operation = waiting[waitingHead]
            waitingHead += 1
            // One whose turn comes too close to its deadline for any answer is not sent: sent, a
            // write would time out with its outcome unknown; refused, it is known not to be done.
            if operation.deadline <= now + leastTimeToSend { failWaiting(operation) } else { attempt(operation) }
        }
        if waitingHead == waiting.count {
            earliestWaiting = nil
        } else if let earliest = earliestWaiting, earliest <= now {
            let expired = waiting[waitingHead...].filter { $0.deadline <= now }
            waiting = waiting[waitingHead...].filter { $0.deadline > now }
            waitingHead = 0
            earliestWaiting = waiting.map(\.deadline).min()
            for operation in expired { failWaiting(operation) }
            return
        }
        if waitingHead == waiting.count || waitingHead >= 1024 {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    /// The least time before its deadline a waiting request is sent with: 20 ms, or a tenth of
    /// the request timeout when that is shorter (a timeout of a few ms still sends its requests).
    private var leastTimeToSend: Duration { min(.milliseconds(20), configuration.requestTimeout / 10) }

    private func failWaiting(_ operation: Operation) {
        let reason = "not sent: the \(configuration.maxConcurrentRequests) requests under way (maxConcurrentRequests) did not finish in time before its deadline"
        fail(operation, .unavailable((operation.failures + [reason]).joined(separator: "; "),
                                     mayHaveBeenApplied: operation.mayHaveBeenApplied))
    }

    private func retryRested() {
        guard !resting.isEmpty else { return }
        let now = Monotonic.now
        let due = resting.filter { $0.retryAt <= now }
        guard !due.isEmpty else { return }
        resting.removeAll { $0.retryAt <= now }
        for operation in due { attempt(operation) }
    }

    /// When something is next due: libcurl's timer, a watch's setup deadline, the end of a rest.
    private var nextDeadline: Monotonic? {
        var deadline = sockets.deadline
        func sooner(_ other: Monotonic) {
            if deadline.map({ other < $0 }) ?? true { deadline = other }
        }
        for transfer in watches.values where !transfer.operation.watchCreated { sooner(transfer.operation.deadline) }
        for operation in resting { sooner(operation.retryAt) }
        if let earliestWaiting { sooner(earliestWaiting) }
        return deadline
    }

    func isAuthentication(_ operation: Operation) -> Bool {
        if case .authenticate = operation.kind { return true }
        return false
    }

    // MARK: - Completions

    func deliver(_ completion: EtcdCompletion) {
        completions.append(completion)
        completionBytes += completion.estimatedBytes
    }

    /// Whether a watch may hand over more in this round: false (and the watch pauses until the
    /// next `takeCompletions`) once the round's completions reach the bound.
    /// Whether a gRPC watch may hand over another message in this round (it keeps it otherwise:
    /// Transfer.receiveGRPCStream).
    func roomForWatchMessages() -> Bool { completionBytes < configuration.maxBytesPerTake }

    func roomForWatches() -> Bool {
        guard completionBytes >= configuration.maxBytesPerTake else { return true }
        watchesPaused = true
        return false
    }
}
