import Foundation
import Synchronization
import XCTest
@testable import ObsCore

/// Transactions seen from outside: nested batches, bindings inside a diamond, a failing batch,
/// errors that change what a computed reads.
final class GlitchTests: XCTestCase {
    /// ```
    ///   a   b
    ///    \ /
    ///    sum      (a written in an outer batch, b in an inner one)
    /// ```
    func test_nestedBatch_isOneTransaction() {
        let a = Observable(1), b = Observable(2)
        let runs = Counter()
        let sum = Computed { runs.bump(); return a.value + b.value }
        let seen = Log<Int>()
        let token = sum.observe { seen.append($0.newValue) }
        let inside = batch { () -> Int in
            a.value = 10
            batch { b.value = 20 }
            XCTAssertEqual(seen.entries, [], "nothing delivered before the outer batch ends")
            return sum.value
        }
        XCTAssertEqual(inside, 30)
        XCTAssertEqual(seen.entries, [30])
        XCTAssertEqual(runs.count, 2, "once at subscription, once for the batch")
        token.cancel()
    }

    /// A binding's target changes in the same transaction as its source, so a computed reading
    /// both never sees one without the other, and runs once per change.
    /// ```
    ///     a ──bind(×2)──> t
    ///      \             /
    ///       sum = a + t        (observed)
    /// ```
    func test_bindingInsideADiamond_isNeverSeenHalfDone() {
        let a = Observable(1), t = Observable(0)
        let binding = bind(a, to: t, transform: { $0 * 2 })
        let runs = Counter()
        let sum = Computed { runs.bump(); return a.value + t.value }
        let seen = Log<Int>()
        let token = sum.observe { seen.append($0.newValue) }
        runs.reset()
        for value in 2...5 { a.value = value }
        batch { a.value = 6; a.value = 7 }
        XCTAssertEqual(seen.entries, [6, 9, 12, 15, 21], "always 3 × a: never a mix")
        XCTAssertEqual(runs.count, 5, "once per transaction")
        [binding, token].forEach { $0.cancel() }
    }

    /// A batch whose body throws keeps the writes made before the throw, delivers them as one
    /// change, and leaves the engine usable.
    func test_throwingBatch_deliversItsWritesOnceAndLeavesTheEngineUsable() {
        struct Stop: Error {}
        let a = Observable(0), b = Observable(0)
        let sum = Computed { a.value + b.value }
        let seen = Log<Int>()
        let token = sum.observe { seen.append($0.newValue) }
        XCTAssertThrowsError(try batch {
            a.value = 1
            b.value = 2
            throw Stop()
        })
        XCTAssertEqual(seen.entries, [3])
        a.value = 10
        XCTAssertEqual(seen.entries, [3, 12])
        let done = expectation(description: "another thread can write")
        DispatchQueue.global().async {
            b.value = 20
            done.fulfill()
        }
        wait(for: [done], timeout: 30)
        XCTAssertEqual(sum.value, 30)
        token.cancel()
    }

    /// A computed that fails before reading a value it read on its last run drops it: writes to it
    /// no longer rerun the computed; and it recovers when what it still reads changes.
    func test_failureThatSkipsARead_dropsThatDependency() {
        struct Off: Error {}
        let enabled = Observable(true), payload = Observable(1)
        let runs = Counter()
        let reader = Computed { () throws -> Int in
            runs.bump()
            guard enabled.value else { throw Off() }
            return payload.value
        }
        let errors = Counter()
        let seen = Log<Int>()
        let token = reader.observe(onError: { _ in errors.bump() }) { seen.append($0.newValue) }
        enabled.value = false
        XCTAssertEqual(errors.count, 1)
        XCTAssertNil(payload.subs, "the failed run did not read it")
        let before = runs.count
        payload.value = 2
        XCTAssertEqual(runs.count, before)
        enabled.value = true
        XCTAssertEqual(seen.entries, [2])
        XCTAssertNotNil(payload.subs)
        token.cancel()
    }

    /// A diamond whose one branch fails: the bottom runs once per transaction, its observer gets the
    /// error once, and the recovery once, with both branches' new values.
    /// ```
    ///        a
    ///       / \
    ///   left   right   (right throws while a < 0)
    ///       \ /
    ///      bottom      (observed, onError)
    /// ```
    func test_diamondWithAFailingBranch_failsAndRecoversOncePerTransaction() {
        struct Negative: Error, Equatable {}
        let a = Observable(1)
        let left = Computed { a.value * 10 }
        let right = Computed { () throws -> Int in
            if a.value < 0 { throw Negative() }
            return a.value
        }
        let runs = Counter()
        let bottom = Computed { () throws -> Int in
            runs.bump()
            return try left.get() + right.get()
        }
        let seen = Log<String>()
        let token = bottom.observe(onError: { seen.append("error \($0 is Negative)") }) { seen.append("value \($0.newValue)") }
        runs.reset()
        a.value = -1
        a.value = -2
        a.value = 3
        XCTAssertEqual(seen.entries, ["error true", "value 33"], "the second failure is the same error: no new event")
        XCTAssertEqual(runs.count, 3)
        token.cancel()
    }
}
