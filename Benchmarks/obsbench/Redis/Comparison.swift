// `obsbench redis`: obsd against redis-server, side by side, on this machine. Both servers run
// on their Unix sockets, started fresh by this program in temporary directories, with the same
// durability level per row: obsd --memory against Redis without persistence, obsd --durability
// normal against Redis with appendonly yes and appendfsync no, obsd --durability strict against
// Redis with appendonly yes and appendfsync always. One client thread (epoll) drives
// every connection, so on two cores the load generator and the server each get about one.
//
// Usage: obsbench redis [--runs N] [--seconds S] [--json FILE] [--obsd PATH] [--only GROUPS]
//                       [--watchers COUNTS] [--propagation SHAPES] [--pin CLIENT,SERVER|none]
//                       [--client PATH]
// GROUPS is a comma-separated subset of: throughput, fanout, propagation, normal, strict, memory; COUNTS
// the fan-out rows' watcher counts (default 1,10,100,1000); SHAPES the propagation rows (computed,
// chain, fan). The subsets are for profiling one row. `--pin` puts the load generator and the
// servers on the given CPUs (default 0,1 on a machine with two or more; `none` lets them run
// anywhere). `--client` drives the request and fan-out rows with obsload, the C load generator
// (Benchmarks/loadgen), instead of this program's own client.
import Foundation

private struct ComparisonOptions {
    var runs = 3
    var seconds = 1.0
    var json: String?
    var obsdPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("obsd").path
    var groups: Set<String> = ["throughput", "fanout", "propagation", "normal", "strict", "memory"]
    var watcherCounts = [1, 10, 100, 1000]
    var propagations = Propagation.allCases
    var clientCore: Int? = ProcessInfo.processInfo.activeProcessorCount >= 2 ? 0 : nil
    var serverCore: Int? = ProcessInfo.processInfo.activeProcessorCount >= 2 ? 1 : nil
    /// obsload's path, when it drives the rows instead of this program.
    var externalClient: String?

    init(_ arguments: ArraySlice<String>) throws(BenchError) {
        var remaining = arguments
        while let flag = remaining.popFirst() {
            guard let value = remaining.popFirst() else { throw BenchError("\(flag) needs a value") }
            switch flag {
            case "--runs": runs = max(1, Int(value) ?? runs)
            case "--seconds": seconds = max(0.2, Double(value) ?? seconds)
            case "--json": json = value
            case "--obsd": obsdPath = value
            case "--only": groups = Set(value.split(separator: ",").map(String.init))
            case "--watchers": watcherCounts = value.split(separator: ",").compactMap { Int($0) }
            case "--propagation": propagations = value.split(separator: ",").compactMap { Propagation(rawValue: String($0)) }
            case "--client": externalClient = value
            case "--pin":
                let cores = value.split(separator: ",").compactMap { Int($0) }
                guard value == "none" || cores.count == 2 else { throw BenchError("--pin takes CLIENT,SERVER or none") }
                clientCore = cores.first
                serverCore = cores.last
            default: throw BenchError("unknown option \(flag)")
            }
        }
    }
}

func runRedisComparison() {
    do throws(BenchError) {
        let options = try ComparisonOptions(CommandLine.arguments.dropFirst(2))
        if let core = options.clientCore { pinThisProcess(to: core) }
        let context = machineContext(options)
        print("## obsbench redis: obsd against redis-server, median of \(options.runs) runs of \(options.seconds) s")
        print()
        for (name, value) in context.sorted(by: { $0.key < $1.key }) { print("- \(name): \(value)") }
        print()
        var rows: [ComparisonRow] = []
        if !options.groups.isDisjoint(with: ["throughput", "fanout", "propagation"]) {
            let servers = try startBoth(durability: "memory", options)
            defer { servers.forEach { $0.stop() } }
            if options.groups.contains("throughput") { rows += try throughputRows(servers, options) }
            if options.groups.contains("fanout") {
                for watchers in options.watcherCounts {
                    rows += try fanoutRows("fan-out, \(watchers) watcher\(watchers == 1 ? "" : "s")", servers, options,
                                           external: ("key", watchers)) {
                        keyFanout($0, watchers: watchers)
                    }
                }
            }
            if options.groups.contains("propagation") {
                for propagation in options.propagations {
                    let name = switch propagation {
                    case .computed: "computed, 100 watchers"
                    case .chain: "50-deep chain"
                    case .fan: "1,000-wide fan"
                    }
                    rows += try fanoutRows(name, servers, options, external: (propagation.rawValue, 1)) { propagation.shape($0) }
                }
            }
        }
        // The durable rows: the same promise on both sides. normal: written before the answer (obsd
        // normal, Redis appendfsync no: its AOF is written, not fsynced, before replies go out);
        // strict: fsynced before the answer (Redis appendfsync always).
        for durability in ["normal", "strict"] where options.groups.contains(durability) {
            let servers = try startBoth(durability: durability, options)
            defer { servers.forEach { $0.stop() } }
            rows += try durableRows(durability, servers, options)
        }
        if options.groups.contains("memory") { rows += try memoryRows(options) }
        printTable(rows)
        print()
        if let path = options.json {
            try writeJSON(rows, context: context, runs: options.runs, to: path)
            print("(written to \(path))")
        }
    } catch {
        FileHandle.standardError.write(Data("obsbench redis: \(error)\n".utf8))
        check(false, "redis comparison: \(error)")
    }
}

private func startBoth(durability: String, _ options: ComparisonOptions) throws(BenchError) -> [ServerProcess] {
    let obsd = try ServerProcess(.obsd, durability: durability, obsdPath: options.obsdPath, core: options.serverCore)
    do throws(BenchError) {
        return [obsd, try ServerProcess(.redis, durability: durability, obsdPath: options.obsdPath, core: options.serverCore)]
    } catch {
        obsd.stop()
        throw error
    }
}

private func record(_ row: inout ComparisonRow, _ wire: Wire, _ value: Double) {
    switch wire {
    case .obsd: row.obsd.append(value)
    case .redis: row.redis.append(value)
    }
}

/// Set and get, 50 clients with 1 and 16 in flight; also the server's CPU time per operation, which
/// shows where the single client thread, not the server, limits the rate.
private func throughputRows(_ servers: [ServerProcess], _ options: ComparisonOptions) throws(BenchError) -> [ComparisonRow] {
    var rows: [ComparisonRow] = []
    for server in servers {
        _ = try measureRequests(server, clients: 50, depth: 16, seconds: 60, total: throughputKeys) { setRequest(server.wire, $0) }
    }
    for (operation, request) in [("set", setRequest), ("get", getRequest)] {
        for depth in [1, 16] {
            rows += try requestRows("\(operation) 50x\(depth)", servers, options, depth: depth, request)
        }
    }
    return rows
}

/// A request row's rate and the server's CPU time per request: 50 clients with `depth` in flight,
/// `options.runs` times on each server, interleaved.
private func requestRows(_ name: String, _ servers: [ServerProcess], _ options: ComparisonOptions, depth: Int,
                         _ request: (Wire, Int) -> [UInt8]) throws(BenchError) -> [ComparisonRow] {
    var rate = ComparisonRow(name: name, unit: "ops/s", higherIsBetter: true)
    var cpu = ComparisonRow(name: "\(name), server CPU", unit: "us/op", higherIsBetter: false)
    for _ in 0..<options.runs {
        for server in servers {
            let result: LoadResult
            if let client = options.externalClient {
                result = try externalRequests(client, server, operation: name.hasPrefix("get") ? "get" : "set", depth: depth,
                                              seconds: options.seconds)
            } else {
                result = try measureRequests(server, clients: 50, depth: depth, seconds: options.seconds) { request(server.wire, $0) }
            }
            record(&rate, server.wire, result.opsPerSecond)
            record(&cpu, server.wire, result.serverCPU / result.opsPerSecond * 1e6)
        }
    }
    return [rate, cpu]
}

/// Sets with 1 and 16 in flight per client, against servers that persist.
private func durableRows(_ durability: String, _ servers: [ServerProcess], _ options: ComparisonOptions) throws(BenchError) -> [ComparisonRow] {
    var rows: [ComparisonRow] = []
    for depth in [1, 16] {
        rows += try requestRows("\(durability) set 50x\(depth)", servers, options, depth: depth, setRequest)
    }
    return rows
}

/// Deliveries per second at the highest rate, and set-to-last-watcher latency at 1,000 sets/s.
/// Both servers' watchers stay connected for the whole row (obsload's too: one obsload drives both
/// servers for the row), and each run measures the servers in turns of `blockSeconds`: rate blocks first, then paced blocks, the server that goes first
/// changing every block (obsd, Redis, Redis, obsd, ...). A run's figure for a server is over all its
/// blocks (deliveries over the time counted; latency percentiles over every update sent). On a
/// shared machine the time it takes an idle core to wake changes from second to second; a server
/// measured in one stretch of a second against the other in the next gets a different machine,
/// which moved the latency rows by several times from run to run. In turns of a tenth of a second,
/// both servers meet the same machine.
private func fanoutRows(_ name: String, _ servers: [ServerProcess], _ options: ComparisonOptions, external: (String, Int),
                        shape: (Wire) -> FanoutShape) throws(BenchError) -> [ComparisonRow] {
    var rate = ComparisonRow(name: "\(name): deliveries", unit: "/s", higherIsBetter: true)
    var p50 = ComparisonRow(name: "\(name): latency p50 at 1,000/s", unit: "ms", higherIsBetter: false)
    var p99 = ComparisonRow(name: "\(name): latency p99 at 1,000/s", unit: "ms", higherIsBetter: false)
    if let client = options.externalClient {
        for run in try externalFanout(client, servers, shape: external.0, watchers: external.1, seconds: options.seconds,
                                      block: blockSeconds, runs: options.runs) {
            for (server, figures) in zip(servers, run) {
                record(&rate, server.wire, figures.rate)
                record(&p50, server.wire, figures.p50)
                record(&p99, server.wire, figures.p99)
            }
        }
        return [rate, p50, p99]
    }
    var runs: [FanoutRun] = []
    for server in servers { runs.append(try FanoutRun(server, shape(server.wire), window: 64)) }
    let blocks = max(1, Int((options.seconds / blockSeconds).rounded()))
    let block = options.seconds / Double(blocks)
    /// The servers' indices in the order of block `n`: ABBA, so neither always goes first.
    func order(_ n: Int) -> [Int] { n % 2 == 0 ? Array(runs.indices) : runs.indices.reversed() }
    for _ in 0..<options.runs {
        var counts = Array(repeating: FanoutCount(), count: runs.count)
        var latencies = Array(repeating: [Double](), count: runs.count)
        for n in 0..<blocks {
            for i in order(n) { counts[i] += try runs[i].rate(seconds: block, warmup: min(0.2, block / 4)) }
        }
        for n in 0..<blocks {
            for i in order(n) { latencies[i] += try runs[i].paced(perSecond: 1000, seconds: block) }
        }
        for i in runs.indices {
            record(&rate, servers[i].wire, counts[i].deliveriesPerSecond)
            record(&p50, servers[i].wire, quantile(latencies[i], 0.5) * 1000)
            record(&p99, servers[i].wire, quantile(latencies[i], 0.99) * 1000)
        }
    }
    return [rate, p50, p99]
}

/// The length of one server's turn in the fan-out and propagation rows.
private let blockSeconds = 0.1

/// Resident size after loading 1 million keys with 64-byte values (50 clients, 16 in flight), each
/// server started fresh. One run: loading is deterministic, and it takes the longest.
private func memoryRows(_ options: ComparisonOptions) throws(BenchError) -> [ComparisonRow] {
    var loaded = ComparisonRow(name: "memory, 1M keys x 64 B", unit: "MiB", higherIsBetter: false)
    var empty = ComparisonRow(name: "memory, empty server", unit: "MiB", higherIsBetter: false)
    // What each key adds: the loaded server less the empty one, per key (the runtime and libraries
    // a server maps in at start count once, not per key).
    var perKey = ComparisonRow(name: "memory per key (loaded less empty)", unit: "B", higherIsBetter: false)
    for wire in Wire.allCases {
        let server = try ServerProcess(wire, durability: "memory", obsdPath: options.obsdPath, core: options.serverCore)
        defer { server.stop() }
        let before = server.residentBytes
        record(&empty, wire, Double(before) / 1_048_576)
        let keys = 1_000_000
        _ = try measureRequests(server, clients: 50, depth: 16, seconds: 600, total: keys) {
            wire.set("m.\($0)", .payload($0))
        }
        let after = server.residentBytes
        record(&loaded, wire, Double(after) / 1_048_576)
        record(&perKey, wire, (Double(after) - Double(before)) / Double(keys))
    }
    return [loaded, perKey, empty]
}

private func machineContext(_ options: ComparisonOptions) -> [String: String] {
    var context: [String: String] = [:]
    let formatter = ISO8601DateFormatter()
    context["date"] = formatter.string(from: Date())
    context["cores"] = String(ProcessInfo.processInfo.activeProcessorCount)
    if let cpuinfo = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
       let model = cpuinfo.split(separator: "\n").first(where: { $0.hasPrefix("model name") }) {
        context["cpu"] = model.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
    }
    context["memory"] = "\(ProcessInfo.processInfo.physicalMemory / 1_073_741_824) GiB"
    context["obsd"] = options.obsdPath
    context["client"] = options.externalClient.map { "obsload (\($0))" } ?? "obsbench"
    context["pinned"] = options.clientCore.map { "client on CPU \($0), servers on CPU \(options.serverCore ?? 0) (taskset)" } ?? "no"
    context["redis"] = commandOutput("/bin/sh", ["-c", "redis-server --version"])
    context["kernel"] = commandOutput("/bin/uname", ["-r"])
    return context
}

private func commandOutput(_ executable: String, _ arguments: [String]) -> String? {
    (try? processOutput(executable, arguments))?.trimmingCharacters(in: .whitespacesAndNewlines)
}
