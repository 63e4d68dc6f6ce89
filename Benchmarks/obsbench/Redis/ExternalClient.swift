// The rows driven by obsload, the C load generator (Benchmarks/loadgen/obsload.c), instead of this
// program's own client: the same requests, windows and pacing, from a client whose own cost is
// small, so that a row does not measure the Swift client. The servers are this program's.
import Foundation

/// Runs `obsload requests` against `server`: 50 clients with `depth` in flight.
func externalRequests(_ client: String, _ server: ServerProcess, operation: String, depth: Int,
                      seconds: Double) throws(BenchError) -> LoadResult {
    let output = try runClient(client, ["requests", "--socket", server.socketPath, "--proto", server.wire.rawValue, "--op", operation,
                                        "--clients", "50", "--depth", String(depth), "--seconds", String(seconds),
                                        "--pid", String(server.pid)])
    guard let line = output.first, let rate = line["ops_per_s"], let cpu = line["server_cpu"] else {
        throw BenchError("obsload printed no result")
    }
    return LoadResult(opsPerSecond: rate, serverCPU: cpu)
}

/// Runs `obsload fanout` against `servers` (one or two): the shape set up once on each, then `runs`
/// runs, each measuring the servers in turns of `block` seconds. The figures of each run, by server.
func externalFanout(_ client: String, _ servers: [ServerProcess], shape: String, watchers: Int, seconds: Double,
                    block: Double, runs: Int) throws(BenchError) -> [[(rate: Double, p50: Double, p99: Double)]] {
    var arguments = ["fanout", "--socket", servers[0].socketPath, "--proto", servers[0].wire.rawValue]
    if servers.count > 1 { arguments += ["--socket2", servers[1].socketPath, "--proto2", servers[1].wire.rawValue] }
    arguments += ["--shape", shape, "--watchers", String(watchers), "--seconds", String(seconds), "--block", String(block),
                  "--runs", String(runs)]
    let lines = try runClient(client, arguments)
    guard lines.count == runs * servers.count else { throw BenchError("obsload printed \(lines.count) results, not \(runs * servers.count)") }
    return try stride(from: 0, to: lines.count, by: servers.count).map { first throws(BenchError) in
        try lines[first..<first + servers.count].map { line throws(BenchError) in
            guard let rate = line["deliveries_per_s"], let p50 = line["p50_ms"], let p99 = line["p99_ms"] else {
                throw BenchError("obsload printed an incomplete result")
            }
            return (rate, p50, p99)
        }
    }
}

/// Runs obsload and reads its `name=value` lines.
private func runClient(_ path: String, _ arguments: [String]) throws(BenchError) -> [[String: Double]] {
    try processOutput(path, arguments).split(separator: "\n").map { line in
        var fields: [String: Double] = [:]
        for pair in line.split(separator: " ") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, let value = Double(parts[1]) { fields[String(parts[0])] = value }
        }
        return fields
    }
}

/// Pins this process (every thread, and the programs it starts) to one CPU, with taskset.
/// Whether it is: false without taskset, or for a CPU the machine does not have.
@discardableResult
func pinThisProcess(to core: Int) -> Bool {
    guard let taskset = ServerProcess.which("taskset") else { return false }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: taskset)
    process.arguments = ["-a", "-p", "-c", String(core), String(getpid())]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
}
