import ObsClient
import ObsCore

/// What the routes ask of the daemon. `SocketDaemonLink` talks to obsd over its Unix socket as
/// the user who runs obsctl; tests of the routes use a fake.
protocol DaemonLink: Sendable {
    /// Sends one request and returns the daemon's answer.
    func request(_ op: String, _ fields: [String: JSONValue]) throws(ClientError) -> Response
    /// The recent change, delete and error events of `key`, oldest first, as the daemon wrote them.
    func history(of key: String) throws(ClientError) -> [String]
    /// The page's event stream: one watch on `pattern`, as Server-Sent Events.
    func feed(pattern: String) -> any StreamingBody
}

/// The daemon at `path`: a connection per request (the page makes a few a second at most), and
/// one per event stream, each tracked in `calls` so that stopping the server ends it.
struct SocketDaemonLink: DaemonLink {
    let path: String
    let limits: WebLimits
    let calls: DaemonCalls

    func request(_ op: String, _ fields: [String: JSONValue]) throws(ClientError) -> Response {
        let deadline = monotonicNow() + limits.requestTimeout
        return try calls.withConnection(to: path, deadline: deadline) { connection throws(ClientError) in
            try connection.request(op, fields, deadline: deadline)
        }
    }

    func feed(pattern: String) -> any StreamingBody {
        let feed = LiveFeed(path: path, pattern: pattern, limits: limits, registry: calls)
        calls.add(feed)
        return feed
    }

    /// Replays the daemon's history of `key`: a watch with `since` a bounded number of revisions
    /// back, read up to its `synced`. When that is older than the daemon still holds, the answer
    /// is `compacted` with the oldest revision it has, and the watch is asked again from there.
    func history(of key: String) throws(ClientError) -> [String] {
        let deadline = monotonicNow() + limits.requestTimeout
        let current = UInt64(try request("ping", [:])["rev"]?.intValue ?? 0)
        var since = current > limits.historyRevisions ? current - limits.historyRevisions : 0
        for _ in 0..<3 {
            let (kept, compactedAt) = try calls.withConnection(to: path, deadline: deadline) { connection throws(ClientError) in
                try replay(key, since: since, on: connection, deadline: deadline)
            }
            guard let compactedAt else { return kept }
            since = compactedAt
        }
        return []
    }

    /// One try of `history`: the events kept, or the oldest revision the daemon still holds.
    private func replay(_ key: String, since: UInt64, on connection: ObsConnection,
                        deadline: Double) throws(ClientError) -> (kept: [String], compactedAt: UInt64?) {
        try connection.request("watch", ["keys": [.string(key)], "since": .int(Int64(since)), "channels": false], deadline: deadline)
        var kept: [String] = []
        var bytes = 0
        var compactedAt: UInt64?
        while true {
            guard let event = try connection.nextEvent(deadline: deadline) else { throw .timedOut }
            if event.kind == "synced" { break }
            if event.kind == "compacted" { compactedAt = event["compact_rev"]?.intValue.map { UInt64(max(0, $0)) } }
            guard compactedAt == nil, ["change", "delete", "error"].contains(event.kind) else { continue }
            kept.append(event.line)
            bytes += event.line.utf8.count
            while kept.count > limits.historyEvents || bytes > limits.historyBytes, !kept.isEmpty {
                bytes -= kept.removeFirst().utf8.count
            }
        }
        return (kept, compactedAt)
    }
}
