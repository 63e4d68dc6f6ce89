import ObsCore

/// The dynamic-graph benchmark (src/benches/reactively/dynamicBench.ts and dependencyGraph.ts,
/// from Milo's reactively): a rectangular graph of `width` signals and `totalLayers - 1` rows of
/// computeds, each reading `nSources` nodes of the row above, some of them dynamically dropping one
/// source. Every iteration writes one signal in its own batch and reads some or all of the leaves.
/// Values are Doubles as in JavaScript, so the suite's expected sums hold to the last bit.
enum DynamicGraphBench {
    /// The suite's `testRepeats`; the warm-up is its three untimed runs.
    private static let timedRuns = 5
    private static let warmUpRuns = 3

    struct Config {
        let name: String
        let width: Int
        let totalLayers: Int
        let staticFraction: Double
        let nSources: Int
        let readFraction: Double
        let iterations: Int
        let expectedSum: Double
        let expectedCount: Int

        /// The suite's `makeTitle`, e.g. "2-10x5 - lazy80%".
        var title: String {
            func percent(_ n: Double) -> String { "\(Int((n * 100).rounded()))%" }
            let dynamic = staticFraction < 1 ? " - dyn" + percent(1 - staticFraction) : ""
            let lazy = readFraction < 1 ? " - lazy" + percent(1 - readFraction) : ""
            return "\(nSources)-\(width)x\(totalLayers)\(dynamic)\(lazy)"
        }
    }

    /// `perfTests` of the suite's config.ts.
    fileprivate static var configs: [Config] {
        [
            Config(name: "simple component", width: 10, totalLayers: 5, staticFraction: 1, nSources: 2,
                   readFraction: 0.2, iterations: 600_000, expectedSum: 19_199_968, expectedCount: 3_480_000),
            Config(name: "dynamic component", width: 10, totalLayers: 10, staticFraction: 3.0 / 4, nSources: 6,
                   readFraction: 0.2, iterations: 15_000, expectedSum: 302_310_782_860, expectedCount: 1_155_000),
            Config(name: "large web app", width: 1000, totalLayers: 12, staticFraction: 0.95, nSources: 4,
                   readFraction: 1, iterations: 7000, expectedSum: 29_355_933_696_000, expectedCount: 1_463_000),
            Config(name: "wide dense", width: 1000, totalLayers: 5, staticFraction: 1, nSources: 25,
                   readFraction: 1, iterations: 3000, expectedSum: 1_171_484_375_000, expectedCount: 732_000),
            Config(name: "deep", width: 5, totalLayers: 500, staticFraction: 1, nSources: 3,
                   readFraction: 1, iterations: 500, expectedSum: 3.0239642676898464e241, expectedCount: 1_246_500),
            Config(name: "very dynamic", width: 100, totalLayers: 15, staticFraction: 0.5, nSources: 6,
                   readFraction: 1, iterations: 2000, expectedSum: 15_664_996_402_790_400, expectedCount: 1_078_000),
        ]
    }

    static func run(_ table: ResultTable) {
        for config in configs where isWanted(config.name) {
            let failuresBefore = failedCheckCount()
            let graph = DynamicGraph(config)
            var times: [Double] = []
            // The observer and the nodes must outlive the runs: ARC may release a value after its
            // last use.
            withExtendedLifetime((graph.effect, graph.nodes)) {
                for _ in 0..<warmUpRuns {
                    _ = graph.run(iterations: config.iterations)
                }
                for _ in 0..<timedRuns {
                    graph.counter.reset()
                    graph.effectRuns.reset()
                    var sum = 0.0
                    times.append(milliseconds { sum = graph.run(iterations: config.iterations) })
                    // verifyBenchResult; the suite checks counts for alien-signals, whose
                    // `testPullCounts` is set, and so for every configuration.
                    check(sum == config.expectedSum,
                          "dynamic \(config.name): sum \(sum), expected \(config.expectedSum)")
                    check(graph.counter.total == config.expectedCount,
                          "dynamic \(config.name): count \(graph.counter.total), expected \(config.expectedCount)")
                }
            }
            table.printRow(CaseResult(
                name: "\(config.name) (\(config.title))",
                times: times,
                computedRuns: graph.counter.total,
                effectRuns: graph.effectRuns.total,
                failed: failedCheckCount() > failuresBefore))
        }
    }
}

extension DynamicGraphBench {
    /// One iteration of a configuration's `runGraph` (for `obsbench alloc`): the graph of the
    /// configuration whose name starts with `prefix`, and a step that runs iteration `i`.
    static func probe(_ prefix: String) -> (Int) -> Void {
        let config = configs.first { $0.name.hasPrefix(prefix) }!
        let graph = DynamicGraph(config)
        return { i in withExtendedLifetime((graph.effect, graph.nodes)) { graph.iterate(i) } }
    }
}

/// One graph of the dynamic benchmark, built as the suite's `makeGraph` builds it.
private struct DynamicGraph {
    let sources: [Readable<Double>]
    let readLeaves: [Readable<Double>]
    /// Every node of the graph, kept alive while it runs (`Readable` does not keep them).
    let nodes: NodeOwner
    /// The suite's counter: runs of the graph's computeds.
    let counter: Counter
    /// Runs of the suite's one effect, which reads every read leaf.
    let effectRuns: Counter
    let effect: Any

    init(_ config: DynamicGraphBench.Config) {
        let counter = Counter()
        let nodes = NodeOwner()
        let sources = (0..<config.width).map { Readable(Observable(Double($0)), keptBy: nodes) }
        let rows = makeDependentRows(
            sources: sources, numRows: config.totalLayers - 1, counter: counter,
            staticFraction: config.staticFraction, nSources: config.nSources, nodes: nodes)

        var rand = PseudoRandom()
        let leaves = rows[rows.count - 1]
        // Math.round; the product is never negative, where it would round halves differently.
        let skipCount = Int((Double(leaves.count) * (1 - config.readFraction)).rounded())
        let readLeaves = removeElements(leaves, count: skipCount, rand: &rand)

        // The suite's effect reads several nodes, so it becomes a computed reading them, observed
        // with `initial: true`. Its value never changes, so the observer itself runs only once;
        // the effect's runs are the computed's runs.
        let effectRuns = Counter()
        let reader = Computed {
            effectRuns.increment()
            for leaf in readLeaves {
                _ = leaf.value
            }
            return 0
        }
        self.sources = sources
        self.readLeaves = readLeaves
        self.nodes = nodes
        self.counter = counter
        self.effectRuns = effectRuns
        effect = reader.observe(initial: true) { _ in }
    }

    /// Iteration `i` of the suite's `runGraph`: a write in its own batch, then reading the leaves.
    @inline(__always)
    func iterate(_ i: Int) {
        batch {
            let sourceDex = i % sources.count
            guard case .signal(let source) = sources[sourceDex] else { return }
            source._withUnsafeGuaranteedRef { $0.value = Double(i + sourceDex) }
        }
        for leaf in readLeaves {
            _ = leaf.value
        }
    }

    /// The suite's `runGraph`: the sum of the read leaves after the last iteration.
    func run(iterations: Int) -> Double {
        for i in 0..<iterations {
            iterate(i)
        }
        return readLeaves.reduce(0.0) { total, leaf in leaf.value + total }
    }
}

private func removeElements<T>(_ source: [T], count: Int, rand: inout PseudoRandom) -> [T] {
    var copy = source
    for _ in 0..<count {
        let index = Int((rand.next() * Double(copy.count)).rounded(.down))
        copy.remove(at: index)
    }
    return copy
}

private func makeDependentRows(
    sources: [Readable<Double>], numRows: Int, counter: Counter, staticFraction: Double, nSources: Int,
    nodes: NodeOwner
) -> [[Readable<Double>]] {
    var previousRow = sources
    var random = PseudoRandom()
    var rows: [[Readable<Double>]] = []
    for _ in 0..<numRows {
        let row = makeRow(sources: previousRow, counter: counter, staticFraction: staticFraction,
                          nSources: nSources, nodes: nodes, random: &random)
        rows.append(row)
        previousRow = row
    }
    return rows
}

private func makeRow(
    sources: [Readable<Double>], counter: Counter, staticFraction: Double, nSources: Int,
    nodes: NodeOwner, random: inout PseudoRandom
) -> [Readable<Double>] {
    sources.indices.map { myDex in
        let mySources = (0..<nSources).map { sourceDex in sources[(myDex + sourceDex) % sources.count] }

        let staticNode = random.next() < staticFraction
        if staticNode {
            // A static node always reads all its sources.
            return Readable(Computed {
                counter.increment()
                var sum = 0.0
                for source in mySources {
                    sum += source.value
                }
                return sum
            }, keptBy: nodes)
        }
        // A dynamic node drops one of its sources, chosen by the value of the first.
        let first = mySources[0]
        let tail = Array(mySources.dropFirst())
        return Readable(Computed {
            counter.increment()
            var sum = first.value
            let shouldDrop = isOdd(sum)
            let dropDex = remainder(sum, Double(tail.count))
            for i in tail.indices {
                if shouldDrop && Double(i) == dropDex {
                    continue
                }
                sum += tail[i].value
            }
            return sum
        }, keptBy: nodes)
    }
}

/// `x & 0x1` in JavaScript: ToInt32 truncates, wraps modulo 2^32 and maps NaN and infinities to 0;
/// of that only the low bit is kept, which is the parity of the truncated value. An integer below
/// 2^53 is tested as an integer, as JavaScript engines do; only the rest goes through `fmod`.
private func isOdd(_ x: Double) -> Bool {
    let truncated = x.rounded(.towardZero)
    if abs(truncated) < 0x1p53 { return Int64(truncated) & 1 != 0 }
    guard x.isFinite else { return false }
    return truncated.truncatingRemainder(dividingBy: 2) != 0
}

/// `x % y` in JavaScript, the truncating remainder (`fmod`); for an integer below 2^53 and an
/// integer divisor it is computed as integers, as JavaScript engines do (the same value, but for
/// the sign of a zero, which no comparison here sees).
private func remainder(_ x: Double, _ y: Double) -> Double {
    if abs(x) < 0x1p53, x == x.rounded(.towardZero) { return Double(Int64(x) % Int64(y)) }
    return x.truncatingRemainder(dividingBy: y)
}
