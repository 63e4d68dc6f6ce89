import Foundation
import ObsClient
import ObsCore

/// Events read off the socket while `-- COMMAND` runs, so the daemon is never kept waiting.
/// With coalescing (--latest), a newer event of a key or channel replaces the one still waiting,
/// keeping the waiting one's `old`: the command sees the change from what it last saw.
final class EventQueue: @unchecked Sendable {
    // @unchecked: every field is guarded by `condition`.
    private let condition = NSCondition()
    private var events: [WatchEvent] = []
    private var failure: ClientError?
    private let coalescing: Bool

    init(coalescing: Bool) { self.coalescing = coalescing }

    /// Reads `stream` on a thread of its own until it fails.
    func start(_ stream: WatchStream) {
        let thread = Thread { [self] in
            while true {
                do throws(ClientError) {
                    if let event = try stream.next() { push(event) }
                } catch {
                    condition.withLock { failure = error }
                    condition.broadcast()
                    return
                }
            }
        }
        thread.start()
    }

    func push(_ event: WatchEvent) {
        condition.withLock {
            if coalescing, let index = events.lastIndex(where: { Self.sameSubject($0, event) }) {
                events[index] = Self.merged(events[index], event)
            } else {
                events.append(event)
            }
        }
        condition.broadcast()
    }

    /// The next event; nil when `deadline` passes first; the stream's error once it is drained.
    func next(deadline: Double?) throws(ClientError) -> WatchEvent? {
        let result: Result<WatchEvent?, ClientError> = condition.withLock {
            while events.isEmpty {
                if let failure { return .failure(failure) }
                if let deadline {
                    let left = deadline - monotonicNow()
                    if left <= 0 { return .success(nil) }
                    _ = condition.wait(until: Date(timeIntervalSinceNow: left))
                } else {
                    condition.wait()
                }
            }
            return .success(events.removeFirst())
        }
        switch result {
        case .success(let event): return event
        case .failure(let error): throw error
        }
    }

    static func sameSubject(_ a: WatchEvent, _ b: WatchEvent) -> Bool {
        let kinds: Set<String> = ["change", "delete", "error", "initial"]
        if kinds.contains(a.kind), kinds.contains(b.kind) { return a["key"] != nil && a["key"] == b["key"] }
        if a.kind == "publish", b.kind == "publish" { return a["channel"] == b["channel"] }
        return false
    }

    static func merged(_ waiting: WatchEvent, _ newer: WatchEvent) -> WatchEvent {
        guard newer.kind == "change" || newer.kind == "delete" else { return newer }
        var fields = newer.fields
        fields["old"] = waiting.kind == "initial" ? waiting["value"] : waiting["old"]
        if waiting.kind == "change", waiting["created"]?.boolValue == true { fields["created"] = .bool(true) }
        return WatchEvent(fields: fields)
    }
}
