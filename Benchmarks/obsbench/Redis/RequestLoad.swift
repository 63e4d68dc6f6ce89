// Request throughput: `clients` connections, each keeping `depth` requests in flight (a new one is
// sent for each reply), driven by one thread. Both servers get the same byte-for-byte workload
// shape: the same keys, the same 64-byte values, the same pipelining.
import Foundation

struct LoadResult {
    var opsPerSecond: Double
    /// Server CPU seconds per second of the measured window (1.0 is one core busy).
    var serverCPU: Double
}

/// Runs for `seconds` after a short warm-up, or until `total` requests were answered, whichever
/// comes first. `request(n)` is the n-th request of the run.
func measureRequests(_ server: ServerProcess, clients: Int, depth: Int, seconds: Double, total: Int = .max,
                     request: (Int) -> [UInt8]) throws(BenchError) -> LoadResult {
    let poller = Poller()
    var connections: [ClientConnection] = []
    for _ in 0..<clients {
        let connection = try ClientConnection(path: server.socketPath, wire: server.wire)
        poller.add(connection)
        connections.append(connection)
    }
    var sent = 0
    for connection in connections {
        for _ in 0..<min(depth, total - sent) {
            connection.queue(request(sent))
            sent += 1
        }
        poller.flush(connection)
    }
    let warmup = total == .max ? 0.2 : 0
    let start = benchNow()
    let end = start + warmup + seconds
    var answered = 0
    var measuredFrom: (time: Double, answered: Int, cpu: Double)?
    var closed: ClientConnection?
    var now = start
    while now < end, answered < total, closed == nil {
        poller.poll(milliseconds: 10) { connection in
            guard let (replies, _) = connection.readAvailable() else {
                closed = connection
                return
            }
            answered += replies
            guard replies > 0, now < end else { return }
            for _ in 0..<min(replies, total - sent) {
                connection.queue(request(sent))
                sent += 1
            }
            poller.flush(connection)
        }
        now = benchNow()
        if measuredFrom == nil, now >= start + warmup {
            measuredFrom = (now, answered, server.cpuSeconds)
        }
    }
    if closed != nil { throw BenchError("\(server.wire.rawValue) closed a connection during the run") }
    guard let from = measuredFrom, now > from.time else { return LoadResult(opsPerSecond: 0, serverCPU: 0) }
    let elapsed = now - from.time
    return LoadResult(opsPerSecond: Double(answered - from.answered) / elapsed,
                      serverCPU: (server.cpuSeconds - from.cpu) / elapsed)
}

/// Sends `commands` on `connection` and waits (at most 30 s) for all their replies.
func roundTrip(_ connection: ClientConnection, _ commands: [[UInt8]], poller: Poller) throws(BenchError) {
    for command in commands { connection.queue(command) }
    poller.flush(connection)
    try waitForReplies([connection], poller: poller)
}

/// Waits (at most 30 s) until every connection has its replies.
func waitForReplies(_ connections: [ClientConnection], poller: Poller) throws(BenchError) {
    let deadline = benchNow() + 30
    var closed = false
    while connections.contains(where: { $0.inFlight > 0 }) {
        guard benchNow() < deadline, !closed else { throw BenchError("no reply within 30 s, or the server closed the connection") }
        poller.poll(milliseconds: 10) { connection in
            if connection.readAvailable() == nil { closed = true }
        }
    }
}
