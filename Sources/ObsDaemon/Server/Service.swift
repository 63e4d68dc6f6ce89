// The daemon serves whatever sits behind these protocols: in obsd, ObsCore's Store with one Session
// per connection. The daemon owns sockets, signals and time; the service never touches a file
// descriptor, so its logic is tested without one.

/// Where a session's output goes: the connection's output buffer.
public protocol ConnectionOutput: AnyObject {
    /// Queues one encoded line (ending with "\n"); sent at the end of the current loop turn.
    func write(_ line: [UInt8])
    /// Bytes queued and not yet written to the socket.
    var pendingBytes: Int { get }
}

/// One connection's protocol state.
public protocol ServiceSession: AnyObject {
    /// Handles one request line (without its newline).
    func receive(line: UnsafeRawBufferPointer)
    /// The connection is gone: drop its watches, remove its ephemeral keys.
    func close()
}

/// What the daemon serves.
public protocol DaemonService: AnyObject {
    /// A session for a new connection whose peer has `access`.
    func open(access: PeerAccess, output: any ConnectionOutput) -> any ServiceSession
    /// Runs what is due.
    func tick()
    /// Monotonic seconds (CLOCK_MONOTONIC) of the next timer, if any.
    var nextDeadline: Double? { get }
    /// `session`'s output has been drained below the limit after being over it.
    func drained(_ session: any ServiceSession)
    /// Takes new limits after a reload.
    func apply(_ limits: Limits)
}
