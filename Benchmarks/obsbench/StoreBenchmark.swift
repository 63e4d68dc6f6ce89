// The "store" section: in-process writes through the Store (no JSON parsing of requests), in ns per
// committed transaction. Every set changes the value, so each commits a revision, evaluates what
// depends on it and encodes and queues the events of every watcher (to outputs that drop them).
import Foundation
import ObsCore

/// An output that counts what it is given and sends nothing.
private final class NullOutput: SessionOutput {
    var lines = 0
    var pendingBytes: Int { 0 }
    func write(_ line: EncodedLine) { lines += 1 }
}

private func makeStore() -> Store {
    var configuration = StoreConfiguration()
    configuration.maxWatchesPerConnection = 100_000
    return try! Store(configuration: configuration, storage: MemoryStorage(), clock: SystemClock())
}

/// Median ns per operation over `runs` runs of `iterations` calls of `body`.
private func nsPerOp(runs: Int = 5, iterations: Int, _ body: (Int) -> Void) -> Double {
    var samples: [Double] = []
    var counter = 0
    for _ in 0..<runs {
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<iterations {
            body(counter)
            counter += 1
        }
        samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / Double(iterations))
    }
    return samples.sorted()[runs / 2]
}

private func row(_ name: String, _ ns: Double) {
    print("| \(name) | \(String(format: "%.0f", ns)) | \(String(format: "%.0f", 1e9 / ns)) |")
}

func runStoreBenchmark() {
    print("## obsbench store: median of 5 runs, one committed transaction per operation")
    print()
    print("| case | ns/op | ops/s |")
    print("|---|---:|---:|")

    let single = makeStore()
    row("set, store of 1 key", nsPerOp(iterations: 200_000) { try! single.setValue(.int(Int64($0)), forKey: "k") })

    let tenKeys = makeStore()
    for i in 0..<10 { try! tenKeys.setValue(0, forKey: "key.\(i)") }
    row("set, store of 10 keys", nsPerOp(iterations: 200_000) { try! tenKeys.setValue(.int(Int64($0)), forKey: "key.\($0 % 10)") })

    let large = makeStore()
    let populateStart = DispatchTime.now().uptimeNanoseconds
    for i in 0..<1_000_000 { try! large.setValue(.int(Int64(i)), forKey: "key.\(i)") }
    let populate = Double(DispatchTime.now().uptimeNanoseconds - populateStart) / 1e6
    check(large.count == 1_000_000, "store holds a million keys")
    row("set, store of 1,000,000 keys", nsPerOp(iterations: 200_000) { i in
        try! large.setValue(.int(Int64(i) &+ 7), forKey: "key.\((i &* 7919) % 1_000_000)")
    })
    _ = populate

    for watchers in [1, 100, 10_000] {
        let store = makeStore()
        var outputs: [NullOutput] = []
        var sessions: [Session] = []
        for w in 0..<watchers {
            let output = NullOutput()
            let session = Session(store: store, access: .read, output: output)
            session.receive(w % 2 == 0 ? #"{"op":"watch","keys":["room.temp"],"initial":false}"# : #"{"op":"watch","keys":["room.*"],"initial":false}"#)
            outputs.append(output)
            sessions.append(session)
        }
        let iterations = max(200, 200_000 / watchers)
        let ns = nsPerOp(iterations: iterations) { try! store.setValue(.int(Int64($0)), forKey: "room.temp") }
        let delivered = outputs.reduce(0) { $0 + $1.lines }
        check(delivered >= watchers * iterations, "every watcher got every event")
        row("set fanning out to \(watchers) watcher\(watchers == 1 ? "" : "s")", ns)
        withExtendedLifetime(sessions) {}
    }

    let chain = makeStore()
    try! chain.setValue(0, forKey: "src")
    try! chain.defineComputed("c1", expression: "$src + 1")
    for i in 2...50 { try! chain.defineComputed("c\(i)", expression: "$c\(i - 1) + 1") }
    row("set through a 50-deep computed chain", nsPerOp(iterations: 20_000) { try! chain.setValue(.int(Int64($0)), forKey: "src") })
    check(chain.value(forKey: "c50") == .int(chain.value(forKey: "src")!.intValue! + 50), "chain is up to date")

    let fan = makeStore()
    try! fan.setValue(0, forKey: "src")
    for i in 0..<1000 { try! fan.defineComputed("f\(i)", expression: "$src + \(i)") }
    row("set through a 1,000-wide fan of computeds", nsPerOp(iterations: 1_000) { try! fan.setValue(.int(Int64($0)), forKey: "src") })
    check(fan.value(forKey: "f999") == .int(fan.value(forKey: "src")!.intValue! + 999), "fan is up to date")

    let parsed = makeStore()
    let output = NullOutput()
    let session = Session(store: parsed, access: .write, output: output)
    let lines = (0..<1000).map { #"{"id":\#($0),"op":"set","key":"k","value":\#($0)}"# + "\n" }
    row("set request line through a Session (parse, commit, respond)", nsPerOp(iterations: 100_000) { session.receive(lines[$0 % 1000]) })
    print()
    print("(populating the million-key store: \(String(format: "%.0f", populate)) ms)")
    print()
}
