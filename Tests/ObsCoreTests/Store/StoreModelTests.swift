import ObsCore
import XCTest
import TestSupport

/// Seeded random operations applied to the store (through a session) and to a naive model: after
/// every step the values, the revision and every watcher's events agree, with exactly one event per
/// key per transaction, in key order. The store also holds the binding `k.a -> x.d` (a deleted
/// `k.a` writes null), and computeds are deleted and defined again along the way.
final class StoreModelTests: XCTestCase {
    private let valueKeys = ["k.a", "k.b", "k.c", "x.d"]
    /// The computeds the model knows how to evaluate.
    private let computeds: [(key: String, expr: String, eval: ([String: JSONValue]) -> JSONValue)] = [
        ("c.sum", "($k.a ?? 0) + ($k.b ?? 0)", { model in
            .int((model["k.a"]?.intValue ?? 0) + (model["k.b"]?.intValue ?? 0))
        }),
        ("c.note", "$k.c ?? \"none\"", { model in model["k.c"] ?? "none" }),
    ]
    private let watchPatterns: [[String]] = [["**"], ["k.*"], ["x.d", "k.a", "c.*"]]

    func test_randomOperations_agreeWithNaiveModel() {
        for seed in UInt64(1)...16 { run(seed: seed, steps: 300) }
    }

    private func run(seed: UInt64, steps: Int) {
        var random = SplitMix64(seed: seed)
        let harness = Harness()
        let writer = harness.connect()
        // Binding a missing k.a writes null into x.d at once.
        var model: [String: JSONValue] = ["x.d": .null]
        var defined = Set(computeds.map(\.key))
        var rev: UInt64 = 1
        writer.request(#"{"op":"bind","from":"k.a","to":"x.d"}"#)
        for computed in computeds {
            writer.request(JSONValue.object(["op": "define", "key": .string(computed.key), "expr": .string(computed.expr)]).encoded)
            rev += 1
        }
        var state = fullState(model, defined)
        let watchers = watchPatterns.map { patterns -> Client in
            let client = harness.connect(.read)
            client.request(JSONValue.object(["op": "watch", "keys": .array(patterns.map { .string($0) }), "initial": false]).encoded)
            return client
        }

        var everything: [(rev: UInt64, line: String)] = []
        for step in 0..<steps {
            let before = state
            var ops: [[String: JSONValue]] = []
            let count = random.below(4) == 0 ? 2 + random.below(3) : 1
            for _ in 0..<count {
                let key = random.pick(valueKeys)
                switch random.below(9) {
                case 0, 1, 2: ops.append(["op": "set", "key": .string(key), "value": .int(Int64(random.below(4)))])
                case 3, 4: ops.append(["op": "delete", "key": .string(key)])
                case 5, 6: ops.append(["op": "incr", "key": .string(key)])
                case 7: ops.append(["op": "delete", "key": .string(random.pick(computeds).key)])
                default:
                    let computed = random.pick(computeds)
                    ops.append(["op": "define", "key": .string(computed.key), "expr": .string(computed.expr)])
                }
            }
            var next = model
            var nextDefined = defined
            var redefined = false
            // An incr of the null the binding wrote fails, and with it the whole request.
            var fails = false
            for op in ops {
                let key = op["key"]!.stringValue!
                switch op["op"]!.stringValue! {
                case "set": next[key] = op["value"]!
                case "delete":
                    if key.hasPrefix("c.") { nextDefined.remove(key) } else { next[key] = nil }
                case "define":
                    nextDefined.insert(key)
                    redefined = true
                default:
                    if next[key] == .null { fails = true }
                    next[key] = .int((next[key]?.intValue ?? 0) + 1)
                }
            }
            let request: JSONValue = ops.count == 1 ? .object(ops[0]) : .object(["op": "batch", "ops": .array(ops.map { .object($0) })])
            if fails {
                XCTAssertEqual(writer.request(request.encoded)["ok"], false, "seed \(seed) step \(step)")
                for watcher in watchers { XCTAssertEqual(watcher.output.take(), [], "seed \(seed) step \(step)") }
                continue
            }
            // The binding writes x.d at the end of the transaction when k.a changed: its value, or
            // null when it was deleted.
            if next["k.a"] != model["k.a"] { next["x.d"] = next["k.a"] ?? .null }
            let response = writer.request(request.encoded)
            XCTAssertEqual(response["ok"], true, "seed \(seed) step \(step)")
            model = next
            defined = nextDefined
            state = fullState(model, defined)
            let changedKeys = Set(state.keys).union(before.keys).filter { state[$0] != before[$0] }
                .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            if !changedKeys.isEmpty || redefined { rev += 1 }
            XCTAssertEqual(response["rev"]?.intValue, Int64(rev), "seed \(seed) step \(step)")

            for (index, watcher) in watchers.enumerated() {
                let expected = changedKeys.filter { key in watchPatterns[index].contains { matches($0, key) } }.map { key in
                    expectedLine(watch: 1, key: key, old: before[key], new: state[key], rev: rev)
                }
                XCTAssertEqual(watcher.output.take(), expected, "seed \(seed) step \(step) watcher \(index)")
                if index == 0 { everything += expected.map { (rev, $0) } }
            }
        }
        // A late watch with `since` replays exactly what the live watch of everything received.
        let since = rev / 2
        let late = harness.connect(.read)
        late.request(#"{"op":"watch","keys":["**"],"since":\#(since)}"#)
        XCTAssertEqual(late.pendingEvents, everything.filter { $0.rev > since }.map(\.line) + [#"{"event":"synced","watch":1,"rev":\#(rev)}"#],
                       "seed \(seed) replay")
        for key in valueKeys + computeds.map(\.key) {
            let response = writer.request(JSONValue.object(["op": "get", "key": .string(key)]).encoded)
            XCTAssertEqual(response["value"], state[key], "seed \(seed) key \(key)")
        }
    }

    private func fullState(_ model: [String: JSONValue], _ defined: Set<String>) -> [String: JSONValue] {
        var state = model
        for computed in computeds where defined.contains(computed.key) { state[computed.key] = computed.eval(model) }
        return state
    }

    private func matches(_ pattern: String, _ key: String) -> Bool {
        if pattern == "**" { return true }
        if pattern.hasSuffix(".*") {
            let prefix = pattern.dropLast(1)
            return key.hasPrefix(prefix) && !key.dropFirst(prefix.count).contains(".")
        }
        return pattern == key
    }

    private func expectedLine(watch: Int, key: String, old: JSONValue?, new: JSONValue?, rev: UInt64) -> String {
        guard let new else {
            return #"{"event":"delete","watch":\#(watch),"key":"\#(key)","old":\#(old!.encoded),"rev":\#(rev)}"#
        }
        let oldPart = old.map { #","old":\#($0.encoded)"# } ?? ""
        return #"{"event":"change","watch":\#(watch),"key":"\#(key)"\#(oldPart),"new":\#(new.encoded),"rev":\#(rev),"created":\#(old == nil)}"#
    }
}
