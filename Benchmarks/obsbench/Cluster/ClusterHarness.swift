// The measurements of the cluster benchmark, written against closures so that every system
// measured (raw etcd here; obsd on a cluster of hosts beside it) goes through the same code and
// lands as one column of the same table:
// - latency: write i on one host, block until a watcher on another host has seen it; the time
//   from before the write to after the sighting, sample after sample (one in flight);
// - throughput: keep `inFlight` writes outstanding for a while, counting acknowledgements.
import Foundation

/// One system's figures: a column of the table.
struct ClusterColumn {
    var name: String
    /// Write-to-watcher latencies, seconds, one per sample.
    var latencies: [Double] = []
    /// Acknowledged writes per second, by writes in flight.
    var throughput: [Int: Double] = [:]

    func percentile(_ p: Double) -> Double {
        let sorted = latencies.sorted()
        return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }
}

/// `samples` writes one after the other (after `warmUp` unmeasured ones): `write(i)` sends write i
/// and returns at once or when acknowledged, `awaitSeen(i)` blocks until the watcher has seen it.
/// Returns each measured write's latency in seconds.
func measureLatency<Failure: Error>(samples: Int, warmUp: Int = 20, write: (Int) throws(Failure) -> Void,
                                    awaitSeen: (Int) throws(Failure) -> Void) throws(Failure) -> [Double] {
    var latencies: [Double] = []
    latencies.reserveCapacity(samples)
    for index in 0..<(warmUp + samples) {
        let start = benchNow()
        try write(index)
        try awaitSeen(index)
        if index >= warmUp { latencies.append(benchNow() - start) }
    }
    return latencies
}

/// Keeps `inFlight` writes outstanding for `seconds`: `send(i)` starts write i without waiting,
/// `awaitAcknowledged()` blocks until at least one write is acknowledged and returns how many were.
/// Returns acknowledged writes per second (the writes still in flight at the end are waited for
/// and counted with the time they took).
func measureThroughput<Failure: Error>(seconds: Double, inFlight: Int, send: (Int) throws(Failure) -> Void,
                                       awaitAcknowledged: () throws(Failure) -> Int) throws(Failure) -> Double {
    var sent = 0
    var acknowledged = 0
    let start = benchNow()
    while sent < inFlight {
        try send(sent)
        sent += 1
    }
    while acknowledged < sent {
        acknowledged += try awaitAcknowledged()
        while sent - acknowledged < inFlight, benchNow() - start < seconds {
            try send(sent)
            sent += 1
        }
    }
    return Double(acknowledged) / (benchNow() - start)
}

/// Prints the table: one row per figure, one column per system, and each later column's ratio to
/// the first (the raw etcd baseline).
func printClusterTable(_ columns: [ClusterColumn], inFlight: [Int]) {
    guard let baseline = columns.first else { return }
    var header = "| figure |"
    var rule = "|---|"
    for (index, column) in columns.enumerated() {
        header += " \(column.name) |"
        rule += "---:|"
        if index > 0 {
            header += " \(column.name) / \(baseline.name) |"
            rule += "---:|"
        }
    }
    print(header)
    print(rule)
    var rows: [(String, (ClusterColumn) -> Double, String)] = [
        ("write seen by a watcher, p50 (ms)", { $0.percentile(0.5) * 1000 }, "%.3f"),
        ("write seen by a watcher, p99 (ms)", { $0.percentile(0.99) * 1000 }, "%.3f"),
    ]
    for depth in inFlight {
        rows.append(("writes/s, \(depth) in flight", { $0.throughput[depth] ?? .nan }, "%.0f"))
    }
    for (name, figure, format) in rows {
        var line = "| \(name) |"
        for (index, column) in columns.enumerated() {
            line += " \(String(format: format, figure(column))) |"
            if index > 0 { line += " \(String(format: "%.2f", figure(column) / figure(baseline))) |" }
        }
        print(line)
    }
}
