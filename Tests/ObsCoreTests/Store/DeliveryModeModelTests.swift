import ObsCore
import XCTest
import TestSupport

/// Seeded random writes with watches in every delivery mode on a fake clock, some behind a busy or
/// overflowing connection: once everything due has run and the outputs have drained, every watch's
/// view (its events applied in order) equals the store's state. No mode loses a change silently.
final class DeliveryModeModelTests: XCTestCase {
    private let keys = ["a", "b", "s.x", "s.y"]
    private let watchRequests = [
        #"{"op":"watch","keys":["**"]}"#,
        #"{"op":"watch","keys":["**"],"mode":"latest"}"#,
        #"{"op":"watch","keys":["**"],"throttle_ms":100}"#,
        #"{"op":"watch","keys":["**"],"debounce_ms":70}"#,
        #"{"op":"watch","keys":["a","s.*"],"progress_ms":50}"#,
    ]

    func test_everyModeConvergesToTheStoreState() {
        for seed in UInt64(1)...6 { run(seed: seed) }
    }

    private func run(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var configuration = StoreConfiguration()
        configuration.maxOutputBytes = 400
        let harness = Harness(configuration: configuration)
        let writer = harness.connect()
        writer.request(#"{"op":"define","key":"s.sum","expr":"($a ?? 0) + ($b ?? 0)"}"#)
        let watchers = watchRequests.map { request -> Client in
            let client = harness.connect(.read)
            client.request(request)
            return client
        }
        var views = [[String: JSONValue]](repeating: [:], count: watchers.count)
        func collect() {
            for (index, watcher) in watchers.enumerated() {
                for line in watcher.output.take() {
                    guard let event = (try? JSONValue.parse(line))?.objectValue, let name = event["event"]?.stringValue else { continue }
                    // A gap: the snapshot that follows replaces the view.
                    if name == "overflow" || name == "compacted" { views[index] = [:] }
                    guard let key = event["key"]?.stringValue else { continue }
                    switch name {
                    case "initial": views[index][key] = event["value"]
                    case "change": views[index][key] = event["new"]
                    case "delete": views[index][key] = nil
                    default: break
                    }
                }
            }
        }
        // Events the test has not read stay "pending" on the slow connection of watcher 0.
        for step in 0..<300 {
            collect()
            let slow = watchers[0].output
            slow.pendingBytes = random.below(5) == 0 ? 1000 : 0
            watchers[1].output.pendingBytes = random.below(3) == 0 ? 10 : 0
            if slow.pendingBytes == 0 { watchers[0].session.outputDrained() }
            var ops: [JSONValue] = []
            for _ in 0..<(1 + random.below(3)) {
                let key = random.pick(keys)
                switch random.below(3) {
                case 0: ops.append(["op": "delete", "key": .string(key)])
                default: ops.append(["op": "set", "key": .string(key), "value": .int(Int64(random.below(5)))])
                }
            }
            XCTAssertEqual(writer.request(JSONValue.object(["op": "batch", "ops": .array(ops)]).encoded)["ok"], true, "seed \(seed) step \(step)")
            harness.clock.advance(Double(random.below(120)) / 1000)
            harness.store.tick()
        }
        collect()
        for watcher in watchers {
            watcher.output.pendingBytes = 0
            watcher.session.outputDrained()
        }
        harness.clock.advance(10)
        harness.store.tick()
        collect()
        var state: [String: JSONValue] = [:]
        for item in writer.request(#"{"op":"get","pattern":"**"}"#)["items"]!.arrayValue! {
            state[item["key"]!.stringValue!] = item["value"]
        }
        for (index, view) in views.enumerated() {
            let patterns = index == 4 ? ["a", "s."] : [""]
            let expected = state.filter { key, _ in patterns.contains { key == $0 || (!$0.isEmpty && key.hasPrefix($0) && !key.dropFirst($0.count).contains(".")) || $0.isEmpty } }
            XCTAssertEqual(view, expected, "seed \(seed) watch \(index)")
        }
    }
}
