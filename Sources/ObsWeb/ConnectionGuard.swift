import Dispatch
import Foundation
import Glibc
import ObsClient
import Synchronization

/// The bounds on connections that libmicrohttpd has no option for. Its idle timeout starts again
/// with every byte received, and it has no bound on the time a request may take: a client that
/// trickles a request's head (a byte a second, never the blank line that ends it) would hold its
/// connection for ever, and `maxConnections` such clients every connection, so that the browser of
/// the user who runs obsctl web got none. Any local user can connect, and on loopback every user
/// has the same address, so there is no telling them apart by address; what tells them apart is
/// the token. So a connection that has not sent a request head with the token (the page's files
/// are fetched without it) is:
/// - closed `secondsWithoutToken` after it was accepted, whatever it is doing (a browser sends a
///   request's head as soon as it has connected, and the page's files are small);
/// - one of at most `maxWithoutToken`: when one more is accepted, the one that has waited longest
///   without sending a request's head, if that is `headGrace` or more, is closed; otherwise the
///   oldest. So a new connection always gets its turn, and its head, which a browser sends with
///   the connection, is read at once; a client that reopens connections in a loop only closes its
///   own older ones, and the rest of the server's connections stay for those that have the token.
/// A connection that sent the token is left to libmicrohttpd and its idle timeout.
///
/// Users apart. What the address cannot tell, the kernel can: the peer of a loopback connection is
/// a socket on this machine, and its owner is known (`isOwnUser`, a sock_diag lookup). A
/// connection of the user who runs obsctl web (the browser's) is closed in favour of another's
/// only if no other user's is open: against a local user who reopens connections as fast as they
/// are closed, a new connection of the page's had until 32 more arrived to send its head (tens of
/// ms; Chromium on a loaded machine took longer), and now has its `secondsWithoutToken`. Any
/// process of that user can read the token from obsctl web anyway, so trusting them with this
/// order gives nothing away; and the owner only decides which connection is closed first, never
/// what a request may do. A connection whose owner cannot be told (the lookup failed, the peer is
/// gone) counts as another user's, which is the order without this. The owner of a connection is
/// asked only when it is a candidate to close, at most once.
///
/// Closing is `shutdown(2)` of the connection's socket, from another thread than the connection's
/// own: that thread, waiting in poll (or in send), sees the end, and libmicrohttpd closes the
/// connection as it closes any other. A socket is shut down only while its connection is
/// registered here, under the lock; libmicrohttpd reports a connection closed (`closed`) before it
/// closes the socket, so a descriptor number that another connection reuses is never touched.
final class ConnectionGuard: Sendable {
    private struct Entry {
        let socket: Int32
        let accepted: Double
        /// The order of acceptance, which breaks ties between equal times.
        let serial: UInt64
        var sentHead = false
        var closing = false
        /// Whether the peer runs as this process's user; nil until asked.
        var own: Bool?
    }

    private struct State {
        var entries: [UInt: Entry] = [:]
        var serial: UInt64 = 0
        var watching = false
        var stopped = false
        /// Whether the watch's thread waits with no deadline (no connection without the token),
        /// to be woken by the next `started`.
        var sleeping = false
        /// The watch's passes over the connections, for the tests.
        var passes = 0
    }

    let maxWithoutToken: Int
    /// Seconds after which a connection that has sent no request head is taken to trickle it: a
    /// browser sends its head as soon as it has connected.
    static let headGrace = 1.0
    let secondsWithoutToken: Double
    private let state = Mutex(State())
    private let watchEnded = DispatchSemaphore(value: 0)
    /// Wakes the watch's thread: a first connection without the token, or `stop`.
    private let wake = DispatchSemaphore(value: 0)

    /// Whether the peer of a connection's socket runs as this process's user (false when that
    /// cannot be told).
    private let isOwnUser: @Sendable (Int32) -> Bool

    /// `isOwnUser`: for connections from this machine only (a loopback listener); by default every
    /// connection counts as another user's.
    init(maxWithoutToken: Int, secondsWithoutToken: Double, isOwnUser: @escaping @Sendable (Int32) -> Bool = { _ in false }) {
        self.maxWithoutToken = max(1, maxWithoutToken)
        self.secondsWithoutToken = secondsWithoutToken
        self.isOwnUser = isOwnUser
    }

    /// A connection was accepted, on `socket`; `id` names it until `closed`. Closes the one that
    /// has waited longest if this one is past `maxWithoutToken`.
    func started(_ id: UInt, socket: Int32, now: Double = monotonicNow()) {
        state.withLock { state in
            state.serial += 1
            state.entries[id] = Entry(socket: socket, accepted: now, serial: state.serial)
            if state.sleeping {
                state.sleeping = false
                wake.signal()
            }
            guard state.entries.values.count(where: { !$0.closing }) > maxWithoutToken,
                  let victim = victim(among: &state.entries, new: id, now: now)
            else { return }
            Self.close(&state.entries[victim]!)
        }
    }

    /// The connection to close when one too many is open: another user's first (see the type's
    /// comment), and among them, first one that has sent no head for `headGrace` (trickling it),
    /// then the oldest. Not any that has sent none: one accepted a moment ago has not had the time
    /// either, and it was taken first whenever every other had sent a head (a client that sends
    /// whole heads and reopens its connections closed every new connection of the page's before
    /// its head was read). Not the new one, which has had no time to send anything, unless it is
    /// another user's and every other is the user's own.
    private func victim(among entries: inout [UInt: Entry], new id: UInt, now: Double) -> UInt? {
        func rank(_ entry: Entry) -> (Int, UInt64) {
            (!entry.sentHead && now - entry.accepted >= Self.headGrace ? 0 : 1, entry.serial)
        }
        let candidates = entries.filter { $0.key != id && !$0.value.closing }.sorted { rank($0.value) < rank($1.value) }.map(\.key)
        // Owners are asked in that order, each once: another user's storm is closed after one lookup.
        if let other = candidates.first(where: { !isOwn(&entries[$0]!) }) { return other }
        if entries[id]?.closing == false, !isOwn(&entries[id]!) { return id }
        return candidates.first
    }

    private func isOwn(_ entry: inout Entry) -> Bool {
        if let own = entry.own { return own }
        let own = isOwnUser(entry.socket)
        entry.own = own
        return own
    }

    /// A request's head came in on connection `id`; with the token, the connection is no longer
    /// bounded here.
    func headReceived(_ id: UInt, withToken: Bool) {
        state.withLock { state in
            if withToken {
                state.entries[id] = nil
            } else {
                state.entries[id]?.sentHead = true
            }
        }
    }

    /// libmicrohttpd is done with connection `id` (its socket is still open).
    func closed(_ id: UInt) {
        _ = state.withLock { $0.entries.removeValue(forKey: id) }
    }

    /// Closes every connection without the token that was accepted `secondsWithoutToken` or more
    /// before `now`; returns how many.
    @discardableResult
    func closeOverdue(now: Double = monotonicNow()) -> Int {
        state.withLock { closeOverdue(&$0, now: now) }
    }

    @discardableResult
    private func closeOverdue(_ state: inout State, now: Double) -> Int {
        var count = 0
        for (id, entry) in state.entries where !entry.closing && now - entry.accepted >= secondsWithoutToken {
            Self.close(&state.entries[id]!)
            count += 1
        }
        return count
    }

    /// Connections without the token, not yet being closed.
    var openWithoutToken: Int { state.withLock { $0.entries.values.count { !$0.closing } } }

    /// Calls `closeOverdue` on a thread of its own, when the first connection accepted without the
    /// token is due, until `stop`. With no such connection the thread waits for `started`, so that
    /// an idle obsctl web never wakes (it woke four times a second).
    func watch() {
        let start = state.withLock { state in
            guard !state.watching, !state.stopped else { return false }
            state.watching = true
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in
            while let wait = pass() {
                if let wait {
                    _ = wake.wait(timeout: .now() + .nanoseconds(Int(wait * 1e9)))
                } else {
                    wake.wait()
                }
            }
            watchEnded.signal()
        }
        thread.name = "obsctl-web-guard"
        thread.start()
    }

    /// One pass of the watch: closes what is overdue, then says how long to wait for the next
    /// (`.some(nil)`: until woken), or nil once stopped.
    private func pass() -> Double?? {
        let now = monotonicNow()
        return state.withLock { state -> Double?? in
            guard !state.stopped else { return .none }
            closeOverdue(&state, now: now)
            state.passes += 1
            guard let first = state.entries.values.lazy.filter({ !$0.closing }).map(\.accepted).min() else {
                state.sleeping = true
                return .some(nil)
            }
            // At least a millisecond: a wake a hair early does not spin.
            return .some(max(0.001, first + secondsWithoutToken - now))
        }
    }

    /// The watch's passes so far (each wakes its thread once).
    var watchPasses: Int { state.withLock { $0.passes } }

    /// Ends the watch (waits for its thread).
    func stop() {
        let wasWatching = state.withLock { state in
            defer { state.stopped = true }
            return state.watching && !state.stopped
        }
        if wasWatching {
            wake.signal()
            watchEnded.wait()
        }
    }

    private static func close(_ entry: inout Entry) {
        entry.closing = true
        _ = shutdown(entry.socket, Int32(SHUT_RDWR))
    }
}
