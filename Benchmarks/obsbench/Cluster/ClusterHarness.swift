// The measurements of the cluster benchmark, written against closures so that every system
// measured (raw etcd here; obsd on a cluster of hosts beside it) goes through the same code and
// lands as one column of the same table:
// - latency: write i on one host, block until a watcher on another host has seen it; the time
//   from before the write to after the sighting, sample after sample (one in flight);
// - throughput: keep `inFlight` writes outstanding for a while, counting acknowledgements, and
//   the CPU time each process of the system (etcd's members, obsd's hosts, the benchmark itself)
//   spent per write meanwhile: on a machine whose cores etcd, obsd and the benchmark share, every
//   microsecond one spends is taken from the others.
import Foundation

/// One system's figures: a column of the table.
struct ClusterColumn {
    var name: String
    /// Write-to-watcher latencies, seconds, one per sample.
    var latencies: [Double] = []
    /// Acknowledged writes per second, by writes in flight.
    var throughput: [Int: Double] = [:]
    /// CPU microseconds per acknowledged write of each part of the system, by writes in flight.
    var cpuPerWrite: [Int: [(part: String, microseconds: Double)]] = [:]

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

/// The processes of a system, by the name of the part each plays, whose CPU time is read.
struct CPUParts {
    var parts: [(name: String, pids: [Int32])]

    /// CPU seconds each part has used so far.
    func read() -> [Double] {
        parts.map { part in part.pids.reduce(0) { $0 + processCPUSeconds($1) } }
    }
}

/// Keeps `inFlight` writes outstanding for `seconds`: `send(i)` starts write i without waiting,
/// `awaitAcknowledged()` blocks until at least one write is acknowledged and returns how many were.
/// Puts into `column` the acknowledged writes per second (the writes still in flight at the end
/// are waited for and counted with the time they took) and the CPU per write of each of `parts`.
func measureThroughput<Failure: Error>(into column: inout ClusterColumn, seconds: Double, inFlight: Int, parts: CPUParts,
                                       send: (Int) throws(Failure) -> Void,
                                       awaitAcknowledged: () throws(Failure) -> Int) throws(Failure) {
    let cpuBefore = parts.read()
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
    column.throughput[inFlight] = Double(acknowledged) / (benchNow() - start)
    let used = zip(parts.read(), cpuBefore).map { $0 - $1 }
    column.cpuPerWrite[inFlight] = zip(parts.parts, used).map { ($0.name, $1 / Double(max(1, acknowledged)) * 1e6) }
}

/// One line per column and writes in flight: the CPU each part of the system spent per write.
func printCPUPerWrite(_ columns: [ClusterColumn], inFlight: [Int]) {
    for column in columns {
        for depth in inFlight {
            guard let parts = column.cpuPerWrite[depth] else { continue }
            let each = parts.map { String(format: "%@ %.0f", $0.part, $0.microseconds) }.joined(separator: ", ")
            print(String(format: "- CPU per write (µs), %@, %d in flight: %@; total %.0f", column.name, depth, each,
                         parts.reduce(0) { $0 + $1.microseconds }))
        }
    }
}

/// The machine's load averages (1, 5 and 15 minutes), as /proc/loadavg gives them.
func loadAverages() -> String {
    ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
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
