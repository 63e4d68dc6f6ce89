// obsbench: ObsCore's benchmark program. Run it from a release build:
//   swift build -c release --product obsbench && .build/release/obsbench [SECTION [OPTIONS]]
// With no argument every section runs. It exits non-zero if any check inside a benchmark failed.
import Foundation

let sections: [(name: String, run: () -> Void)] = [
    ("reactivity", runReactivityBenchmarks),
    ("json", runJSONBenchmark),
    ("alloc", runAllocationProbe),
    ("cellx-scaling", Cellx.runScaling),
    ("memory", runNodeMemoryBenchmark),
    ("store", runStoreBenchmark),
    ("checkpoint", runCheckpointBenchmark),
    ("redis", runRedisComparison),
    ("cluster", runClusterBenchmark),
]

let requested = CommandLine.arguments.dropFirst().first
if let requested, !sections.contains(where: { $0.name == requested }) {
    let names = sections.map(\.name).joined(separator: ", ")
    FileHandle.standardError.write(Data("obsbench: unknown section '\(requested)' (sections: \(names))\n".utf8))
    exit(64)
}
// `alloc` is a probe for Benchmarks/allocations.sh, not a benchmark, `cellx-scaling` a study of
// cellx beyond the suite's sizes, `checkpoint` writes databases to the temporary directory, and
// `redis` and `cluster` start servers (redis-server; an etcd cluster) and take minutes: they run
// only when named.
let onlyWhenNamed: Set = ["alloc", "cellx-scaling", "checkpoint", "redis", "cluster"]
for section in sections where requested == section.name || (requested == nil && !onlyWhenNamed.contains(section.name)) {
    section.run()
}
exit(failedCheckCount() == 0 ? 0 : 1)
