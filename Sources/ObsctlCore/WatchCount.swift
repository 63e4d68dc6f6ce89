import ObsClient
import ObsCore

/// What `watch -n COUNT` counts: change, delete, error and publish events, and the changes a
/// resync's snapshot stands in for (docs/cli.md).
///
/// After `overflow` the daemon sends a fresh snapshot instead of the events it dropped, so a change
/// can arrive folded into a snapshot line. Until that snapshot's `synced`, a line counts when the
/// key's state (its value, or its error) differs from the last one the watch printed for it, or,
/// for a key the watch has not printed (with `--no-initial`, most keys), when the key's own `rev`
/// falls in the gap (at or after the overflow's `from_rev`; after `compacted`, past the last
/// revision the watch saw, when it saw one); at `synced`, every known key the snapshot did not list
/// counts as a delete.
/// After `compacted` (a `--since` older than the history, or a `--reconnect` resumed after a
/// restart) the lines count the same way, but missing keys do not: on a resume `WatchStream` leaves
/// out the lines it had delivered already, and itself makes a `delete` for each key it delivered
/// that the snapshot did not list, which counts like any delete. A reconnection (`--reconnect`) ends a resync under way without deletes: the old
/// connection may have dropped part way through its snapshot, so a key it did not list may still
/// be there. The initial snapshot counts nothing.
/// After `reset` (`--reconnect` found the daemon holding another state: `WatchStream`) the lines of
/// the new state's snapshot count the same way, with no gap to go by (a key not printed counts);
/// the reset itself counts nothing, and neither do missing keys at its `synced`: the stream sends a
/// `delete` for each key it had delivered that is gone, right after, and each of those counts one.
/// A reconnection during that snapshot starts it again, still counting as after a reset.
struct WatchCount {
    /// A key's state as the watch last printed it. An error is its code and message: a snapshot
    /// item leaves out the details an `error` event carries.
    private enum State: Equatable {
        case value(JSONValue)
        case error(code: String?, message: String?)

        init(error: JSONValue) {
            self = .error(code: error["code"]?.stringValue, message: error["message"]?.stringValue)
        }
    }

    private var states: [String: State] = [:]
    /// Between `overflow` or `compacted` and the `synced` after it: the keys the snapshot listed,
    /// whether missing ones are deletes (after `overflow`), and the first revision of the gap
    /// (nil: not known, and a key not printed before counts).
    private var resync: (listed: Set<String>, missingAreDeletes: Bool, gapStart: Int64?)?
    /// The newest revision the watch has seen: `--since`'s, then every event's.
    private var seenRev: Int64?
    /// Between `reset` and the `synced` of the snapshot after it.
    private var resetting = false

    init(since: UInt64? = nil) {
        seenRev = since.map { Int64(clamping: $0) }
    }

    /// How many of the COUNT `event` stands for.
    mutating func count(_ event: WatchEvent) -> Int {
        if event.followsReconnection { resync = resetting ? Self.afterReset : nil }
        if event.kind == "reset" {
            resync = Self.afterReset
            resetting = true
            // The new state's revisions: the old ones say nothing of its keys.
            seenRev = event["rev"]?.intValue
            return 0
        }
        let key = event["key"]?.stringValue
        if event.name != .initial, let rev = event["rev"]?.intValue { seenRev = max(seenRev ?? rev, rev) }
        switch event.name {
        case .change:
            if let key, let new = event["new"] { states[key] = .value(new) }
            return 1
        case .error:
            if let key, let error = event["error"] { states[key] = State(error: error) }
            return 1
        case .delete:
            if let key { states[key] = nil }
            return 1
        case .publish:
            return 1
        case .initial:
            guard let key, let state = Self.state(ofSnapshotItem: event) else { return 0 }
            let previous = states.updateValue(state, forKey: key)
            guard resync != nil else { return 0 }
            resync!.listed.insert(key)
            if let previous { return previous == state ? 0 : 1 }
            guard let gapStart = resync!.gapStart, let rev = event["rev"]?.intValue else { return 1 }
            return rev >= gapStart ? 1 : 0
        case .overflow:
            // During a reset's snapshot, missing keys still come as the stream's own deletes.
            resync = resetting ? Self.afterReset : ([], true, event["from_rev"]?.intValue)
            return 0
        case .compacted:
            resync = resetting ? Self.afterReset : ([], false, seenRev.map { $0 + 1 })
            return 0
        case .synced:
            resetting = false
            guard let finished = resync else { return 0 }
            resync = nil
            guard finished.missingAreDeletes else { return 0 }
            let gone = states.keys.filter { !finished.listed.contains($0) }
            for key in gone { states[key] = nil }
            return gone.count
        default:
            return 0
        }
    }

    /// A resync after `reset`: every key listed is compared with what was printed, and a key not
    /// printed counts; missing keys come as deletes of their own.
    private static let afterReset: (listed: Set<String>, missingAreDeletes: Bool, gapStart: Int64?) = ([], false, nil)

    private static func state(ofSnapshotItem event: WatchEvent) -> State? {
        if let value = event["value"] { return .value(value) }
        return event["error"].map(State.init(error:))
    }
}
