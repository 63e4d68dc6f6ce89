// What the loop thread and the client's thread share: commands one way, completions the other,
// under one Mutex held only to move them. Completions are announced on an eventfd (non-blocking,
// in the loop's epoll set), written when the queue goes from empty to not empty.
import CCurl
import CLinux
import Glibc
import Synchronization

/// Loop thread to client thread.
enum Command: Sendable {
    case request(EtcdRequestID, EtcdRequest, timeout: Duration)
    case watch(EtcdRequestID, WatchRequest)
    case cancelWatch(EtcdRequestID)
    case stop
}

/// libcurl's multi handle. Only the client's thread uses it, but for `curl_multi_wakeup`, which
/// libcurl allows from any thread, and for the cleanup after that thread has ended.
struct MultiHandle: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
}

final class Mailbox: Sendable {
    struct State {
        var commands: [Command] = []
        var completions: [EtcdCompletion] = []
        var completionBytes = 0
        /// Watches canceled whose cancellation the client's thread has not yet carried out: what
        /// they still report is dropped.
        var canceled: Set<EtcdRequestID> = []
        /// A watch stopped reading because the queue was full: resume it when the loop takes.
        var watchesPaused = false
        var resumeWatches = false
        var nextID: UInt64 = 1
        var currentEndpoint: String
        var closed = false
    }

    let state: Mutex<State>
    let completionFD: Int32
    let multi: MultiHandle
    let maxQueuedBytes: Int

    init(multi: MultiHandle, firstEndpoint: String, maxQueuedBytes: Int) throws(EtcdError) {
        self.multi = multi
        self.maxQueuedBytes = maxQueuedBytes
        state = Mutex(State(currentEndpoint: firstEndpoint))
        completionFD = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard completionFD >= 0 else {
            throw .invalidConfiguration("eventfd failed: \(String(cString: strerror(errno)))")
        }
    }

    deinit { Glibc.close(completionFD) }

    // MARK: - Loop thread

    func newID() -> EtcdRequestID {
        state.withLock { state in
            defer { state.nextID += 1 }
            return EtcdRequestID(state.nextID)
        }
    }

    /// Queues a command for the client's thread and wakes it; false once closed.
    func send(_ command: Command) -> Bool {
        let sent = state.withLock { state in
            guard !state.closed else { return false }
            state.commands.append(command)
            if case .cancelWatch(let id) = command {
                state.canceled.insert(id)
                state.completions.removeAll { $0.id == id }
                state.completionBytes = state.completions.reduce(0) { $0 + $1.estimatedBytes }
            }
            return true
        }
        if sent { curl_multi_wakeup(multi.pointer) }
        return sent
    }

    func take() -> [EtcdCompletion] {
        var count: UInt64 = 0
        _ = read(completionFD, &count, 8)
        let (completions, resume) = state.withLock { state in
            let completions = state.completions
            state.completions.removeAll(keepingCapacity: true)
            state.completionBytes = 0
            let resume = state.watchesPaused
            if resume {
                state.watchesPaused = false
                state.resumeWatches = true
            }
            return (completions, resume)
        }
        if resume { curl_multi_wakeup(multi.pointer) }
        return completions
    }

    // MARK: - Client thread

    func takeCommands() -> (commands: [Command], resumeWatches: Bool) {
        state.withLock { state in
            let commands = state.commands
            state.commands.removeAll(keepingCapacity: true)
            let resume = state.resumeWatches
            state.resumeWatches = false
            return (commands, resume)
        }
    }

    func deliver(_ completion: EtcdCompletion) {
        let announce = state.withLock { state in
            guard !state.canceled.contains(completion.id) else { return false }
            state.completions.append(completion)
            state.completionBytes += completion.estimatedBytes
            return state.completions.count == 1
        }
        if announce {
            var one: UInt64 = 1
            _ = write(completionFD, &one, 8)
        }
    }

    /// Whether a watch may hand over more: false (and the watch pauses) while the queue is full.
    func roomForWatches() -> Bool {
        state.withLock { state in
            guard state.completionBytes >= maxQueuedBytes else { return true }
            state.watchesPaused = true
            return false
        }
    }

    func cancellationDone(_ id: EtcdRequestID) {
        _ = state.withLock { $0.canceled.remove(id) }
    }

    func setCurrentEndpoint(_ endpoint: String) {
        state.withLock { $0.currentEndpoint = endpoint }
    }
}

extension EtcdCompletion {
    /// About the memory the completion holds: the bytes of its keys and values.
    var estimatedBytes: Int {
        switch self {
        case .response(_, .success(let response)): 64 + response.estimatedBytes
        case .response(_, .failure): 64
        case .watch(_, .events(_, let events)):
            events.reduce(64) { $0 + 64 + $1.kv.estimatedBytes + ($1.prevKV?.estimatedBytes ?? 0) }
        case .watch: 64
        }
    }
}

extension KeyValue {
    var estimatedBytes: Int { 48 + key.count + value.count }
}

extension EtcdResponse {
    var estimatedBytes: Int {
        func sum(_ kvs: [KeyValue]) -> Int { kvs.reduce(0) { $0 + $1.estimatedBytes } }
        switch self {
        case .range(let range): return sum(range.kvs)
        case .put(let put): return put.prevKV?.estimatedBytes ?? 0
        case .deleteRange(let delete): return sum(delete.prevKVs)
        case .txn(let txn):
            return txn.responses.reduce(0) { total, op in
                switch op {
                case .range(let range): total + sum(range.kvs)
                case .put(let put): total + (put.prevKV?.estimatedBytes ?? 0)
                case .deleteRange(let delete): total + sum(delete.prevKVs)
                }
            }
        case .compact, .leaseGrant, .leaseKeepAlive, .leaseRevoke, .status: return 0
        }
    }
}
