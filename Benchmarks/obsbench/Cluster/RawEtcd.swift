// The raw etcd column: EtcdClient's puts and watches with nothing of obsd around them. The writer
// and the watcher are two clients, as two hosts would be, each on its own member (the writer's
// first endpoint is member 1, the watcher's member 2), driven as the daemon's loop drives one:
// poll(2) on both clients' descriptors, then takeCompletions() of each. The watcher takes every
// event in the throughput rows too (and drops them), as obsd's hosts apply every write.
//
// With one watch a put is seen by one watcher, the comparison cluster mode's goal is stated
// against. With two the writer's client watches the prefix too (and drops what it sees): hosts
// that share a state through etcd each watch it, the writer's host included, since it must see
// the others' writes; obsd's hosts do. Every put is then sent to two watch streams, which costs
// etcd about as much CPU as a third of the put itself (docs/performance.md).
import EtcdClient
import Foundation
import Glibc

final class RawEtcd: MeasuredSystem {
    let name: String
    let writer: EtcdClient
    let watcher: EtcdClient
    private let prefix: [UInt8]
    private let watch: EtcdRequestID
    /// The writer's host's own watch of the prefix (with two watches), if it has one.
    private let writerWatch: EtcdRequestID?
    private let parts: CPUParts
    /// The values the watcher has seen and not yet been asked about.
    private var seen: Set<String> = []
    /// The next latency sample's value.
    private var nextValue = 0
    /// Latency puts sent and not yet acknowledged (at most one).
    private var unacknowledged = 0

    init(name: String, endpoints: [String], prefix: String, parts: CPUParts, watches: Int, api: EtcdAPI) throws(BenchError) {
        self.name = name
        self.parts = parts
        self.prefix = Array(prefix.utf8)
        do {
            var writerConfiguration = EtcdConfiguration(endpoints: endpoints)
            writerConfiguration.api = api
            var watcherConfiguration = EtcdConfiguration(endpoints: Array(endpoints.dropFirst()) + endpoints.prefix(1))
            watcherConfiguration.api = api
            writer = try EtcdClient(writerConfiguration)
            watcher = try EtcdClient(watcherConfiguration)
        } catch {
            throw BenchError("cannot start the etcd clients: \(error)")
        }
        watch = watcher.watch(.prefix(self.prefix))
        writerWatch = watches > 1 ? writer.watch(.prefix(self.prefix)) : nil
        var created = 0
        let deadline = benchNow() + 30
        while created < min(watches, 2) {
            guard benchNow() < deadline else { throw BenchError("the watches were not created within 30 s") }
            let (written, watched) = wait()
            for case .watch(_, let update) in written + watched {
                if case .created = update { created += 1 }
                if case .failed(let error) = update { throw BenchError("a watch failed: \(error)") }
            }
        }
    }

    deinit {
        writer.close()
        watcher.close()
    }

    func latencies(samples: Int, warmUp: Int) throws(BenchError) -> [Double] {
        defer { nextValue += warmUp + samples }
        // As for obsd, the time is the put's until the watcher saw it: its acknowledgement is taken
        // just before the next put, and the last one's before the row ends, so that no put is left
        // under way for a later row to count (or to time out in while other systems are measured).
        let latencies = try measureLatency(samples: samples, warmUp: warmUp, first: nextValue,
                                           write: { (value: Int) throws(BenchError) in try write(value) },
                                           awaitSeen: { (value: Int) throws(BenchError) in try awaitSeen(value) })
        try awaitEveryAcknowledgement()
        return latencies
    }

    func acknowledgementLatencies(samples: Int, warmUp: Int) throws(BenchError) -> [Double] {
        defer { drainWatcher() }
        let key = prefix + Array("acknowledged".utf8)
        return try measureLatency(samples: samples, warmUp: warmUp, first: 0, write: { (value: Int) throws(BenchError) in
            _ = writer.submit(.put(PutRequest(key: key, value: Array(String(value).utf8))))
            unacknowledged += 1
        }, awaitSeen: { (_: Int) throws(BenchError) in try awaitEveryAcknowledgement() })
    }

    func throughput(seconds: Double, inFlight: Int) throws(BenchError) -> ThroughputRow {
        defer { drainWatcher() }
        return try measureThroughput(seconds: seconds, inFlight: inFlight, parts: parts,
                                     send: { (index: Int) throws(BenchError) in send(index) },
                                     awaitAcknowledged: { () throws(BenchError) -> Int in try awaitAcknowledged() })
    }

    /// Sends a put of value `index` to the key `latency`, once the put before it is acknowledged.
    private func write(_ index: Int) throws(BenchError) {
        try awaitEveryAcknowledgement()
        _ = writer.submit(.put(PutRequest(key: prefix + Array("latency".utf8), value: Array(String(index).utf8))))
        unacknowledged += 1
    }

    /// Blocks until every put sent is acknowledged.
    private func awaitEveryAcknowledgement() throws(BenchError) {
        let deadline = benchNow() + 30
        while unacknowledged > 0 {
            guard benchNow() < deadline else { throw BenchError("a put not acknowledged within 30 s") }
            let (written, watched) = wait()
            unacknowledged -= try checkAcknowledgements(written)
            try see(watched)
        }
    }

    /// Blocks until the watcher has seen value `index`.
    private func awaitSeen(_ index: Int) throws(BenchError) {
        let wanted = String(index)
        let deadline = benchNow() + 30
        while !seen.contains(wanted) {
            guard benchNow() < deadline else { throw BenchError("put \(index) not seen by the watch within 30 s") }
            let (written, watched) = wait()
            unacknowledged -= try checkAcknowledgements(written)
            try see(watched)
        }
        seen.remove(wanted)
    }

    /// Takes the values the watcher's completions carry.
    private func see(_ watched: [EtcdCompletion]) throws(BenchError) {
        for completion in watched {
            switch completion {
            case .watch(_, .events(_, let events)):
                for event in events { seen.insert(String(decoding: event.kv.value, as: UTF8.self)) }
            case .watch(_, .failed(let error)): throw BenchError("the watch failed: \(error)")
            default: break
            }
        }
    }

    /// Sends a put to one of 1,000 keys, without waiting.
    private func send(_ index: Int) {
        _ = writer.submit(.put(PutRequest(key: prefix + Array("load/\(index % 1000)".utf8), value: Array("x".utf8))))
    }

    /// Blocks until at least one put is acknowledged; how many were.
    private func awaitAcknowledged() throws(BenchError) -> Int {
        while true {
            let (written, watched) = wait()
            let acknowledged = try checkAcknowledgements(written)
            for case .watch(_, .failed(let error)) in watched { throw BenchError("the watch failed: \(error)") }
            if acknowledged > 0 { return acknowledged }
        }
    }

    /// Forgets the values seen in a load row.
    private func drainWatcher() {
        _ = watcher.takeCompletions()
        seen.removeAll()
    }

    /// Checks the writer's completions: the answers to its puts, and its own watch's events.
    /// Returns how many puts they acknowledge.
    private func checkAcknowledgements(_ completions: [EtcdCompletion]) throws(BenchError) -> Int {
        for case .response(_, .failure(let error)) in completions { throw BenchError("a put failed: \(error)") }
        for case .watch(_, .failed(let error)) in completions { throw BenchError("the writer's watch failed: \(error)") }
        return completions.count { if case .response = $0 { true } else { false } }
    }

    /// Waits up to a second for either client, then takes what each has.
    private func wait() -> (writer: [EtcdCompletion], watcher: [EtcdCompletion]) {
        var descriptors = [pollfd(fd: writer.completionFD, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: watcher.completionFD, events: Int16(POLLIN), revents: 0)]
        _ = poll(&descriptors, 2, 1000)
        return (writer.takeCompletions(), watcher.takeCompletions())
    }
}
