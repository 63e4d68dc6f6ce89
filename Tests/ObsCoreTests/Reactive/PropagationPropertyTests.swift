import XCTest
@testable import ObsCore
import TestSupport

/// Seeded random graphs with dynamic dependencies and random batches of writes, checked after every
/// batch against a model that recomputes everything from scratch.
final class PropagationPropertyTests: XCTestCase {
    /// How a computed node combines earlier nodes. `.pick` reads `a`, then only one of `b`, `c`.
    enum Recipe {
        case sum(Int, Int)
        case pick(Int, Int, Int)
        case residue(Int)
        case successor(Int)

        func evaluate(_ read: (Int) -> Int) -> Int {
            switch self {
            case let .sum(a, b): return (read(a) &+ read(b)) % 1000
            case let .pick(a, b, c): return read(a) % 3 == 0 ? read(b) : read(c)
            case let .residue(a): return (read(a) &* 7) % 5
            case let .successor(a): return (read(a) &+ 1) % 1000
            }
        }
    }

    /// The obviously correct model: evaluates every computed in index order.
    struct Model {
        var values: [Int]
        var reads: [[Int]]
        let recipes: [Recipe?]

        init(sources: [Int], recipes: [Recipe?]) {
            self.values = sources + Array(repeating: 0, count: recipes.count - sources.count)
            self.reads = Array(repeating: [], count: recipes.count)
            self.recipes = recipes
            recompute()
        }

        mutating func recompute() {
            for index in recipes.indices {
                guard let recipe = recipes[index] else { continue }
                var read: [Int] = []
                let current = values
                values[index] = recipe.evaluate { dep in read.append(dep); return current[dep] }
                reads[index] = read
            }
        }
    }

    final class Graph: @unchecked Sendable {
        var nodes: [ObservableValue<Int>] = []
        var runs: [Int] = []
        func read(_ index: Int) -> Int { nodes[index].value }
    }

    func test_randomGraphs_matchTheModelAndRecomputeEachNodeAtMostOncePerBatch() {
        for seed in UInt64(1)...60 {
            runScenario(seed: seed)
        }
    }

    private func runScenario(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        func pick(_ upper: Int) -> Int { Int(random.next() % UInt64(upper)) }

        let sourceCount = 2 + pick(6)
        let computedCount = 4 + pick(40)
        var recipes: [Recipe?] = Array(repeating: nil, count: sourceCount)
        for index in sourceCount..<(sourceCount + computedCount) {
            switch pick(4) {
            case 0: recipes.append(.sum(pick(index), pick(index)))
            case 1: recipes.append(.pick(pick(index), pick(index), pick(index)))
            case 2: recipes.append(.residue(pick(index)))
            default: recipes.append(.successor(pick(index)))
            }
        }
        let initial = (0..<sourceCount).map { _ in pick(10) }
        var model = Model(sources: initial, recipes: recipes)

        let graph = Graph()
        let runLock = NSLock()
        graph.runs = Array(repeating: 0, count: recipes.count)
        for (index, recipe) in recipes.enumerated() {
            if let recipe {
                graph.nodes.append(Computed {
                    runLock.lock(); graph.runs[index] += 1; runLock.unlock()
                    return recipe.evaluate(graph.read)
                })
            } else {
                graph.nodes.append(Observable(initial[index]))
            }
        }
        let observed = (sourceCount..<recipes.count).filter { _ in pick(2) == 0 }
        let deliveries = Log<(Int, Change<Int>)>()
        let tokens = observed.map { index in
            graph.nodes[index].observe { deliveries.append((index, $0)) }
        }
        defer { tokens.forEach { $0.cancel() } }

        for step in 0..<40 {
            let before = model
            graph.runs = Array(repeating: 0, count: recipes.count)
            deliveries.clear()
            let writes = (0..<(1 + pick(4))).map { _ in (pick(sourceCount), pick(10)) }
            batch {
                for (source, value) in writes {
                    (graph.nodes[source] as! Observable<Int>).value = value
                }
            }
            for (source, value) in writes { model.values[source] = value }
            model.recompute()
            let context = "seed \(seed) step \(step)"

            for index in recipes.indices where graph.runs[index] > 1 {
                XCTFail("\(context): node \(index) ran \(graph.runs[index]) times in one batch")
            }
            for index in observed {
                let depChanged = before.reads[index].contains { before.values[$0] != model.values[$0] }
                XCTAssertEqual(graph.runs[index] == 1, depChanged,
                               "\(context): observed node \(index) runs exactly when a dependency it read changed")
            }
            let delivered = deliveries.entries
            XCTAssertEqual(Set(delivered.map(\.0)).count, delivered.count, "\(context): one change per observer per batch")
            for index in observed {
                let changes = delivered.filter { $0.0 == index }.map(\.1)
                if before.values[index] == model.values[index] {
                    XCTAssertEqual(changes, [], "\(context): node \(index) did not change")
                } else {
                    XCTAssertEqual(changes, [Change(oldValue: before.values[index], newValue: model.values[index])],
                                   "\(context): node \(index)")
                }
            }

            graph.runs = Array(repeating: 0, count: recipes.count)
            for index in recipes.indices where pick(3) == 0 {
                XCTAssertEqual(graph.nodes[index].value, model.values[index], "\(context): value of node \(index)")
            }
            for index in recipes.indices where graph.runs[index] > 1 {
                XCTFail("\(context): node \(index) ran \(graph.runs[index]) times while read")
            }
        }
        for index in recipes.indices {
            XCTAssertEqual(graph.nodes[index].value, model.values[index], "seed \(seed): final value of node \(index)")
        }
    }
}
