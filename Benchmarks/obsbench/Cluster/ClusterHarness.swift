// The measurements of the cluster benchmark, written against closures so that every system
// measured (raw etcd; obsd on a cluster of hosts beside it) goes through the same code and lands
// as one column of the same table, the systems measured alternately, row by row, round after
// round (the latencies of every round pooled, the median round's throughput):
// - latency: write i on one host, block until a watcher on another host has seen it; the time
//   from before the write to after the sighting, sample after sample (one in flight);
// - throughput: keep `inFlight` writes outstanding for a while, counting acknowledgements, and
//   the CPU time each process of the system (etcd's members, obsd's hosts, the benchmark itself)
//   spent per write meanwhile: on a machine whose cores etcd, obsd and the benchmark share, every
//   microsecond one spends is taken from the others.
import Foundation

/// A system measured: raw etcd, or obsd's hosts on it. Both are set up once and measured row by
/// row, alternately, so that both see the same load on a shared machine.
protocol MeasuredSystem: AnyObject {
    var name: String { get }
    /// `samples` write-to-watcher latencies, seconds (after `warmUp` unmeasured writes).
    func latencies(samples: Int, warmUp: Int) throws(BenchError) -> [Double]
    /// `samples` write-to-acknowledgement latencies of the writer's host, seconds: the part of a
    /// write's way to a watcher that its writer waits for.
    func acknowledgementLatencies(samples: Int, warmUp: Int) throws(BenchError) -> [Double]
    /// One throughput row: `inFlight` writes outstanding for `seconds`, with the CPU per write.
    func throughput(seconds: Double, inFlight: Int) throws(BenchError) -> ThroughputRow
}

/// One throughput row of one system.
struct ThroughputRow {
    var writesPerSecond: Double
    /// Acknowledged writes.
    var writes: Int
    /// CPU microseconds per acknowledged write of each part of the system.
    var cpuPerWrite: [(part: String, microseconds: Double)]
}

/// One system's figures: a column of the table.
struct ClusterColumn {
    var name: String
    /// Write-to-watcher latencies, seconds, one per sample, every round's together.
    var latencies: [Double] = []
    /// The same, round by round.
    var roundLatencies: [[Double]] = []
    /// Write-to-acknowledgement latencies, seconds, round by round.
    var roundAcknowledgements: [[Double]] = []
    /// Each round's throughput row, by writes in flight.
    var throughput: [Int: [ThroughputRow]] = [:]
    /// etcd's counters over every round's throughput row, by writes in flight (`--etcd-metrics`).
    var counters: [Int: CounterDeltas] = [:]

    init(name: String) { self.name = name }

    func percentile(_ p: Double) -> Double { quantile(latencies, p) }

    /// The median round's writes per second.
    func writesPerSecond(_ inFlight: Int) -> Double {
        guard let rows = throughput[inFlight], !rows.isEmpty else { return .nan }
        return median(rows.map(\.writesPerSecond))
    }
}

/// Measures every system `rounds` times, row after row, each row of every system before the next
/// row: the latency (`samples` in all, split between the rounds), then throughput at each number
/// of writes in flight. With `metrics`, etcd's counters are read before and after each throughput row.
func measureAlternately(_ systems: [any MeasuredSystem], rounds: Int, samples: Int, seconds: Double,
                        inFlight: [Int], metrics: EtcdMetrics? = nil) throws(BenchError) -> [ClusterColumn] {
    var columns = systems.map { ClusterColumn(name: $0.name) }
    /// A failure, named by the system, row and round it came in.
    func during<T>(_ system: any MeasuredSystem, _ row: String, _ round: Int, _ body: () throws(BenchError) -> T) throws(BenchError) -> T {
        do throws(BenchError) {
            return try body()
        } catch {
            throw BenchError("\(system.name), \(row), round \(round + 1): \(error)")
        }
    }
    for round in 0..<rounds {
        for (index, system) in systems.enumerated() {
            let latencies = try during(system, "latency", round) { () throws(BenchError) in
                try system.latencies(samples: samples / rounds, warmUp: round == 0 ? 20 : 5)
            }
            columns[index].latencies += latencies
            columns[index].roundLatencies.append(latencies)
            columns[index].roundAcknowledgements.append(try during(system, "acknowledgement latency", round) { () throws(BenchError) in
                try system.acknowledgementLatencies(samples: samples / rounds, warmUp: 5)
            })
        }
        for depth in inFlight {
            for (index, system) in systems.enumerated() {
                let before = try metrics?.scrape()
                let row = try during(system, "\(depth) in flight", round) { () throws(BenchError) in
                    try system.throughput(seconds: seconds, inFlight: depth)
                }
                columns[index].throughput[depth, default: []].append(row)
                if let metrics, let before {
                    columns[index].counters[depth, default: CounterDeltas()].add(before: before, after: try metrics.scrape(), writes: row.writes)
                }
            }
        }
    }
    return columns
}

/// `samples` writes one after the other (after `warmUp` unmeasured ones), of the values `first`,
/// `first + 1`...: `write(v)` sends the write of value v and returns at once or when acknowledged,
/// `awaitSeen(v)` blocks until the watcher has seen it. Returns each measured write's latency in
/// seconds.
func measureLatency<Failure: Error>(samples: Int, warmUp: Int, first: Int, write: (Int) throws(Failure) -> Void,
                                    awaitSeen: (Int) throws(Failure) -> Void) throws(Failure) -> [Double] {
    var latencies: [Double] = []
    latencies.reserveCapacity(samples)
    for index in 0..<(warmUp + samples) {
        let start = benchNow()
        try write(first + index)
        try awaitSeen(first + index)
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
/// Returns the acknowledged writes per second (the writes still in flight at the end are waited
/// for and counted with the time they took) and the CPU per write of each of `parts`.
func measureThroughput<Failure: Error>(seconds: Double, inFlight: Int, parts: CPUParts, send: (Int) throws(Failure) -> Void,
                                       awaitAcknowledged: () throws(Failure) -> Int) throws(Failure) -> ThroughputRow {
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
    let elapsed = benchNow() - start
    let used = zip(parts.read(), cpuBefore).map { $0 - $1 }
    return ThroughputRow(writesPerSecond: Double(acknowledged) / elapsed, writes: acknowledged,
                         cpuPerWrite: zip(parts.parts, used).map { ($0.name, $1 / Double(max(1, acknowledged)) * 1e6) })
}

/// One line per column and writes in flight: the CPU each part of the system spent per write
/// (the median round's, by total).
func printCPUPerWrite(_ columns: [ClusterColumn], inFlight: [Int]) {
    for column in columns {
        for depth in inFlight {
            guard let rows = column.throughput[depth], !rows.isEmpty else { continue }
            func total(_ row: ThroughputRow) -> Double { row.cpuPerWrite.reduce(0) { $0 + $1.microseconds } }
            let middle = rows.sorted { total($0) < total($1) }[rows.count / 2]
            let each = middle.cpuPerWrite.map { String(format: "%@ %.0f", $0.part, $0.microseconds) }.joined(separator: ", ")
            print(String(format: "- CPU per write (µs), %@, %d in flight: %@; total %.0f", column.name, depth, each, total(middle)))
        }
    }
}

/// The machine's load averages (1, 5 and 15 minutes), as /proc/loadavg gives them.
func loadAverages() -> String {
    ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?").split(separator: " ").prefix(3).joined(separator: " ")
}

/// Prints the table: one row per figure, one column per system, then each later column's ratio
/// to each of the first `baselines` columns (raw etcd's): the ratio of the figures over every
/// round, and the median of the rounds' own ratios. Each round measures every system one right
/// after the other, so a round's figures are a pair taken on the same machine; on a shared machine
/// whose speed moves from round to round, the median of the rounds' ratios is the steadier
/// comparison.
func printClusterTable(_ columns: [ClusterColumn], baselines: Int, inFlight: [Int]) {
    let pairs = columns.dropFirst(baselines).flatMap { column in columns.prefix(baselines).map { (column, $0) } }
    var header = "| figure |"
    var rule = "|---|"
    for column in columns {
        header += " \(column.name) |"
        rule += "---:|"
    }
    for (column, baseline) in pairs {
        header += " \(column.name) / \(baseline.name) | rounds' ratios: median |"
        rule += "---:|---:|"
    }
    print(header)
    print(rule)
    /// A figure over every round, and the same figure round by round.
    typealias Figure = (all: (ClusterColumn) -> Double, rounds: (ClusterColumn) -> [Double])
    func latency(_ p: Double) -> Figure {
        ({ $0.percentile(p) * 1000 }, { $0.roundLatencies.map { quantile($0, p) * 1000 } })
    }
    func acknowledgement(_ p: Double) -> Figure {
        ({ quantile($0.roundAcknowledgements.flatMap { $0 }, p) * 1000 }, { $0.roundAcknowledgements.map { quantile($0, p) * 1000 } })
    }
    var rows: [(String, Figure, String)] = [
        ("write seen by a watcher, p50 (ms)", latency(0.5), "%.3f"),
        ("write seen by a watcher, p99 (ms)", latency(0.99), "%.3f"),
        ("write acknowledged to its writer, p50 (ms)", acknowledgement(0.5), "%.3f"),
    ]
    for depth in inFlight {
        rows.append(("writes/s, \(depth) in flight", ({ $0.writesPerSecond(depth) }, { ($0.throughput[depth] ?? []).map(\.writesPerSecond) }), "%.0f"))
    }
    for (name, figure, format) in rows {
        var line = "| \(name) |"
        for column in columns { line += " \(String(format: format, figure.all(column))) |" }
        for (column, baseline) in pairs {
            let paired = zip(figure.rounds(column), figure.rounds(baseline)).map { $0 / $1 }
            line += " \(String(format: "%.2f", figure.all(column) / figure.all(baseline))) |"
            line += " \(paired.isEmpty ? "n/a" : String(format: "%.2f", median(paired))) |"
        }
        print(line)
    }
}
