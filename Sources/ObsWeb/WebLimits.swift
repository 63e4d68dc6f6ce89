/// The limits of `obsctl web`, each a named constant with its default.
struct WebLimits: Sendable {
    /// Largest request body (a `set` from the page): 413 beyond it. The daemon's own line limit
    /// (1 MiB by default) still applies to what is forwarded.
    var maxBodyBytes = 2 << 20
    /// Connections served at once, each a thread; libmicrohttpd closes one past it at once, unanswered.
    var maxConnections = 64
    /// Connections that have not sent a request with the token (any local user can open them),
    /// at most, at once: one more closes the one that has waited longest without sending a request
    /// (a second or more; else the oldest), another user's before the user's own on loopback
    /// (`ConnectionGuard`), so that they never take the connections of the user who has the token,
    /// nor keep out a new connection.
    var maxConnectionsWithoutToken = 32
    /// Seconds after which a connection that has not sent a request with the token is closed,
    /// whatever it is doing: one that sends a request's head a byte at a time is never idle.
    var secondsWithoutToken = 10.0
    /// Seconds a connection may stay idle before it is closed, until it has made a request that
    /// carries the token: any local user can open connections without it, and one that sends
    /// nothing (or a page's files only) must not hold one of the `maxConnections` for long.
    var idleTimeoutSeconds = 5
    /// Seconds a connection that has made a request with the token may stay idle (an event stream
    /// is idle while it waits for the daemon: above `keepAliveSeconds`).
    var authorizedIdleTimeoutSeconds = 60
    /// Seconds between keep-alive comments on a quiet event stream (below the idle timeout, and
    /// how soon a page that went away is noticed).
    var keepAliveSeconds = 15.0
    /// Seconds an event stream's daemon may stay silent (it is asked for `progress` at least four
    /// times as often) before the page is told the connection is lost.
    var daemonSilenceSeconds = 30.0
    /// Events gathered into one Server-Sent Event, in bytes: a burst reaches the page as a few
    /// large messages instead of one message per key.
    var batchBytes = 256 << 10
    /// Seconds a request to the daemon may take before the page is answered 504.
    var requestTimeout = 5.0
    /// A key's history: the changes of at most the last `historyRevisions` revisions, of which
    /// the newest `historyEvents` and at most `historyBytes` of them are kept.
    var historyRevisions: UInt64 = 1000
    var historyEvents = 50
    var historyBytes = 1 << 20
}
