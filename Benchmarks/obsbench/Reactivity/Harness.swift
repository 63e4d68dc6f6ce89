import Foundation
import ObsCore

/// Counts runs of computeds or observers. The closures handed to the engine are `@Sendable`, so the
/// counter is a class; it is unchecked because the benchmark drives the engine from one thread and
/// the engine runs computeds and observers one at a time.
final class Counter: @unchecked Sendable {
    /// The suite's own `callCounter.count`, which its cases reset and assert on.
    var count = 0
    /// Runs over a whole timed run, for the table; only the harness resets it.
    var total = 0

    @inline(__always)
    func increment() {
        count += 1
        total += 1
    }

    func reset() {
        count = 0
        total = 0
    }
}

/// A node that a computed can read: the suite types its head signal as a `Computed<number>` and
/// builds chains and rows over both kinds.
///
/// It refers to its node unowned, read in place (`Unmanaged`): a JavaScript program's references
/// cost nothing to hand around, while a Swift enum or array of class references is retained and
/// released around every element a loop takes out of it (in the dynamic graphs, a quarter of the
/// instructions: the benchmark's, not the engine's). The graph that made the node keeps it alive
/// (`NodeOwner`), as the suite's graphs keep theirs for the garbage collector.
enum Readable<Value: Sendable & Equatable>: @unchecked Sendable {
    case signal(Unmanaged<Observable<Value>>)
    case computed(Unmanaged<Computed<Value>>)

    init(_ signal: Observable<Value>, keptBy owner: NodeOwner) {
        owner.keep(signal)
        self = .signal(.passUnretained(signal))
    }

    init(_ computed: Computed<Value>, keptBy owner: NodeOwner) {
        owner.keep(computed)
        self = .computed(.passUnretained(computed))
    }

    @inline(__always)
    var value: Value {
        switch self {
        case .signal(let signal): signal._withUnsafeGuaranteedRef { $0.value }
        case .computed(let computed): computed._withUnsafeGuaranteedRef { $0.value }
        }
    }
}

/// Keeps the nodes of one benchmark graph alive for as long as the graph is used (`Readable`
/// does not).
final class NodeOwner: @unchecked Sendable {
    private var nodes: [AnyObject] = []

    func keep(_ node: AnyObject) { nodes.append(node) }
}

/// Wall time of `body` in milliseconds.
func milliseconds(_ body: () -> Void) -> Double {
    let elapsed = ContinuousClock().measure(body)
    let (seconds, attoseconds) = elapsed.components
    return Double(seconds) * 1e3 + Double(attoseconds) / 1e15
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// The `p` quantile (0...1) of `samples` (the sample at rank count * p), NaN when there are none.
func quantile(_ samples: [Double], _ p: Double) -> Double {
    let sorted = samples.sorted()
    return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// alien-signals' figure for a case on a machine like ours, the yardstick of the ratio column.
enum Reference {
    case nanosecondsPerNodeRun(Double)
    case milliseconds(Double)
}

/// One line of the table.
struct CaseResult {
    var name: String
    /// One entry per timed run, after warm-up.
    var times: [Double]
    /// Node runs the suite's shape asks for in one timed run, where a per-node figure makes sense.
    var nodeRunsPerRun: Int? = nil
    var reference: Reference? = nil
    /// Computed evaluations and observer (effect) runs in one timed run, as counted.
    var computedRuns: Int
    var effectRuns: Int
    var failed: Bool

    var nanosecondsPerNodeRun: Double? {
        nodeRunsPerRun.map { median(times) * 1e6 / Double($0) }
    }

    var ratio: Double? {
        switch reference {
        case .nanosecondsPerNodeRun(let ns): nanosecondsPerNodeRun.map { $0 / ns }
        case .milliseconds(let ms): median(times) / ms
        case nil: nil
        }
    }
}

/// Prints the table one row at a time, so that the rows of finished cases stay on screen even if a
/// later case crashes.
struct ResultTable {
    private static let columns: [(title: String, width: Int)] = [
        ("case", 46), ("runs", 4), ("median ms", 10), ("min ms", 10), ("ns/node", 8),
        ("alien-signals", 14), ("ratio", 6), ("computed runs", 13), ("effect runs", 11), ("status", 6),
    ]

    func printHeader() {
        printRow(Self.columns.map(\.title))
        printRow(Self.columns.map { String(repeating: "-", count: $0.width) })
    }

    func printRow(_ result: CaseResult) {
        let reference: String
        switch result.reference {
        case .nanosecondsPerNodeRun(let ns): reference = "\(format(ns, digits: 0)) ns/node"
        case .milliseconds(let ms): reference = "\(format(ms, digits: 0)) ms"
        case nil: reference = "-"
        }
        printRow([
            result.name,
            "\(result.times.count)",
            format(median(result.times), digits: 2),
            format(result.times.min() ?? 0, digits: 2),
            result.nanosecondsPerNodeRun.map { format($0, digits: 1) } ?? "-",
            reference,
            result.ratio.map { format($0, digits: 2) + "x" } ?? "-",
            "\(result.computedRuns)",
            "\(result.effectRuns)",
            result.failed ? "FAILED" : "ok",
        ])
    }

    private func printRow(_ cells: [String]) {
        var line = ""
        for (cell, column) in zip(cells, Self.columns) {
            let padding = String(repeating: " ", count: max(0, column.width - cell.count))
            // The first column reads best left-aligned, the numbers right-aligned.
            line += column.title == "case" ? cell + padding : padding + cell
            line += " | "
        }
        print(line.dropLast(3))
    }

    private func format(_ value: Double, digits: Int) -> String {
        String(format: "%.\(digits)f", value)
    }
}

/// Case filters from the command line: `obsbench reactivity deep cellx1000` runs only the cases
/// whose names contain one of the words; none given runs every case.
let caseFilters = Array(CommandLine.arguments.dropFirst(2))

func isWanted(_ caseName: String) -> Bool {
    caseFilters.isEmpty || caseFilters.contains { caseName.contains($0) }
}
