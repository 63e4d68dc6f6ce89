// `obsbench cluster`: write-to-watcher latency and write throughput against a 3-member etcd
// cluster on loopback that it starts itself (Debian's etcd binaries, etcd's default heartbeat and
// election timeout, data on disk unless --tmpfs), for raw etcd: EtcdClient's put seen by
// EtcdClient's watch on another member, and puts at 1 and 16 in flight. Raw etcd is measured
// twice by default, as two columns: with that one watch, the comparison cluster mode's goal is
// stated against, and with the writer's client watching the prefix too, as every obsd host does
// (`--raw-watches 1` or `2` measures one of them). obsd's own column (a write on host A seen by a
// watcher on host B) is measured by the same functions (ClusterHarness.swift), against the same
// cluster, in the same run, each row of each system in turn, round after round, and given as a
// ratio to each raw column.
//
// Both columns speak etcd's gRPC API (what etcd's own clients speak), or with `--api json` both
// its JSON gateway.
//
// On a machine with two or more cores, etcd's three members run on one CPU and everything else
// (this program, so raw etcd's clients, and obsd's hosts) on another, as `obsbench redis` pins
// the load generator and the server: each column's clients then get the same CPU, and etcd the
// same in both columns, as when etcd runs on machines of its own. `--pin none` lets every process
// run anywhere, so that whatever the hosts spend is taken from etcd's members.
//
// Which member leads decides much of a write's path (a put sent to a member that does not lead is
// forwarded to the leader, and answered once that member applied it), and etcd elects whichever
// member first calls an election: the run prints the leader at its start and end, and `--leader N`
// hands the leadership to member N before measuring. The writers' first endpoint is member 1, the
// watchers' member 2.
//
// Usage: obsbench cluster [--samples N] [--seconds S] [--rounds R] [--raw-watches 1|2|1,2] [--in-flight 1,16]
//                         [--leader 1|2|3] [--api grpc|json] [--tmpfs] [--etcd-metrics] [--obsd PATH]
//                         [--pin CLIENTS,ETCD|none]
import EtcdClient
import EtcdTestCluster
import Foundation

private struct ClusterOptions {
    var samples = 1002
    var seconds = 3.0
    var rounds = 3
    /// Raw etcd's columns, by the watches of the prefix each has: 1, on the watcher's host only, or
    /// 2, one on each host as obsd's hosts have (RawEtcd.swift).
    var rawWatches = [1, 2]
    /// The API both columns speak to etcd.
    var api = EtcdAPI.grpc
    var tmpfs = false
    /// The member made leader before measuring (0-based), or nil: whichever etcd elected.
    var leader: Int?
    /// Read etcd's counters around each throughput row and print them per write (EtcdMetrics.swift).
    var etcdMetrics = false
    var obsdPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("obsd").path
    /// The throughput rows, by the writes each keeps under way.
    var inFlight = [1, 16]
    /// The CPU of this program and obsd's hosts, and the CPU of etcd's members (nil: anywhere).
    var clientCore: Int? = ProcessInfo.processInfo.activeProcessorCount >= 2 ? 0 : nil
    var etcdCore: Int? = ProcessInfo.processInfo.activeProcessorCount >= 2 ? 1 : nil

    init(_ arguments: ArraySlice<String>) throws(BenchError) {
        var remaining = arguments
        while let flag = remaining.popFirst() {
            switch flag {
            case "--tmpfs":
                tmpfs = true
                continue
            case "--etcd-metrics":
                etcdMetrics = true
                continue
            default:
                break
            }
            guard let value = remaining.popFirst() else { throw BenchError("\(flag) needs a value") }
            switch flag {
            case "--samples": samples = max(10, Int(value) ?? samples)
            case "--seconds": seconds = max(0.5, Double(value) ?? seconds)
            case "--rounds": rounds = max(1, Int(value) ?? rounds)
            case "--raw-watches":
                let counts = value.split(separator: ",").compactMap { Int($0) }
                guard !counts.isEmpty, counts.allSatisfy({ $0 == 1 || $0 == 2 }), Set(counts).count == counts.count else {
                    throw BenchError("--raw-watches takes 1, 2 or 1,2")
                }
                rawWatches = counts
            case "--in-flight":
                let pieces = value.split(separator: ",", omittingEmptySubsequences: false)
                let depths = pieces.compactMap { Int($0) }
                guard !depths.isEmpty, depths.count == pieces.count, depths.allSatisfy({ $0 >= 1 && $0 <= 256 }),
                      Set(depths).count == depths.count else { throw BenchError("--in-flight takes counts from 1 to 256, such as 1,16") }
                inFlight = depths
            case "--leader":
                guard let member = Int(value), (1...3).contains(member) else { throw BenchError("--leader is 1, 2 or 3") }
                leader = member - 1
            case "--obsd": obsdPath = value
            case "--pin":
                let cores = value.split(separator: ",").compactMap { Int($0) }
                guard value == "none" || cores.count == 2 else { throw BenchError("--pin takes CLIENTS,ETCD or none") }
                clientCore = cores.first
                etcdCore = cores.last
            case "--api":
                guard let chosen = EtcdAPI(rawValue: value) else { throw BenchError("--api is grpc or json") }
                api = chosen
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

/// The member that leads ("m1" ...), or why none is known.
private func leaderName(_ cluster: EtcdCluster) -> String {
    switch Result(catching: { try cluster.leader() }) {
    case .success(let index?): cluster.members[index].name
    case .success(nil): "none"
    case .failure(let error): "unknown (\(error))"
    }
}

/// The name of raw etcd's column with `watches` watches of the prefix.
private func rawName(_ watches: Int) -> String { watches == 1 ? "raw etcd, 1 watch" : "raw etcd, \(watches) watches" }

func runClusterBenchmark() {
    do throws(BenchError) {
        let options = try ClusterOptions(CommandLine.arguments.dropFirst(2))
        // The members inherit this program's CPU when they start (so Go sizes its scheduler to
        // one core), then this program moves to the other, where the hosts it starts inherit it.
        var pinned = options.etcdCore.map { pinThisProcess(to: $0) } ?? false
        let cluster = try startBenchmarkCluster(tmpfs: options.tmpfs)
        defer { cluster.shutDown() }
        if pinned, let core = options.clientCore { pinned = pinThisProcess(to: core) }
        if let leader = options.leader {
            do {
                try cluster.moveLeader(to: leader)
            } catch {
                throw BenchError("cannot make member \(leader + 1) the leader: \(error)")
            }
        }
        let leaderAtStart = leaderName(cluster)
        let version = (try? cluster.etcdctl(["version"]))?.split(separator: "\n").first.map(String.init) ?? "?"
        print("## obsbench cluster: a 3-member etcd cluster on loopback")
        print()
        print("- \(version); data in \(cluster.directory) (\(options.tmpfs ? "tmpfs" : "disk"))")
        print("- cores: \(ProcessInfo.processInfo.activeProcessorCount); \(options.rounds) rounds, each row of raw etcd then "
            + "of obsd; latency: \(options.samples) writes one at a time in all; throughput: \(options.seconds) s per row "
            + "and round (the median round's figures)")
        for watches in options.rawWatches {
            print("- \(rawName(watches)): " + (watches == 2 ? "the writer's host and the watcher's each watch the prefix, as obsd's hosts do"
                : "only the watcher's host watches the prefix (the comparison the goal is stated against)"))
        }
        print("- both columns speak etcd's \(options.api == .grpc ? "gRPC API (HTTP/2)" : "JSON gateway (HTTP/1.1)") (--api \(options.api.rawValue))")
        print("- pinned: " + (options.clientCore == nil ? "no (--pin none)"
            : pinned ? "etcd's members on CPU \(options.etcdCore ?? 1), this program and obsd's hosts on CPU \(options.clientCore ?? 0) (taskset; --pin none: anywhere)"
            : "no: taskset could not pin to CPUs \(options.clientCore ?? 0) and \(options.etcdCore ?? 1)"))
        print("- etcd's leader at the start: \(leaderAtStart)" + (options.leader == nil ? " (as elected; --leader N chooses)" : " (--leader)"))
        print("- load average at the start: \(loadAverages())")
        print()
        let etcdPIDs = cluster.members.compactMap(\.processIdentifier)
        // Each raw column has a prefix of its own, so that one's watches never see the other's puts.
        var systems: [any MeasuredSystem] = []
        for watches in options.rawWatches {
            systems.append(try RawEtcd(name: rawName(watches), endpoints: cluster.endpoints, prefix: "/bench/raw\(watches)/",
                                       parts: CPUParts(parts: [("etcd", etcdPIDs), ("obsbench", [getpid()])]), watches: watches, api: options.api))
        }
        systems.append(try ObsdSystem(cluster, obsdPath: options.obsdPath, api: options.api.rawValue))
        let columns: [ClusterColumn]
        do throws(BenchError) {
            columns = try measureAlternately(systems, rounds: options.rounds, samples: options.samples,
                                             seconds: options.seconds, inFlight: options.inFlight,
                                             metrics: options.etcdMetrics ? EtcdMetrics(urls: cluster.members.map(\.clientURL), pids: etcdPIDs) : nil)
        } catch {
            // What etcd said meanwhile (its warnings: slow disk, a lost leader) tells a stall of
            // etcd's from one of the client's.
            for member in cluster.members {
                let lines = member.log.split(separator: "\n").suffix(20)
                FileHandle.standardError.write(Data("\(member.name)'s log, last \(lines.count) lines:\n\(lines.joined(separator: "\n"))\n".utf8))
            }
            throw error
        }
        printClusterTable(columns, baselines: options.rawWatches.count, inFlight: options.inFlight)
        print()
        printCPUPerWrite(columns, inFlight: options.inFlight)
        if options.etcdMetrics {
            print()
            printCountersPerWrite(columns, inFlight: options.inFlight)
            print()
        }
        print("- etcd's leader at the end: \(leaderName(cluster))")
        print("- load average at the end: \(loadAverages())")
        print()
    } catch {
        FileHandle.standardError.write(Data("obsbench cluster: \(error)\n".utf8))
        check(false, "cluster benchmark: \(error)")
    }
}
