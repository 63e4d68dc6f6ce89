// The client's own thread: it owns libcurl's multi handle and every transfer, and never touches
// the daemon's state. Its loop:
// 1. Take the commands the loop thread queued (requests, watches, cancellations, stop), and
//    resume watches paused for a full queue if the loop has since taken its completions.
// 2. Let libcurl move every transfer on (`curl_multi_perform`); watch messages are handed over
//    from its write callback as they arrive.
// 3. Carry out each finished transfer: an answer or a failure for the loop, or another attempt
//    on the next endpoint (see Worker+Outcomes.swift).
// 4. Fail the watches not created by their deadline and try again the operations whose rest
//    between two rounds of endpoints is over, then sleep in `curl_multi_poll` until a socket is
//    ready, a libcurl timer is due, a rest ends, or `curl_multi_wakeup` (from the loop thread).
import CCurl
import Glibc

final class Worker {
    enum TokenState {
        /// No user configured: requests carry no token.
        case notNeeded
        case missing
        case fetching
        /// Empty when etcd has authentication disabled (it then answers without a token).
        case have(String)
    }

    let mailbox: Mailbox
    let configuration: EtcdConfiguration
    let multi: UnsafeMutableRawPointer
    private(set) var transfers: [UnsafeMutableRawPointer: Transfer] = [:]
    /// Watches by ID, while a transfer serves them.
    var watches: [EtcdRequestID: Transfer] = [:]
    /// The endpoint new operations try first: the last that answered.
    var preferred = 0
    var token: TokenState
    var waitingForToken: [Operation] = []
    /// Operations resting between two rounds of endpoints (Worker+Outcomes.swift).
    var resting: [Operation] = []
    /// Transfers given a verdict inside a callback, to carry out after `curl_multi_perform`.
    var decided: [Transfer] = []

    init(mailbox: Mailbox, configuration: EtcdConfiguration) {
        self.mailbox = mailbox
        self.configuration = configuration
        multi = mailbox.multi.pointer
        token = configuration.user == nil ? .notNeeded : .missing
    }

    /// Runs the loop until a `stop` command.
    func run() {
        while true {
            let (commands, resumeWatches) = mailbox.takeCommands()
            for command in commands {
                if case .stop = command {
                    stop()
                    return
                }
                handle(command)
            }
            if resumeWatches {
                for transfer in transfers.values where transfer.paused {
                    transfer.paused = false
                    curl_easy_pause(transfer.easy, CURLPAUSE_CONT)
                }
            }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            collectFinished()
            expireWatchSetups()
            retryRested()
            curl_multi_poll(multi, nil, 0, Int32(pollTimeout), nil)
        }
    }

    private func handle(_ command: Command) {
        switch command {
        case .request(let id, let request, let timeout):
            start(Operation(id: id, kind: .request(request), call: request.call, deadline: .now + timeout))
        case .watch(let id, let request):
            start(Operation(id: id, kind: .watch(request), call: request.call,
                            deadline: .now + configuration.requestTimeout))
        case .cancelWatch(let id):
            if let transfer = watches[id] { remove(transfer) }
            waitingForToken.removeAll { $0.id == id }
            resting.removeAll { $0.id == id }
            mailbox.cancellationDone(id)
        case .stop:
            break
        }
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

    /// Sends the operation to its next endpoint.
    func attempt(_ operation: Operation) {
        let index = (operation.firstEndpoint + operation.attempts) % configuration.endpoints.count
        var bearer: String?
        if case .have(let value) = token, !isAuthentication(operation) { bearer = value }
        let transfer = Transfer(operation, endpointIndex: index, endpoint: configuration.endpoints[index], worker: self,
                                token: bearer, configuration: configuration)
        transfers[transfer.easy] = transfer
        if operation.isWatch { watches[operation.id] = transfer }
        curl_multi_add_handle(multi, transfer.easy)
    }

    /// Takes the transfer out of libcurl and out of the tables.
    func remove(_ transfer: Transfer) {
        guard transfers.removeValue(forKey: transfer.easy) != nil else { return }
        curl_multi_remove_handle(multi, transfer.easy)
        if transfer.operation.isWatch, watches[transfer.operation.id] === transfer {
            watches[transfer.operation.id] = nil
        }
    }

    private func collectFinished() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                  let transfer = transfers[easy] else { continue }
            let code = message.pointee.data.result
            remove(transfer)
            finished(transfer, code)
        }
        let decided = self.decided
        self.decided.removeAll()
        for transfer in decided where transfers[transfer.easy] === transfer {
            remove(transfer)
            finished(transfer, nil)
        }
    }

    private func expireWatchSetups() {
        let now = Monotonic.now
        for transfer in Array(watches.values) where !transfer.operation.watchCreated && transfer.operation.deadline < now {
            remove(transfer)
            failOver(transfer.operation, at: transfer, "no answer within \(configuration.requestTimeout)")
        }
    }

    private func retryRested() {
        let now = Monotonic.now
        let due = resting.filter { $0.retryAt <= now }
        guard !due.isEmpty else { return }
        resting.removeAll { $0.retryAt <= now }
        for operation in due { attempt(operation) }
    }

    /// Milliseconds to sleep at most: until the nearest watch setup deadline or end of a rest,
    /// and never long, so that a lost wakeup costs little.
    private var pollTimeout: Int {
        var timeout = 1000
        for transfer in watches.values where !transfer.operation.watchCreated {
            timeout = min(timeout, transfer.operation.deadline.millisecondsLeft + 1)
        }
        for operation in resting { timeout = min(timeout, operation.retryAt.millisecondsLeft) }
        return timeout
    }

    /// At stop, every operation still under way is answered `closed`.
    private func stop() {
        var pending = waitingForToken + resting
        waitingForToken.removeAll()
        resting.removeAll()
        for transfer in Array(transfers.values) {
            remove(transfer)
            pending.append(transfer.operation)
        }
        for operation in pending where !isAuthentication(operation) { fail(operation, .closed) }
    }

    func isAuthentication(_ operation: Operation) -> Bool {
        if case .authenticate = operation.kind { return true }
        return false
    }
}
