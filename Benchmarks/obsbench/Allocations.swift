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
