import Foundation
import XCTest
@testable import ObsCore

/// Long chains of computed keys restored from storage: evaluated without nesting, so restoring
/// them can neither overflow the stack nor fail for lack of it.
final class DeepChainTests: XCTestCase {
    /// ```
    /// k0 (value) <- k1 = $k0 + 1 <- k2 = $k1 + 1 <- ... <- k49999
    /// ```
    /// stored in key-name order (k0, k1, k10, k100, ...), as a database returns them: evaluating
    /// in that order would nest thousands of evaluations deep.
    func test_load_restoresALongChainInDependencyOrder() throws {
        let length = 50_000
        var state = StoredState(rev: UInt64(length))
        state.keys = [StoredKey(key: "k0", value: 0, rev: 1, createdRev: 1, version: 1)]
        state.definitions = (1..<length).map { StoredDefinition(key: "k\($0)", expr: "$k\($0 - 1) + 1", createdRev: UInt64($0 + 1)) }
            .sorted { $0.key < $1.key }
        let store = try Store(storage: MemoryStorage(state), clock: ManualClock())
        XCTAssertEqual(store.value(forKey: "k\(length - 1)"), .int(Int64(length - 1)))
        XCTAssertEqual(store.value(forKey: "k12345"), 12345)
    }
}

final class StackGuardTests: XCTestCase {
    /// A chain never evaluated, read at its far end on a thread with a small stack: the evaluation
    /// that would overflow the stack fails with eval_error instead, and the process lives on.
    func test_firstEvaluationTooDeepForTheStack_failsInsteadOfCrashing() {
        // 10,000 links: evaluating them nested needs far more than the thread's 4 MiB, and
        // releasing them (closures holding closures, one deinit inside the next) still fits the
        // test thread's stack.
        XCTAssertEqual(readChainFirstTime(links: 10_000, onAThreadWithStack: 4 << 20), ["nested too deeply"])
    }

    /// A thread whose stack is smaller than the guard's reserve (1 MiB here; a program may make
    /// such threads) still evaluates ordinary nesting: 40 computeds read first at the far end.
    /// The guard keeps a part of such a stack free, not more than the whole of it.
    func test_aThreadWithASmallStack_stillNestsOrdinaryDepths() {
        XCTAssertEqual(readChainFirstTime(links: 40, onAThreadWithStack: 1 << 20), ["value 40"])
    }

    /// Builds a chain of `links` computeds after a head, each one more than the one before, none
    /// evaluated, and reads its far end once on a new thread of `stackSize` bytes: what it read,
    /// or the error.
    private func readChainFirstTime(links: Int, onAThreadWithStack stackSize: Int) -> [String] {
        let head = Observable(0)
        var last = Computed { head.value }
        for _ in 0..<links {
            let previous = last
            last = Computed { try previous.get() + 1 }
        }
        let tail = last
        let outcome = Log<String>()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            do {
                outcome.append("value \(try tail.get())")
            } catch ReactiveError.nestedTooDeeply {
                outcome.append("nested too deeply")
            } catch {
                outcome.append("\(error)")
            }
            done.signal()
        }
        thread.stackSize = stackSize
        thread.start()
        done.wait()
        return outcome.entries
    }
}
