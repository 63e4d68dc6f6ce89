import Foundation
import ObsCore
import Synchronization
import XCTest

/// The example of the library's contract (docs/library.md), line by line, in Swift 6 mode (a Mutex where the example
/// captures a `var`), each comment checked.
final class LibraryExampleTests: XCTestCase {
    func test_libraryExample_behavesAsItsCommentsSay() async throws {
        let name = Observable("world")
        let greeting = Computed { "Hello, " + name.value }
        let seen = Mutex<[String]>([])
        let token = greeting.observe { change in
            seen.withLock { $0.append(change.newValue) }
        }
        name.value = "Swift"
        XCTAssertEqual(seen.withLock { $0 }, ["Hello, Swift"])
        name.value = "Swift"
        XCTAssertEqual(seen.withLock { $0 }, ["Hello, Swift"], "equal value: no event")
        token.cancel()
        name.value = "again"
        XCTAssertEqual(seen.withLock { $0 }, ["Hello, Swift"], "seen unchanged")

        let a = Observable(1), b = Observable(2)
        let sum = Computed { a.value + b.value }
        let diamondRuns = Mutex(0)
        let diamond = Computed { diamondRuns.withLock { $0 += 1 }; return sum.value * a.value }
        let runs = Mutex(0)
        let t2 = diamond.observe(initial: true) { _ in runs.withLock { $0 += 1 } }
        XCTAssertEqual(runs.withLock { $0 }, 1, "initial: called once at once")
        let before = diamondRuns.withLock { $0 }
        batch {
            a.value = 10
            b.value = 20
        }
        XCTAssertEqual(diamondRuns.withLock { $0 } - before, 1, "diamond recomputed once")
        XCTAssertEqual(runs.withLock { $0 }, 2)

        let source = Observable(3), target = Observable(0)
        let binding = bind(source, to: target)
        XCTAssertEqual(target.value, 3, "target.value == 3 at once")
        let doubled = Observable(0)
        let b2 = bind(source, to: doubled, transform: { $0 * 2 })
        XCTAssertEqual(doubled.value, 6)
        let left = Observable("x"), right = Observable("")
        let rightChanges = Mutex(0)
        let watchRight = right.observe { _ in rightChanges.withLock { $0 += 1 } }
        let b3 = bindTwoWay(left, right)
        XCTAssertEqual(left.value, "x")
        XCTAssertEqual(right.value, "x")
        left.value = "y"
        XCTAssertEqual(right.value, "y")
        XCTAssertEqual(rightChanges.withLock { $0 }, 2, "a write to either reaches the other once")

        final class Label: @unchecked Sendable { var text = "" }
        let label = Label()
        let b4 = bind(source, to: label) { label, value in label.text = "\(value)" }
        XCTAssertEqual(label.text, "3")

        let tapped = Event<String>()
        let payloads = Mutex<[String]>([])
        let t3 = tapped.subscribe { payload in payloads.withLock { $0.append(payload) } }
        tapped.fire("hello")
        XCTAssertEqual(payloads.withLock { $0 }, ["hello"])

        let q = DispatchQueue(label: "ui")
        let onQ = Mutex<[String]>([])
        let t4 = greeting.observe(on: QueueScheduler(q)) { change in
            dispatchPrecondition(condition: .onQueue(q))
            onQ.withLock { $0.append(change.newValue) }
        }
        name.value = "q1"
        name.value = "q2"
        q.sync {}
        XCTAssertEqual(onQ.withLock { $0 }, ["Hello, q1", "Hello, q2"], "runs on q, in order")

        let untracked = Computed { a.value + b.peek() }
        XCTAssertEqual(untracked.value, 30)
        b.value = 1000
        XCTAssertEqual(untracked.value, 30, "peek: read without a dependency")

        let celsius = Observable(20.0)
        let fahrenheit = WritableComputed(get: { celsius.value * 9 / 5 + 32 },
                                          set: { celsius.value = ($0 - 32) * 5 / 9 })
        fahrenheit.value = 212
        XCTAssertEqual(celsius.value, 100)

        let list = ObservableArray([1, 2, 3])
        let diffs = Mutex<[ArrayDiff]>([])
        let t5 = list.observeDiff { diff in diffs.withLock { $0.append(diff) } }
        list.append(4)
        XCTAssertEqual(diffs.withLock { $0 }, [ArrayDiff(inserted: [3])])

        let stream = greeting.changes          // subscribed from here on
        let reader = Task { () -> String? in
            for await change in stream { return change.newValue }
            return nil
        }
        name.value = "async"
        let received = await reader.value
        XCTAssertEqual(received, "Hello, async")

        [t2, binding, b2, b3, b4, t3, t4, t5, watchRight].forEach { $0.cancel() }
    }
}
