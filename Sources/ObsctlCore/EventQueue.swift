import Foundation
import ObsClient
import ObsCore

/// Events read off the socket while `-- COMMAND` runs, so the daemon is not kept waiting by one
/// slow run. With coalescing (--latest), a newer event of a key or channel replaces the one still
/// waiting, keeping the waiting one's `old`: the command sees the change from what it last saw.
///
/// The queue holds at most `limitBytes` of events. When it is full the reading thread waits, and
/// reads nothing more off the socket, until the command has taken enough: events are never dropped
/// here. The daemon then sees its output to this connection grow past its own limit and does what
/// docs/protocol.md says: the watch overflows, and once obsctl reads again it gets `overflow` and a
/// fresh snapshot, whose `initial` events run the command with the latest values.
final class EventQueue: @unchecked Sendable {
    // @unchecked: every field is guarded by `condition`.
    /// How many bytes of events obsctl holds for a slow command by default (docs/cli.md).
    static let defaultLimitBytes = 4 << 20
    /// What an event costs beyond its line: its parsed fields, and the bookkeeping around them. So
    /// that a flood of small events is held to about the limit too, and not to many times it.
    static let overheadBytes = 512

    private let condition = NSCondition()
    private var events = Ring<(event: WatchEvent, bytes: Int)>()
    /// The bytes of the events waiting, as `size(of:)` counts them.
    private var bytes = 0
    private let limitBytes: Int
    /// With coalescing: the waiting event of each key and channel, by its number in the order
    /// pushed; the first waiting event's number is `taken`.
    private var positions: [Subject: Int] = [:]
    private var taken = 0
    private var failure: ClientError?
    private let coalescing: Bool

    init(coalescing: Bool, limitBytes: Int = EventQueue.defaultLimitBytes) {
        self.coalescing = coalescing
        self.limitBytes = limitBytes
    }

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

    /// Adds `event`, first waiting while it would take the queue over its limit (an event larger
    /// than the limit is taken once the queue is empty).
    func push(_ event: WatchEvent) {
        let size = Self.size(of: event)
        let subject = coalescing ? Self.subject(of: event) : nil
        condition.withLock {
            // A reset (`WatchStream`): what comes after it is of another state, and must not be
            // merged into an event waiting from before it.
            if event.kind == "reset" { positions.removeAll() }
            while true {
                if let subject, let position = positions[subject] {
                    let waiting = events[position - taken]
                    let merged = Self.merged(waiting.event, event)
                    let mergedSize = Self.size(of: merged)
                    if bytes - waiting.bytes + mergedSize <= limitBytes || events.count == 1 {
                        events[position - taken] = (merged, mergedSize)
                        bytes += mergedSize - waiting.bytes
                        break
                    }
                } else if events.isEmpty || bytes + size <= limitBytes {
                    if let subject { positions[subject] = taken + events.count }
                    events.append((event, size))
                    bytes += size
                    break
                }
                condition.wait()
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
            return .success(takeFirst())
        }
        // The reading thread may be waiting for room.
        condition.broadcast()
        switch result {
        case .success(let event): return event
        case .failure(let error): throw error
        }
    }

    /// How many bytes of events wait.
    var waitingBytes: Int { condition.withLock { bytes } }

    private func takeFirst() -> WatchEvent {
        let (event, size) = events.popFirst()!
        if coalescing, let subject = Self.subject(of: event), positions[subject] == taken { positions[subject] = nil }
        taken += 1
        bytes -= size
        return event
    }

    /// What an event counts against the limit: its line as the daemon sent it, and its overhead.
    static func size(of event: WatchEvent) -> Int { event.line.utf8.count + overheadBytes }

    /// What coalescing merges events by: the key of a key's events, the channel of a publish.
    enum Subject: Hashable {
        case key(JSONValue)
        case channel(JSONValue)
    }

    static func subject(of event: WatchEvent) -> Subject? {
        switch event.kind {
        case "change", "delete", "error", "initial": event["key"].map(Subject.key)
        case "publish": event["channel"].map(Subject.channel)
        default: nil
        }
    }

    static func merged(_ waiting: WatchEvent, _ newer: WatchEvent) -> WatchEvent {
        var merged = newer
        if newer.kind == "change" || newer.kind == "delete" {
            var fields = newer.fields
            fields["old"] = waiting.kind == "initial" ? waiting["value"] : waiting["old"]
            if waiting.kind == "change", waiting["created"]?.boolValue == true { fields["created"] = .bool(true) }
            merged = WatchEvent(fields: fields)
        }
        // WatchCount must still learn of a reconnection the waiting event stood for.
        merged.followsReconnection = waiting.followsReconnection || newer.followsReconnection
        merged.run = newer.run
        return merged
    }
}
