// `obsbench cluster --etcd-metrics`: etcd's own counters per write, to say where etcd's CPU per
// write goes in each column. Counters are robust where timings are not on a shared machine: they
// count what etcd did (fsyncs, raft proposals, bytes to peers and clients, gRPC messages by
// method, Go's allocations and collections), not how long it took; and how often the members'
// threads were put to sleep and woken (the kernel's counters in /proc), which is where the same
// work done in more, smaller pieces shows.
//
// Every member's Prometheus text (`/metrics` on its client URL, fetched with curl(1)) and its
// threads' counters are read before and after each throughput row; the deltas of the three
// members are summed, and divided by the row's acknowledged writes, over all rounds of the row.
import Foundation

/// The counters of etcd's members that say what a write cost them.
struct EtcdMetrics {
    let urls: [String]
    /// The members' process IDs, whose threads' scheduling counters are read from /proc.
    let pids: [Int32]

    /// Sample names read (summed over their labels but for `grpc_method`); a counter's rate per
    /// write is the figure, and a histogram's `_count` the number of times the thing was done.
    static let names = [
        "process_cpu_seconds_total",
        "etcd_server_proposals_committed_total",
        "etcd_disk_wal_fsync_duration_seconds_count",
        "etcd_disk_backend_commit_duration_seconds_count",
        "etcd_network_peer_sent_bytes_total",
        "etcd_network_peer_received_bytes_total",
        "etcd_network_client_grpc_sent_bytes_total",
        "etcd_network_client_grpc_received_bytes_total",
        "grpc_server_msg_sent_total",
        "grpc_server_msg_received_total",
        "grpc_server_started_total",
        "go_memstats_alloc_bytes_total",
        "go_memstats_mallocs_total",
        "go_gc_duration_seconds_count",
    ]

    /// The members' samples summed: `name` or `name{method}` to value.
    func scrape() throws(BenchError) -> [String: Double] {
        var total: [String: Double] = [:]
        for url in urls {
            for (name, value) in try Self.samples(of: Self.fetch(url + "/metrics")) { total[name, default: 0] += value }
        }
        for pid in pids {
            for (name, value) in Self.threadCounters(pid) { total[name, default: 0] += value }
        }
        return total
    }

    /// The kernel's scheduling counters of every thread of `pid`: how often they gave up the CPU
    /// (waiting for something) or were made to, and how many times they were put on it.
    static func threadCounters(_ pid: Int32) -> [String: Double] {
        var counters: [String: Double] = [:]
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for task in tasks {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
            for line in status.split(separator: "\n") {
                let fields = line.split(separator: ":")
                guard fields.count == 2, fields[0].hasSuffix("ctxt_switches"),
                      let value = Double(fields[1].trimmingCharacters(in: .whitespaces)) else { continue }
                counters["threads_" + fields[0], default: 0] += value
            }
            let schedstat = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8)) ?? ""
            let fields = schedstat.split(whereSeparator: \.isWhitespace)
            if fields.count >= 3, let slices = Double(fields[2]) {
                counters["threads_timeslices", default: 0] += slices
            }
        }
        return counters
    }

    private static func fetch(_ url: String) throws(BenchError) -> String {
        try processOutput("/usr/bin/env", ["curl", "--silent", "--show-error", "--max-time", "10", url])
    }

    /// The samples of `names` in a Prometheus text page, summed over their labels but the gRPC method.
    static func samples(of text: String) -> [String: Double] {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            let series = line[..<space]
            let brace = series.firstIndex(of: "{") ?? series.endIndex
            let name = String(series[..<brace])
            guard names.contains(name) else { continue }
            var key = name
            if let method = series.range(of: "grpc_method=\"") {
                key += "{" + series[method.upperBound...].prefix { $0 != "\"" } + "}"
            }
            samples[key, default: 0] += value
        }
        return samples
    }
}

/// Counter deltas over the rows of one column and number of writes in flight.
struct CounterDeltas {
    var writes = 0
    var deltas: [String: Double] = [:]

    mutating func add(before: [String: Double], after: [String: Double], writes: Int) {
        self.writes += writes
        for (name, value) in after { deltas[name, default: 0] += value - (before[name] ?? 0) }
    }

    func perWrite(_ name: String) -> Double { (deltas[name] ?? 0) / Double(max(1, writes)) }
}

/// One table: a row per counter that moved, a column per system and number of writes in flight.
func printCountersPerWrite(_ columns: [ClusterColumn], inFlight: [Int]) {
    let cells = inFlight.flatMap { depth in columns.map { (title: "\($0.name), \(depth)", counters: $0.counters[depth] ?? CounterDeltas()) } }
    print("etcd's counters per acknowledged write, the three members summed, over every round (writes: "
        + cells.map { "\($0.title) in flight \($0.counters.writes)" }.joined(separator: ", ") + "):")
    print()
    print("| counter | " + cells.map(\.title).joined(separator: " | ") + " |")
    print("|---|" + String(repeating: "---:|", count: cells.count))
    let names = Set(cells.flatMap { $0.counters.deltas.keys }).sorted()
    for name in names where cells.contains(where: { $0.counters.perWrite(name) != 0 }) {
        let scale = name == "process_cpu_seconds_total" ? 1e6 : 1
        let unit = scale == 1 ? "" : " (µs)"
        let figures = cells.map { cell in
            let figure = cell.counters.perWrite(name) * scale
            return String(format: abs(figure) >= 100 ? "%.0f" : "%.3f", figure)
        }
        print("| \(name)\(unit) | " + figures.joined(separator: " | ") + " |")
    }
}
