// The "checkpoint" section: what the database's commit log costs when it is folded into the tables
// (SQLiteStorage+Log.swift). A log filled to its bound with groups of 16 plain sets, over a few
// keys or each set a new key; then the time of the checkpoint (in `normal` mode the loop thread's
// stall, in `strict` the writer's), and of a load that must replay a full log (a start after a
// crash). In a temporary directory, on whatever disk holds it.
import Foundation
import ObsCore

func runCheckpointBenchmark() {
    print("## obsbench checkpoint: a log of \(SQLiteStorage.defaultLogBound >> 20) MiB, groups of 16 sets")
    print()
    print("| keys the log changes | records | load with the full log ms | checkpoint ms (CPU ms) | load after ms |")
    print("|---:|---:|---:|---:|---:|")
    for keys in [1_000, 10_000, 100_000, 0] {
        let directory = NSTemporaryDirectory() + "obsbench-checkpoint-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/obsd.db"
        let storage = try! SQLiteStorage(path: path, logBound: .max)
        var group = ByteBuffer()
        var rev: UInt64 = 0
        let value = Array(#""a value of 24 bytes...""#.utf8)
        while storage.logBytes < SQLiteStorage.defaultLogBound {
            group.removeAll(keepingCapacityUpTo: 1 << 16)
            for _ in 0..<16 {
                rev += 1
                let name = Array("k.\(keys == 0 ? rev : rev % UInt64(keys))".utf8)
                name.withUnsafeBytes { name in
                    value.withUnsafeBytes { value in
                        CommitLog.appendKey(name: name, value: value, rev: rev, createdRev: 1, version: rev, to: &group)
                    }
                }
            }
            try! storage.commitLog(group.bytes, rev: rev)
        }
        let loadFull = milliseconds { check((try? storage.load())?.rev == rev, "the log loads") }
        let cpuBefore = cpuMilliseconds()
        let checkpoint = milliseconds { try! storage.checkpoint() }
        let checkpointCPU = cpuMilliseconds() - cpuBefore
        let loadAfter = milliseconds { check((try? storage.load())?.rev == rev, "the tables load") }
        storage.close()
        let label = keys == 0 ? "every set a new key" : "\(keys)"
        print("| \(label) | \(rev) | \(format(loadFull)) | \(format(checkpoint)) (\(format(checkpointCPU))) | \(format(loadAfter)) |")
    }
    print()
}

/// The process's CPU time (the benchmark runs on one thread): what the load of a shared machine
/// moves least.
private func cpuMilliseconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) * 1e3 + Double(time.tv_nsec) / 1e6
}

private func format(_ value: Double) -> String { String(format: "%.0f", value) }
