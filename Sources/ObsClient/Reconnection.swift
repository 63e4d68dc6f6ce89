import ObsCore

/// What a client that follows the daemon's state learns when it (re)connects: the daemon's
/// `hello`, and whether the daemon still holds the state the client followed before (it resumes
/// with `since`) or another one (a reset: nothing to resume, the client starts afresh with a
/// snapshot). The one rule for `WatchStream` (so `obsctl watch --reconnect` and the library's
/// watches) and obsctl web's live feed.
///
/// Once the client has seen a revision, the daemon holds another state when:
/// - its revision is below the last one seen: a daemon with `--memory` restarted, or one whose
///   state was restored from an older backup. Its revisions number other changes; and
/// - it is another process than the one last connected to (hello's `pid`) and its `stats` say
///   `durability` `memory`: it started empty, whatever revision it has reached since (its
///   definitions file, or other clients, may have written as much before this one was back).
/// A durable daemon restarted (SQLite) holds the state it left, at or past the revision seen: the
/// client resumes. So does a host of a cluster (its `stats` have `cluster`), even one behind the
/// revision seen: it holds the cluster's state, and starts a watch `since` a revision it has not
/// applied yet there, once it has.
public struct Reconnection: Sendable {
    /// The daemon's answer to `hello`.
    public let hello: Response
    /// The daemon's revision and pid, from `hello`.
    public let rev: UInt64
    public let pid: Int64?
    /// The daemon's run (hello's `run`; absent from a cluster's host and an older obsd): a watch
    /// resumed `since` a revision names the run it saw it in, so that a daemon whose state does not
    /// continue that run's answers `compacted` and a snapshot rather than a replay (a state
    /// restored from a backup, or left by a crash behind a revision it sent).
    public let run: String?
    /// Why the state followed is gone, in words for a person; nil when the client can resume.
    public let reset: String?

    /// Sends `hello` (and `stats`, when the rule needs the daemon's durability) on `connection`.
    /// `lastRevision` is the last revision the client saw (nil: it followed nothing yet, so there
    /// is nothing to reset); `lastPid` the pid of the daemon it last connected to.
    public static func greet(_ connection: ObsConnection, client: String?, lastRevision: UInt64?, lastPid: Int64?,
                             deadline: Double?) throws(ClientError) -> Reconnection {
        var fields: [String: JSONValue] = [:]
        if let client { fields["client"] = .string(client) }
        let hello = try connection.request("hello", fields, deadline: deadline)
        let rev = UInt64(max(0, hello["rev"]?.intValue ?? 0))
        let pid = hello["pid"]?.intValue
        let reset = resetReason(rev: rev, pid: pid, lastRevision: lastRevision, lastPid: lastPid) {
            (try? connection.request("stats", [:], deadline: deadline)).map {
                Kept(durability: $0["durability"]?.stringValue, cluster: $0["cluster"] != nil)
            }
        }
        return Reconnection(hello: hello, rev: rev, pid: pid, run: hello["run"]?.stringValue, reset: reset)
    }

    /// How a daemon keeps its state, from its `stats`.
    public struct Kept: Sendable {
        public var durability: String?
        /// Whether it is a host of a cluster.
        public var cluster: Bool

        public init(durability: String?, cluster: Bool) {
            self.durability = durability
            self.cluster = cluster
        }
    }

    /// The rule itself: why a daemon at `rev` with `pid` holds another state than the one followed
    /// (see the type), or nil. `kept` (from the daemon's `stats`) is asked only when needed; nil
    /// when the daemon did not say.
    public static func resetReason(rev: UInt64, pid: Int64?, lastRevision: UInt64?, lastPid: Int64?,
                                   kept: () -> Kept?) -> String? {
        guard let lastRevision else { return nil }
        let behind = rev < lastRevision
        let anotherProcess = pid != nil && lastPid != nil && pid != lastPid
        guard behind || anotherProcess else { return nil }
        let kept = kept()
        if kept?.cluster == true { return nil }
        if behind { return "obsd's revision went back from \(lastRevision) to \(rev)" }
        // A daemon that cannot say is taken to keep its state: the client resumes.
        return kept?.durability == "memory" ? "obsd restarted with its state in memory" : nil
    }
}
