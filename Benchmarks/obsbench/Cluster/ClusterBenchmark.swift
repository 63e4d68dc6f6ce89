// `obsbench cluster`: write-to-watcher latency and write throughput against a 3-member etcd
// cluster on loopback that it starts itself (Debian's etcd binaries, etcd's default heartbeat and
// election timeout, data on disk unless --tmpfs), for raw etcd: EtcdClient's put seen by
// EtcdClient's watch on another member, and puts at 1 and 16 in flight. obsd's own column (a write
// on host A seen by a watcher on host B) is measured by the same functions (ClusterHarness.swift),
// against the same cluster, in the same run.
//
// Usage: obsbench cluster [--samples N] [--seconds S] [--tmpfs] [--obsd PATH]
import EtcdClient
import EtcdTestCluster
import Foundation

private struct ClusterOptions {
    var samples = 1000
    var seconds = 3.0
    var tmpfs = false
    var obsdPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("obsd").path
    let inFlight = [1, 16]

    init(_ arguments: ArraySlice<String>) throws(BenchError) {
        var remaining = arguments
        while let flag = remaining.popFirst() {
            if flag == "--tmpfs" {
                tmpfs = true
                continue
            }
            guard let value = remaining.popFirst() else { throw BenchError("\(flag) needs a value") }
            switch flag {
            case "--samples": samples = max(10, Int(value) ?? samples)
            case "--seconds": seconds = max(0.5, Double(value) ?? seconds)
            case "--obsd": obsdPath = value
            default: throw BenchError("unknown option \(flag)")
            }
        }
    }
}

/// A 3-member cluster with etcd's default Raft timings (100 ms heartbeat, 1 s election), data in
/// the system's temporary directory (on disk, fsynced as in a deployment) or on tmpfs.
func startBenchmarkCluster(tmpfs: Bool) throws(BenchError) -> EtcdCluster {
    var options = EtcdCluster.Options()
    options.dataOnTmpfs = tmpfs
    do {
        return try EtcdCluster(options)
    } catch {
        throw BenchError("cannot start the etcd cluster: \(error)")
    }
}

func runClusterBenchmark() {
    do throws(BenchError) {
        let options = try ClusterOptions(CommandLine.arguments.dropFirst(2))
        let cluster = try startBenchmarkCluster(tmpfs: options.tmpfs)
        defer { cluster.shutDown() }
        let version = (try? cluster.etcdctl(["version"]))?.split(separator: "\n").first.map(String.init) ?? "?"
        print("## obsbench cluster: a 3-member etcd cluster on loopback")
        print()
        print("- \(version); data in \(cluster.directory) (\(options.tmpfs ? "tmpfs" : "disk"))")
        print("- cores: \(ProcessInfo.processInfo.activeProcessorCount); latency: \(options.samples) writes one at a time; "
            + "throughput: \(options.seconds) s per row")
        print("- load average at the start: \(loadAverages())")
        print()
        let raw = try measureRawEtcd(cluster, options)
        let obsd = try measureObsd(cluster, obsdPath: options.obsdPath, samples: options.samples, seconds: options.seconds,
                                   inFlight: options.inFlight)
        printClusterTable([raw, obsd], inFlight: options.inFlight)
        print()
        printCPUPerWrite([raw, obsd], inFlight: options.inFlight)
        print("- load average at the end: \(loadAverages())")
        print()
    } catch {
        FileHandle.standardError.write(Data("obsbench cluster: \(error)\n".utf8))
        check(false, "cluster benchmark: \(error)")
    }
}

private func measureRawEtcd(_ cluster: EtcdCluster, _ options: ClusterOptions) throws(BenchError) -> ClusterColumn {
    let raw = try RawEtcd(endpoints: cluster.endpoints, prefix: "/bench/raw/")
    var column = ClusterColumn(name: "raw etcd")
    column.latencies = try measureLatency(samples: options.samples,
                                          write: { (index: Int) throws(BenchError) in raw.write(index) },
                                          awaitSeen: { (index: Int) throws(BenchError) in try raw.awaitSeen(index) })
    let parts = CPUParts(parts: [("etcd", cluster.members.compactMap(\.processIdentifier)), ("obsbench", [getpid()])])
    for depth in options.inFlight {
        try measureThroughput(into: &column, seconds: options.seconds, inFlight: depth, parts: parts,
                              send: { (index: Int) throws(BenchError) in raw.send(index) },
                              awaitAcknowledged: { () throws(BenchError) -> Int in try raw.awaitAcknowledged() })
        raw.drainWatcher()
    }
    return column
}
