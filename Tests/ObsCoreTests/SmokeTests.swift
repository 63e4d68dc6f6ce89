import XCTest
import Synchronization
@testable import ObsCore

final class SmokeTests: XCTestCase {
    func test_smoke() throws {
        let name = Observable("world")
        let greeting = Computed { "Hello, " + name.value }
        let seen = Mutex<[String]>([])
        let token = greeting.observe { change in seen.withLock { $0.append(change.newValue) } }
        name.value = "Swift"
        XCTAssertEqual(seen.withLock { $0 }, ["Hello, Swift"])
        name.value = "Swift"
        XCTAssertEqual(seen.withLock { $0 }, ["Hello, Swift"])
        token.cancel()
        name.value = "again"
        XCTAssertEqual(seen.withLock { $0 }, ["Hello, Swift"])
        XCTAssertEqual(greeting.value, "Hello, again")

        let a = Observable(1), b = Observable(2)
        let sum = Computed { a.value + b.value }
        let evals = Mutex(0)
        let diamond = Computed { evals.withLock { $0 += 1 }; return sum.value * a.value }
        let runs = Mutex(0)
        let t2 = diamond.observe(initial: true) { _ in runs.withLock { $0 += 1 } }
        XCTAssertEqual(runs.withLock { $0 }, 1)
        batch { a.value = 10; b.value = 20 }
        XCTAssertEqual(runs.withLock { $0 }, 2)
        XCTAssertEqual(evals.withLock { $0 }, 2)
        XCTAssertEqual(diamond.value, 300)
        _ = t2
    }
}
