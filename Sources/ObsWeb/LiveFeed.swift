import Foundation
import Glibc
import ObsClient
import ObsCore

/// One page's event stream: a watch on the page's pattern, relayed as Server-Sent Events, that
/// outlives daemon restarts. It runs on the thread of the page's HTTP connection, which calls
/// `read` whenever the browser can take more:
///
/// 1. Connect: `hello` (its version, revision and pid go to the page as a `connected` message),
///    then `watch` on the pattern without channels. The first time with a snapshot; after a drop,
///    with `since` (step 4). A daemon that refuses the watch (a bad pattern, no permission) ends
///    the stream with a `refused` message; `shutting_down` and `limit` are a drop (step 3).
/// 2. Relay: wait for the next event (at most `keepAliveSeconds`, else a comment keeps the
///    connection alive), then take every event already read, up to `batchBytes`, and send them
///    as one message, a line each, as the daemon wrote them. The watch is in `all` mode, so
///    events come in commit order: a browser that falls behind holds obsctl's reads back, the
///    daemon's output buffer fills, and the daemon sends `overflow` and a fresh snapshot.
/// 3. Drop: the events read so far go out, then one `disconnected` message; reconnect with
///    backoff (50 ms, doubling up to 2 s), with keep-alive comments meanwhile. The watch asks for
///    `progress` (not relayed) when it is quiet, so a daemon silent for `daemonSilenceSeconds`
///    (stopped with Ctrl-Z, say, or stuck) is a drop too, not a page that looks live.
/// 4. Resume, as `obsctl watch --reconnect` does: `since` the last revision seen if the daemon
///    said goodbye (it flushes everything first), else one before it (a cut may have split the
///    last transaction's events). The page applies events by key revision, so what it already
///    has is ignored, and it takes a snapshot (after `compacted` or `overflow`) as the whole state.
///    A daemon whose revision is behind the last one seen holds another state (`--memory`
///    restarted), and so does a new process of a daemon whose `stats` say `durability` `memory`
///    (it may be ahead already: other clients wrote before the feed was back) — the rule of
///    ObsClient's `Reconnection`, which `obsctl watch --reconnect` follows too: the watch starts
///    afresh with a snapshot, and `connected` says `reset`.
final class LiveFeed: StreamingBody, Cancellable, @unchecked Sendable {
    // @unchecked: `read` and everything it touches belong to the connection's thread; `cancel`,
    // from the thread that stops the server, touches only `cancellation` and `current` (under `lock`).
    private let path: String
    private let pattern: String
    private let limits: WebLimits
    private weak var registry: DaemonCalls?
    /// Raised by `cancel`: it ends a connection attempt, and the pause between two, at once.
    private let cancellation = Cancellation()
    /// The open connection, for `cancel` to shut down.
    private var current: ObsConnection?
    private let lock = NSLock()

    private var connection: ObsConnection?
    private var lastRevision: UInt64?
    /// The pid of the daemon last connected to.
    private var lastPid: Int64?
    /// The daemon's run on this connection, and the run the last revision was seen in.
    private var currentRun: String?
    private var lastRun: String?
    private var endedCleanly = true
    private var saidDisconnected = false
    private var finished = false
    private var backoff = LiveFeed.firstBackoff
    private var lastWrite = monotonicNow()
    /// When the daemon last sent anything on the watch (an event or `progress`).
    private var lastHeard = monotonicNow()
    private var pending: [UInt8] = []
    private var pendingStart = 0

    static let firstBackoff = 0.05, maxBackoff = 2.0

    init(path: String, pattern: String, limits: WebLimits, registry: DaemonCalls) {
        self.path = path
        self.pattern = pattern
        self.limits = limits
        self.registry = registry
        pending = Array("retry: 2000\n\n".utf8)
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        while pendingStart == pending.count {
            pending.removeAll(keepingCapacity: pending.count <= limits.batchBytes)
            pendingStart = 0
            if finished || cancellation.isCancelled { return nil }
            if connection == nil { connect() } else { relay() }
        }
        let count = min(buffer.count, pending.count - pendingStart)
        pending.withUnsafeBytes { buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[pendingStart..<pendingStart + count])) }
        pendingStart += count
        lastWrite = monotonicNow()
        return count
    }

    func close() {
        cancel()
        registry?.remove(self)
    }

    /// Ends the stream from another thread: a blocked `read` returns at once.
    func cancel() {
        cancellation.cancel()
        lock.withLock { current?.shutDown() }
    }

    private func connect() {
        do throws(ClientError) {
            let deadline = monotonicNow() + limits.requestTimeout
            let connection = try ObsConnection(path: path, deadline: deadline, cancellation: cancellation)
            lock.withLock { current = connection }
            if cancellation.isCancelled { return }
            // Another state than the one the page shows (Reconnection's rule: a daemon behind the
            // revision seen, or a new process of one that keeps its state in memory only):
            // nothing to resume, the page takes a new snapshot.
            let greeting = try Reconnection.greet(connection, client: "obsctl web", lastRevision: lastRevision,
                                                  lastPid: lastPid, deadline: deadline)
            let hello = greeting.hello
            let reset = greeting.reset != nil
            if reset { lastRevision = nil }
            let progress = min(limits.keepAliveSeconds, limits.daemonSilenceSeconds / 4)
            var fields: [String: JSONValue] = ["keys": [.string(pattern)], "channels": false,
                                               "progress_ms": .int(max(1, Int64(progress * 1000)))]
            let since = resumeRevision
            if let since {
                fields["since"] = .int(Int64(since))
                // The run it was seen in: a daemon whose state does not continue it sends a
                // snapshot rather than a replay (ObsClient's `Reconnection.run`).
                if let lastRun { fields["run"] = .string(lastRun) }
            }
            try connection.request("watch", fields, deadline: deadline)
            currentRun = greeting.run
            self.connection = connection
            lastHeard = monotonicNow()
            lastPid = greeting.pid
            saidDisconnected = false
            backoff = Self.firstBackoff
            var message: [String: JSONValue] = ["event": "connected", "version": hello["version"] ?? .null,
                                                "rev": hello["rev"] ?? .null, "pid": hello["pid"] ?? .null]
            if let since { message["since"] = .int(Int64(since)) }
            if reset { message["reset"] = true }
            send([JSONValue.object(message).encoded])
        } catch .server(let error) where !WatchStream.passing.contains(error.code) {
            var fields = error.details
            fields["code"] = .string(error.code.rawValue)
            fields["message"] = .string(error.message)
            send([JSONValue.object(["event": "refused", "error": .object(fields)]).encoded])
            finished = true
        } catch {
            lock.withLock { current = nil }
            if !saidDisconnected {
                saidDisconnected = true
                send([JSONValue.object(["event": "disconnected", "reason": .string(error.description)]).encoded])
                return
            }
            pause(backoff)
            backoff = min(backoff * 2, Self.maxBackoff)
            if monotonicNow() - lastWrite >= limits.keepAliveSeconds { pending += Array(": keep-alive\n\n".utf8) }
        }
    }

    private func relay() {
        guard let connection else { return }
        var lines: [String] = []
        var bytes = 0
        do throws(ClientError) {
            guard let first = try connection.nextEvent(deadline: monotonicNow() + limits.keepAliveSeconds) else {
                // The watch asks for `progress` well within this: a daemon that says nothing for
                // so long is stopped or stuck, and what the page shows is not live.
                if monotonicNow() - lastHeard >= limits.daemonSilenceSeconds {
                    drop(connection, cleanly: false,
                         reason: "obsd has not answered for \(Int(limits.daemonSilenceSeconds)) s: is it stopped or stuck?")
                    return
                }
                pending += Array(": keep-alive\n\n".utf8)
                return
            }
            var next: WatchEvent? = first
            // A deadline already past takes only what is there already, without waiting.
            while let event = next {
                lastHeard = monotonicNow()
                if event.kind != "progress" {
                    note(event)
                    lines.append(event.line)
                    bytes += event.line.utf8.count
                }
                next = bytes < limits.batchBytes ? try connection.nextEvent(deadline: 0) : nil
            }
            send(lines)
            if lines.isEmpty, monotonicNow() - lastWrite >= limits.keepAliveSeconds { pending += Array(": keep-alive\n\n".utf8) }
        } catch {
            send(lines)
            drop(connection, cleanly: connection.goodbye != nil, reason: error.description)
        }
    }

    /// The watch is lost: the page is told, and `read` reconnects.
    private func drop(_ connection: ObsConnection, cleanly: Bool, reason: String) {
        connection.shutDown()
        endedCleanly = cleanly
        self.connection = nil
        lock.withLock { current = nil }
        saidDisconnected = true
        send([JSONValue.object(["event": "disconnected", "reason": .string(reason)]).encoded])
    }

    /// Where a resumed watch starts (step 4); nil before the first revision is known.
    private var resumeRevision: UInt64? {
        guard let lastRevision else { return nil }
        return endedCleanly || lastRevision == 0 ? lastRevision : lastRevision - 1
    }

    private func note(_ event: WatchEvent) {
        guard event.kind != "initial", let rev = event["rev"]?.intValue, rev >= 0 else { return }
        lastRevision = max(lastRevision ?? 0, UInt64(rev))
        lastRun = currentRun
    }

    /// One message: a `data:` field per line. A line is one JSON object without a newline in it,
    /// so the page splits the message's data at newlines.
    private func send(_ lines: [String]) {
        guard !lines.isEmpty else { return }
        for line in lines {
            pending += Array("data: ".utf8)
            pending += Array(line.utf8)
            pending.append(UInt8(ascii: "\n"))
        }
        pending.append(UInt8(ascii: "\n"))
    }

    /// Sleeps `seconds`, waking at once when cancelled.
    private func pause(_ seconds: Double) {
        cancellation.sleep(seconds)
    }
}
