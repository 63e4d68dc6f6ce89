/// kairoBench (src/benches/kairoBench.ts): each case is built once, untimed; its `iter` runs twice,
/// then once more (the suite yields a tick in between), and then a timed run calls it 1000 times.
/// The suite keeps the fastest of 5 timed runs; the table shows their median and their minimum.
enum Kairo {
    private static let iterationsPerRun = 1000
    private static let timedRuns = 5

    private struct Case {
        let name: String
        let build: () -> KairoGraph
        var nodeRunsPerIteration: Int? = nil
        var reference: Reference? = nil
    }

    private static var cases: [Case] {
        [
            Case(name: "avoidablePropagation", build: avoidablePropagation),
            Case(name: "broadPropagation", build: broadPropagation),
            // 51 writes per iter, each rerunning the 50 links of the chain.
            Case(name: "deepPropagation", build: deepPropagation,
                 nodeRunsPerIteration: 51 * 50, reference: .nanosecondsPerNodeRun(26)),
            // 501 writes per iter, each rerunning the 5 sides and the sum.
            Case(name: "diamond", build: diamond,
                 nodeRunsPerIteration: 501 * 6, reference: .nanosecondsPerNodeRun(44)),
            Case(name: "mux", build: mux),
            Case(name: "repeatedObservers", build: repeatedObservers),
            Case(name: "triangle", build: triangle),
            Case(name: "unstable", build: unstable),
        ]
    }

    static func run(_ table: ResultTable) {
        for kairoCase in cases where isWanted("kairo \(kairoCase.name)") {
            let failuresBefore = failedCheckCount()
            let graph = kairoCase.build()
            graph.iteration()
            graph.iteration()
            graph.iteration()
            var times: [Double] = []
            // The observers must outlive the timed runs: ARC may release a value after its last use.
            withExtendedLifetime(graph.tokens) {
                for _ in 0..<timedRuns {
                    graph.computedRuns.reset()
                    graph.effectRuns.reset()
                    times.append(milliseconds {
                        for _ in 0..<iterationsPerRun {
                            graph.iteration()
                        }
                    })
                }
            }
            table.printRow(CaseResult(
                name: "kairo \(kairoCase.name)",
                times: times,
                nodeRunsPerRun: kairoCase.nodeRunsPerIteration.map { $0 * iterationsPerRun },
                reference: kairoCase.reference,
                computedRuns: graph.computedRuns.total,
                effectRuns: graph.effectRuns.total,
                failed: failedCheckCount() > failuresBefore))
        }
    }
}
