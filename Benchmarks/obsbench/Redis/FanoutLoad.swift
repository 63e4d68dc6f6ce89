// Deliveries to watchers: one publisher connection sends updates; `watchers` connections each
// receive `eventsPerUpdate` deliveries per update. An update is complete when its last delivery
// reached the last watcher. Watchers read in order, so updates complete in order, and a ring of
// per-update counters is enough to track them.
//
// Two measurements: `rate` keeps at most `window` updates incomplete (so neither server is pushed
// into dropping events or disconnecting slow subscribers) and counts deliveries per second;
// `paced` sends updates on a fixed schedule and takes the latency from each update's scheduled
// time to its completion (so a server that falls behind pays for its queue).
import Foundation

struct FanoutShape {
    var watchers: Int
    var eventsPerUpdate: Int
    /// Commands run once on the publisher connection before the watchers connect.
    var setup: [[UInt8]]
    /// The command each watcher sends, with the replies it gets.
    var watch: (command: [UInt8], replies: Int)
    /// The n-th update, with the replies it gets.
    var update: (Int) -> (command: [UInt8], replies: Int)
}

/// What a rate measurement counted, and over how long; counts of several blocks add up.
struct FanoutCount {
    var updates = 0
    var deliveries = 0
    var seconds = 0.0

    static func += (total: inout FanoutCount, block: FanoutCount) {
        total.updates += block.updates
        total.deliveries += block.deliveries
        total.seconds += block.seconds
    }

    var deliveriesPerSecond: Double { seconds > 0 ? Double(deliveries) / seconds : 0 }
}

final class FanoutRun {
    private let shape: FanoutShape
    private let poller = Poller()
    private let publisher: ClientConnection
    private var watchers: [ClientConnection] = []
    /// Per watcher fd: updates it has completed.
    private var completedByWatcher: [Int32: Int] = [:]
    private var ring: [Int]
    /// Per ring slot: when the update's latency starts.
    private var startTimes: [Double]
    private(set) var sent = 0
    /// Updates every watcher has completed.
    private(set) var complete = 0
    private(set) var deliveries = 0
    /// Called with an update's latency start (0: not measured) and completion time.
    private var onComplete: (Double, Double) -> Void = { _, _ in }

    init(_ server: ServerProcess, _ shape: FanoutShape, window: Int) throws(BenchError) {
        self.shape = shape
        ring = Array(repeating: 0, count: window)
        startTimes = Array(repeating: 0, count: window)
        publisher = try ClientConnection(path: server.socketPath, wire: server.wire)
        poller.add(publisher)
        try roundTrip(publisher, shape.setup, poller: poller)
        for _ in 0..<shape.watchers {
            let watcher = try ClientConnection(path: server.socketPath, wire: server.wire)
            poller.add(watcher)
            watcher.queue(shape.watch.command, replies: shape.watch.replies)
            poller.flush(watcher)
            watchers.append(watcher)
            completedByWatcher[watcher.fd] = 0
        }
        try waitForReplies(watchers, poller: poller)
    }

    /// The next update, unless `window` updates are already incomplete; its latency counts from
    /// `startTime`.
    private func sendIfRoom(startTime: Double = 0) -> Bool {
        guard sent - complete < ring.count else { return false }
        startTimes[sent % ring.count] = startTime
        let update = shape.update(sent)
        publisher.queue(update.command, replies: update.replies)
        sent += 1
        return true
    }

    private func pump(_ now: () -> Double) throws(BenchError) {
        var closed = false
        poller.flush(publisher)
        poller.poll(milliseconds: 1) { connection in
            guard let (_, delivered) = connection.readAvailable() else {
                closed = true
                return
            }
            guard connection !== publisher, delivered > 0 else { return }
            deliveries += delivered
            let before = completedByWatcher[connection.fd]!
            let after = connection.deliveries / shape.eventsPerUpdate
            guard after > before else { return }
            completedByWatcher[connection.fd] = after
            for update in before..<after { ring[update % ring.count] += 1 }
            let time = now()
            while complete < sent, ring[complete % ring.count] == shape.watchers {
                ring[complete % ring.count] = 0
                onComplete(startTimes[complete % ring.count], time)
                complete += 1
            }
        }
        if closed { throw BenchError("the server closed a connection during the run") }
    }

    /// Deliveries and updates counted over `seconds` with at most `ring` updates incomplete, after
    /// `warmup` seconds that fill the window and are not counted.
    func rate(seconds: Double, warmup: Double = 0.2) throws(BenchError) -> FanoutCount {
        let start = benchNow()
        let warm = start + warmup
        let end = warm + seconds
        var from: (deliveries: Int, complete: Int)?
        var now = start
        while now < end {
            while sendIfRoom() {}
            try pump { benchNow() }
            now = benchNow()
            if from == nil, now >= warm { from = (deliveries, complete) }
        }
        // Counted up to the end of the window: what the drain then receives took time not counted.
        let counted = FanoutCount(updates: complete - from!.complete, deliveries: deliveries - from!.deliveries, seconds: now - warm)
        try drain()
        return counted
    }

    /// Latencies (seconds) of updates sent at `perSecond` for `seconds`, to their completion. Each
    /// counts from the moment the update was sent (the client's 1 ms poll makes sends up to 1 ms
    /// late, the same for both servers), except after the window was full: then from when the update
    /// was due, so that a server which falls behind pays for its queue.
    func paced(perSecond: Double, seconds: Double) throws(BenchError) -> [Double] {
        let first = sent
        let start = benchNow() + 0.01
        var latencies: [Double] = []
        onComplete = { startTime, time in
            guard startTime > 0 else { return }
            latencies.append(time - startTime)
        }
        let total = Int(perSecond * seconds)
        var heldBack = false
        while sent - first < total {
            let now = benchNow()
            let due = min(total, Int((now - start) * perSecond) + 1)
            while sent - first < due {
                let scheduled = start + Double(sent - first) / perSecond
                guard sendIfRoom(startTime: heldBack ? scheduled : now) else { break }
            }
            heldBack = sent - first < due
            try pump { benchNow() }
        }
        try drain()
        onComplete = { _, _ in }
        return latencies
    }

    /// Waits (at most 30 s) until every update sent is complete and answered.
    private func drain() throws(BenchError) {
        let deadline = benchNow() + 30
        while complete < sent || publisher.inFlight > 0 {
            guard benchNow() < deadline else { throw BenchError("updates still undelivered after 30 s") }
            try pump { benchNow() }
        }
    }
}
