/// What a watch sends to make its client's view whole: the snapshot at its start, the replay of
/// `since`, and after a gap (`overflow`, `compacted`) a fresh snapshot.
extension WatchHub {
    /// An `initial` event per matching key, sorted, then `synced`.
    func sendSnapshot(_ watch: Watch) {
        for item in state.snapshot(matching: watch.patterns) {
            var fields: [(String, JSONValue)] = [("key", .string(item.key)), ("kind", .string(item.kind.rawValue))]
            switch item.content {
            case .value(let value): fields.append(("value", value))
            case .error(let error): fields.append(("error", .object(["code": .string(error.code.rawValue), "message": .string(error.message)])))
            case .missing: continue
            }
            fields.append(("rev", .int(Int64(item.rev))))
            sendControl(watch, .initial, fields)
        }
        sendControl(watch, .synced, [("rev", .int(Int64(rev)))])
        watch.client.queuedSinceSnapshot = 0
    }

    /// Replays history after `since`, then `synced`; when that is older than the history kept,
    /// `compacted` and a snapshot instead.
    ///
    /// A `since` ahead of the store's revision was taken from another state: in cluster mode a host
    /// ahead of this one, and the watch starts there; on a single host a state this one is not
    /// (a daemon with its state in memory started again, a database put back from a backup). Its
    /// client's view holds changes this state never had, and no replay can mend that: it gets
    /// `compacted` and a snapshot.
    func sendReplay(_ watch: Watch, since: UInt64, run: Watch.Options.RunClaim = .unnamed) {
        if !sinceAheadStartsThere, case .named(let seen) = run, !lineage.resumes(since: since, seen: seen) {
            // A revision of another run, whose state this one does not continue: what it numbers
            // may be another change here (RunLineage).
            sendControl(watch, .compacted, [("compact_rev", .int(Int64(history.start)))])
            sendSnapshot(watch)
            return
        }
        if since > rev {
            if sinceAheadStartsThere {
                watch.startsAfter = since
                sendControl(watch, .synced, [("rev", .int(Int64(since)))])
            } else {
                sendControl(watch, .compacted, [("compact_rev", .int(Int64(history.start)))])
                sendSnapshot(watch)
            }
            return
        }
        var matching: [EventRecord] = []
        var revField = ByteBuffer()
        let kept = history.forEachTransaction(after: since) { rev, events in
            matching.removeAll(keepingCapacity: true)
            for record in events where watch.matches(record.key) { matching.append(record) }
            guard !matching.isEmpty else { return }
            matching.sort { $0.keyPrecedes($1) }
            revField.removeAll()
            revField.appendRevisionField(rev)
            for record in matching {
                replayBody.removeAll(keepingCapacityUpTo: 1 << 20)
                replayBody.appendEventBody(record, revField: revField.bytes)
                sendEvent(head: watch.heads.head(record.kind), body: replayBody.bytes, needsSync: true, of: watch, rev: rev)
            }
        }
        guard kept else {
            sendControl(watch, .compacted, [("compact_rev", .int(Int64(history.start)))])
            sendSnapshot(watch)
            return
        }
        sendControl(watch, .synced, [("rev", .int(Int64(rev)))])
    }

    /// Every watch was left with a gap (cluster mode: the history it would replay is gone): each
    /// gets `compacted` and a fresh snapshot, and `since` before now answers `compacted` too.
    func resyncAll() {
        history = History(capacity: configuration.historyRevisions, maxBytes: configuration.historyBytes, start: rev)
        for client in clients {
            // An overflowed watch gets its snapshot when its client drains.
            for watch in client.orderedWatches where watch.overflowFrom == nil {
                watch.pending.removeAll()
                watch.windows.removeAll()
                sendControl(watch, .compacted, [("compact_rev", .int(Int64(rev)))])
                sendSnapshot(watch)
            }
        }
    }

    /// The client's output is drained: each overflowed watch gets `overflow` with the revisions it
    /// missed and a fresh snapshot, as long as the output stays within its limit (the others wait
    /// for the next drain: a snapshot per watch at once would be the store's size times the
    /// watches), and then held `latest` events go out.
    func drained(_ client: WatchClient) {
        if client.overflowed {
            // The oldest gap first (then by id): a watch that overflows again while others still
            // wait goes behind them.
            let waiting = client.watches.values.filter { $0.overflowFrom != nil }
                .sorted { ($0.overflowFrom!, $0.id) < ($1.overflowFrom!, $1.id) }
            for watch in waiting {
                guard client.sink.unsentBytes <= configuration.maxOutputBytes else { return }
                let from = watch.overflowFrom!
                watch.overflowFrom = nil
                client.overflowedWatches -= 1
                watch.pending.removeAll()
                watch.windows.removeAll()
                sendControl(watch, .overflow, [("from_rev", .int(Int64(from))), ("to_rev", .int(Int64(rev)))])
                sendSnapshot(watch)
            }
        }
        // After every write of the client's output: looked at without making a list first.
        guard client.watches.values.contains(where: { $0.flushesWhenDrained }) else { return }
        for watch in client.orderedWatches where watch.flushesWhenDrained { flushLatest(watch) }
    }
}
