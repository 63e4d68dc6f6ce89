import Foundation
import ObsCore

/// The `alloc` section: runs one graph shape for a given number of updates and nothing else, so
/// that `Benchmarks/allocations.sh` can count heap allocations per update with valgrind (the
/// difference between two update counts, so that building the graph and warming up cancel out).
///
///   obsbench alloc SHAPE UPDATES
func runAllocationProbe() {
    let arguments = Array(CommandLine.arguments.dropFirst(2))
    guard arguments.count == 2, let shape = AllocationShape(rawValue: arguments[0]), let updates = Int(arguments[1]) else {
        let shapes = AllocationShape.allCases.map(\.rawValue).joined(separator: "|")
        FileHandle.standardError.write(Data("usage: obsbench alloc \(shapes) UPDATES\n".utf8))
        exit(64)
    }
    let step = shape.build()
    for value in 1...100 { step(value) }     // warm up: pools and buffers reach their size
    for value in 0..<updates { step(101 + value) }
}

/// Graph shapes whose update path should allocate nothing once warmed up.
enum AllocationShape: String, CaseIterable {
    /// A 50-deep chain of computeds, observed at its end.
    case chain
    /// a -> b, c -> d, observed.
    case diamond
    /// One source, 50 observed computeds.
    case fan
    /// A computed whose dependency switches between two sources on every update.
    case dynamic
    /// kairo's repeatedObservers: a computed reading one source 30 times, observed.
    case repeated
    /// kairo's unstable: a computed reading the source and one of two computeds 20 times each,
    /// switching between them with the source's parity, observed.
    case unstable
    /// A small layered graph like the dynamic benchmark's: 10 sources, 4 rows of computeds each
    /// reading two of the row above, a computed reading two leaves, observed; each update writes
    /// one source and reads the two leaves.
    case layers
    /// Configurations of the dynamic-graph benchmark, one `runGraph` iteration per update:
    /// "simple component", "dynamic component", "large web app", "wide dense", "very dynamic".
    case simple, component, webapp, wide, verydynamic
    /// The positive control: an observable whose values allocate by themselves (a fresh 100-byte
    /// string per update), so about one allocation per update must show.
    case control

    /// Builds the graph; returns one update (a write in its own batch).
    func build() -> (Int) -> Void {
        let head = Observable(0)
        var tokens: [ObservationToken] = []
        switch self {
        case .chain:
            var last: Computed<Int> = Computed { head.value }
            for _ in 0..<50 {
                let previous = last
                last = Computed { previous.value + 1 }
            }
            tokens.append(last.observe { _ in })
        case .diamond:
            let b = Computed { head.value + 1 }
            let c = Computed { head.value * 2 }
            let d = Computed { b.value + c.value }
            tokens.append(d.observe { _ in })
        case .fan:
            for index in 0..<50 {
                let node = Computed { head.value + index }
                tokens.append(node.observe { _ in })
            }
        case .control:
            let text = Observable("")
            tokens.append(text.observe { _ in })
            return { value in
                withExtendedLifetime(tokens) {
                    text.value = String(repeating: "x", count: 100) + String(value)
                }
            }
        case .repeated:
            let current = Computed {
                var result = 0
                for _ in 0..<30 { result += head.value }
                return result
            }
            tokens.append(current.observe { _ in })
        case .unstable:
            let double = Computed { head.value * 2 }
            let inverse = Computed { -head.value }
            let current = Computed {
                var result = 0
                for _ in 0..<20 { result += head.value % 2 != 0 ? double.value : inverse.value }
                return result
            }
            tokens.append(current.observe { _ in })
        case .layers:
            let sources = (0..<10).map { Observable($0) }
            var row: [ObservableValue<Int>] = sources
            for _ in 0..<4 {
                let above = row
                row = above.indices.map { index in
                    let first = above[index], second = above[(index + 1) % above.count]
                    return Computed { first.value + second.value }
                }
            }
            let leaves = [row[3], row[7]]
            let reader = Computed { leaves[0].value &+ leaves[1].value }
            tokens.append(reader.observe { _ in })
            return { value in
                withExtendedLifetime(tokens) {
                    batch { sources[value % 10].value = value }
                    for leaf in leaves { _ = leaf.value }
                }
            }
        case .simple: return DynamicGraphBench.probe("simple")
        case .component: return DynamicGraphBench.probe("dynamic component")
        case .webapp: return DynamicGraphBench.probe("large")
        case .wide: return DynamicGraphBench.probe("wide")
        case .verydynamic: return DynamicGraphBench.probe("very")
        case .dynamic:
            let left = Observable(0), right = Observable(0)
            let pick = Computed { head.value % 2 == 0 ? left.value : right.value + head.value }
            tokens.append(pick.observe { _ in })
        }
        return { value in
            withExtendedLifetime(tokens) {
                batch { head.value = value }
            }
        }
    }
}
