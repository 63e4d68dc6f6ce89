import XCTest
@testable import ObsCore
import TestSupport

/// Every committed change of every key is in the history, whether or not a watch saw it: a
/// computed in the middle of a chain that nobody watches still has its change recorded at every
/// revision, so a `since` replay sees exactly what a model of the chain says changed.
final class ChainHistoryTests: XCTestCase {
    /// ```
    /// src <- c1 = $src + 1 <- c2 = $c1 + 1 <- ... <- c12 = $c11 + 1
    /// ```
    /// While the writes happen, one client watches c12 alone: the other keys are watched by
    /// nobody. Writes: plain sets (some to the value src has, which
    /// change nothing), batches that set src twice (one revision), batches that fail and roll
    /// back (no revision), strings (`+` concatenates), and booleans (every computed fails, and
    /// recovers with the last good value as `old`).
    func test_sinceReplay_ofAChain_hasEveryChangeOfEveryKey() throws {
        let depth = 12
        let harness = Harness()
        let writer = harness.connect()
        writer.request(#"{"op":"set","key":"src","value":0}"#)
        writer.request(#"{"op":"define","key":"c1","expr":"$src + 1"}"#)
        for index in 2...depth { writer.request(#"{"op":"define","key":"c\#(index)","expr":"$c\#(index - 1) + 1"}"#) }
        let tail = harness.connect(.read)
        tail.request(#"{"op":"watch","keys":["c\#(depth)"],"initial":false}"#)
        _ = tail.output.take()
        let start = harness.store.rev

        // The model: each key's state (a value, or nil while in error) and its last good value.
        var state: [String: JSONValue?] = ["src": .int(0)]
        var lastGood: [String: JSONValue] = ["src": .int(0)]
        for index in 1...depth {
            state["c\(index)"] = .int(Int64(index))
            lastGood["c\(index)"] = .int(Int64(index))
        }
        func evaluate(_ source: JSONValue) -> [String: JSONValue?] {
            var next: [String: JSONValue?] = ["src": source]
            var previous: JSONValue? = source
            for index in 1...depth {
                switch previous {
                case .int(let number)?: previous = .int(number + 1)
                case .string(let text)?: previous = .string(text + "1")
                default: previous = nil
                }
                next["c\(index)"] = previous
            }
            return next
        }
        // What a since replay must hold: per revision, each changed key's event, in key order.
        var expected: [(rev: UInt64, key: String, kind: String, old: JSONValue?, new: JSONValue?)] = []
        var rev = start
        func commit(_ source: JSONValue) {
            let next = evaluate(source)
            let changed = next.keys.filter { next[$0]! != state[$0]! }.sorted(by: JSONValue.utf8Precedes)
            guard !changed.isEmpty else { return }
            rev += 1
            for key in changed {
                if let value = next[key]! {
                    expected.append((rev, key, "change", state[key]! ?? lastGood[key], value))
                    lastGood[key] = value
                } else {
                    expected.append((rev, key, "error", nil, nil))
                }
                state[key] = next[key]!
            }
        }

        var generator = SplitMix64(seed: 50)
        func number() -> Int64 { Int64(generator.next() % 7) - 3 }
        for _ in 0..<300 {
            switch generator.next() % 6 {
            case 0, 1:
                let value = number()
                writer.request(#"{"op":"set","key":"src","value":\#(value)}"#)
                commit(.int(value))
            case 2:
                let first = number(), second = number()
                writer.request(#"{"op":"batch","ops":[{"op":"set","key":"src","value":\#(first)},{"op":"set","key":"src","value":\#(second)}]}"#)
                commit(.int(second))
            case 3:
                let failed = writer.request(#"{"op":"batch","ops":[{"op":"set","key":"src","value":99},{"op":"set","key":"src","value":1,"if_rev":999999}]}"#)
                XCTAssertEqual(failed["error"]?["code"], "conflict")
                XCTAssertEqual(failed["error"]?["index"], 1)
            case 4:
                let text = "s\(generator.next() % 3)"
                writer.request(#"{"op":"set","key":"src","value":"\#(text)"}"#)
                commit(.string(text))
            default:
                writer.request(#"{"op":"set","key":"src","value":true}"#)
                commit(.bool(true))
            }
        }
        XCTAssertEqual(harness.store.rev, rev)
        XCTAssertGreaterThan(expected.count, 1000)

        let replayer = harness.connect(.read)
        let replay = replayer.send(#"{"id":1,"op":"watch","keys":["*"],"since":\#(start)}"#)
        XCTAssertEqual(replay.first, #"{"id":1,"ok":true,"watch":1}"#)
        XCTAssertEqual(replay.last, #"{"event":"synced","watch":1,"rev":\#(rev)}"#)
        let events = Array(replay.dropFirst().dropLast())
        XCTAssertEqual(events.count, expected.count)
        // The watcher of the chain's end got live exactly the replay's events of its key.
        XCTAssertEqual(tail.output.take(), events.filter { $0.contains(#""key":"c\#(depth)""#) })
        for (line, want) in zip(events, expected) {
            let event = try XCTUnwrap(JSONValue.parse(line).objectValue)
            XCTAssertEqual(event["event"], .string(want.kind), line)
            XCTAssertEqual(event["key"], .string(want.key), line)
            XCTAssertEqual(event["rev"], .int(Int64(want.rev)), line)
            if want.kind == "change" {
                XCTAssertEqual(event["old"], want.old, line)
                XCTAssertEqual(event["new"], want.new, line)
            }
        }
    }

    /// A batch that redefines a computed of a chain and then fails puts the definition back as it
    /// was: later writes propagate through the old expression.
    func test_failedBatch_restoresTheDefinitionItChanged() {
        let harness = Harness()
        let writer = harness.connect()
        writer.request(#"{"op":"set","key":"src","value":1}"#)
        writer.request(#"{"op":"define","key":"a","expr":"$src * 10"}"#)
        writer.request(#"{"op":"define","key":"b","expr":"$a + 1"}"#)
        let failed = writer.request(
            #"{"op":"batch","ops":[{"op":"define","key":"a","expr":"$src - 1"},{"op":"set","key":"src","value":2},{"op":"set","key":"src","value":3,"if_rev":999999}]}"#)
        XCTAssertEqual(failed["error"]?["code"], "conflict")
        XCTAssertEqual(failed["error"]?["index"], 2)
        XCTAssertEqual(harness.store.value(forKey: "b"), 11)
        writer.request(#"{"op":"set","key":"src","value":4}"#)
        XCTAssertEqual(harness.store.value(forKey: "a"), 40)
        XCTAssertEqual(harness.store.value(forKey: "b"), 41)
        XCTAssertEqual(writer.request(#"{"op":"describe","key":"a"}"#)["expr"], "$src * 10")
    }

    /// A batch that redefines a computed twice: its snapshot of the key names the first
    /// definition, which the batch replaced; a failed batch restores that one, a committed one
    /// keeps the last.
    func test_batchRedefiningTwice_restoresTheFirstDefinition_orKeepsTheLast() {
        let harness = Harness()
        let writer = harness.connect()
        writer.request(#"{"op":"set","key":"src","value":1}"#)
        writer.request(#"{"op":"define","key":"a","expr":"$src * 10"}"#)
        let failed = writer.request(
            #"{"op":"batch","ops":[{"op":"define","key":"a","expr":"$src - 1"},{"op":"define","key":"a","expr":"$src + 100"},{"op":"set","key":"src","value":3,"if_rev":999999}]}"#)
        XCTAssertEqual(failed["error"]?["code"], "conflict")
        XCTAssertEqual(writer.request(#"{"op":"describe","key":"a"}"#)["expr"], "$src * 10")
        XCTAssertEqual(harness.store.value(forKey: "a"), 10)
        writer.request(
            #"{"op":"batch","ops":[{"op":"define","key":"a","expr":"$src - 1"},{"op":"define","key":"a","expr":"$src + 100"},{"op":"set","key":"src","value":2}]}"#)
        XCTAssertEqual(writer.request(#"{"op":"describe","key":"a"}"#)["expr"], "$src + 100")
        XCTAssertEqual(harness.store.value(forKey: "a"), 102)
    }
}
