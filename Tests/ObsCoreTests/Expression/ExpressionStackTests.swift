import Foundation
import XCTest
@testable import ObsCore

/// Expressions at the nesting limit compile, print and evaluate on a thread with a bounded stack.
///
/// Measured at the limit: compiling `[[[...]]]` takes about 250 KiB of stack in a release build
/// and 1.3 MiB in a debug build (which gives every temporary its own slot); evaluation at most
/// 60 KiB in release. The test runs in debug, so it grants 2 MiB.
final class ExpressionStackTests: XCTestCase {
    func test_nestingLimit_fitsInTheStackOfAThread() {
        let depth = ExpressionLimits.maxDepth - 1
        let sources = [
            String(repeating: "(", count: depth) + "1" + String(repeating: ")", count: depth),
            String(repeating: "[", count: depth) + "1" + String(repeating: "]", count: depth),
            String(repeating: "-", count: depth - 1) + "$a",
            String(repeating: "abs(", count: depth - 1) + "-1" + String(repeating: ")", count: depth - 1),
            String(repeating: "$a ? 1 : ", count: depth - 1) + "2",
            (0..<(depth + 1)).map { _ in "$a" }.joined(separator: " + "),
            "$a" + String(repeating: "[0]", count: depth),
        ]
        let done = expectation(description: "evaluated on a small stack")
        nonisolated(unsafe) var results: [String] = []
        let thread = Thread {
            for source in sources {
                do throws(ObsError) {
                    let expression = try Expression.compile(source)
                    let value = try expression.evaluate(in: TestContext(["a": 0]))
                    let reparsed = try Expression.compile(expression.description)
                    results.append(reparsed.tree == expression.tree ? "\(value)" : "round trip differs")
                } catch {
                    results.append("\(error)")
                }
            }
            done.fulfill()
        }
        thread.stackSize = 2048 * 1024
        thread.start()
        wait(for: [done], timeout: 60)
        XCTAssertEqual(results, ["1", "\(String(repeating: "[", count: depth))1\(String(repeating: "]", count: depth))",
                                 "0", "1", "2", "0", "null"])
    }
}
