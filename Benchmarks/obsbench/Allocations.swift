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
    /// The daemon's request path without the socket: a `set` request line through a session,
    /// parsed, committed and answered.
    case request = "store-request"
    /// A set of a key that 100 sessions watch: the event encoded once, queued 100 times.
    case fanout = "store-fanout"
    /// A set of `src` read by a computed key that 100 sessions watch (the comparison's computed row).
    case computedFanout = "store-computed"
    /// A set through a 50-deep chain of computed keys, watched at its end.
    case keyChain = "store-chain"
    /// A set read by 1,000 computed keys (`f.1` ... `f.1000`), all watched by one `f.*` watch.
    case keyFan = "store-fan"

    /// Builds the graph; returns one update (a write in its own batch).
    func build() -> (Int) -> Void {
        if let store = StoreShape(self) { return store.build() }
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
        case .request, .fanout, .computedFanout, .keyChain, .keyFan:
            preconditionFailure("built by StoreShape")
        }
        return { value in
            withExtendedLifetime(tokens) {
                batch { head.value = value }
            }
        }
    }
}

/// The shapes that go through the daemon's store and sessions (no socket).
private struct StoreShape {
    let shape: AllocationShape

    init?(_ shape: AllocationShape) {
        switch shape {
        case .request, .fanout, .computedFanout, .keyChain, .keyFan: self.shape = shape
        default: return nil
        }
    }

    func build() -> (Int) -> Void {
        var configuration = StoreConfiguration()
        if shape == .keyFan {
            // A set's events are about 100 KB here: with the default bound (64 MiB) the history
            // would grow through the whole probe; at 4 MiB the warm-up fills it, and the probe
            // measures what the daemon does once its history is full (evict, then place).
            configuration.historyBytes = 4 << 20
        }
        let store = try! Store(configuration: configuration, storage: DiscardingStorage(), clock: SystemClock())
        switch shape {
        case .request:
            let session = Session(store: store, access: .write, output: DroppingOutput())
            let lines = (0..<100).map { Array(#"{"id":\#($0),"op":"set","key":"k","value":\#($0)}"#.utf8) + [0x0A] }
            return { value in lines[value % 100].withUnsafeBytes { session.receive(bytes: $0) } }
        case .fanout:
            let sessions = (0..<100).map { _ in Session(store: store, access: .read, output: DroppingOutput()) }
            for session in sessions { session.receive(#"{"op":"watch","keys":["room.*"],"initial":false}"#) }
            return { value in withExtendedLifetime(sessions) { _ = try! store.setValue(.int(Int64(value)), forKey: "room.temp") } }
        case .computedFanout:
            try! store.setValue(0, forKey: "src")
            try! store.defineComputed("c", expression: "$src + 1")
            let sessions = (0..<100).map { _ in Session(store: store, access: .read, output: DroppingOutput()) }
            for session in sessions { session.receive(#"{"op":"watch","keys":["c"],"initial":false}"#) }
            return { value in withExtendedLifetime(sessions) { _ = try! store.setValue(.int(Int64(value)), forKey: "src") } }
        case .keyFan:
            try! store.setValue(0, forKey: "src")
            for index in 1...1000 { try! store.defineComputed("f.\(index)", expression: "$src + \(index)") }
            let session = Session(store: store, access: .read, output: DroppingOutput())
            session.receive(#"{"op":"watch","keys":["f.*"],"initial":false}"#)
            return { value in withExtendedLifetime(session) { _ = try! store.setValue(.int(Int64(value)), forKey: "src") } }
        default:
            try! store.setValue(0, forKey: "src")
            try! store.defineComputed("c1", expression: "$src + 1")
            for index in 2...50 { try! store.defineComputed("c\(index)", expression: "$c\(index - 1) + 1") }
            let session = Session(store: store, access: .read, output: DroppingOutput())
            session.receive(#"{"op":"watch","keys":["c50"],"initial":false}"#)
            return { value in withExtendedLifetime(session) { _ = try! store.setValue(.int(Int64(value)), forKey: "src") } }
        }
    }
}

/// A storage that keeps nothing, as obsd's in `--memory` mode: the store builds no record of what
/// a transaction changed.
private final class DiscardingStorage: StateStorage {
    var keepsCommits: Bool { false }
    func load() throws(ObsError) -> StoredState { StoredState() }
    func commit(_ transaction: StoredTransaction) throws(ObsError) {}
    func sync() throws(ObsError) {}
}

/// An output that copies every line into a buffer, as the daemon's connection does, and empties
/// it now and then, as the connection's write does at the end of each loop turn.
private final class DroppingOutput: SessionOutput {
    // Written for every line, as the daemon's connection does, and like its output state with no
    // dynamic exclusivity checks (they were more than half of a delivery's instructions here).
    @exclusivity(unchecked) private var bytes = ByteBuffer()
    var pendingBytes: Int { 0 }

    func write(_ line: EncodedLine) {
        line.head.withUnsafeBytes { head in line.body.withUnsafeBytes { write(head: head, body: $0, needsSync: line.needsSync) } }
    }

    func write(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool) {
        if bytes.count > 1 << 16 { bytes.removeAll() }
        bytes.append(head)
        bytes.append(body)
    }
}
