import XCTest
@testable import ObsCore

/// Constant folding: pure constant parts are computed at compile time, failing parts fail at
/// evaluation, and folding never changes a result, an error or the keys read.
final class ExpressionFoldingTests: XCTestCase {
    func test_folding_replacesPureConstantSubtreesByTheirValue() throws {
        for source in ["1 + 2 * 3", "[1, {a: len(\"xy\")}]", "upper(\"a\") + string(2)", "true ? 1 : $x", "null ?? 5",
                       "false && $x", "-(3)", "!0", "{a: [1, 2]}.a[-1]", "round(2.5) == 3"] {
            XCTAssertTrue(try Expression.compile(source).root is EvalConstant, source)
        }
        for source in ["$a + 1", "now()", "peek(\"a\")", "exists(\"a\")", "match(\"a.*\")", "ago(0)",
                       "time_format(0, \"%Y\")", "$a && 1", "1 / 0"] {
            XCTAssertFalse(try Expression.compile(source).root is EvalConstant, source)
        }
    }

    func test_folding_defersErrorsToEvaluation() throws {
        let expression = try Expression.compile("[1, 2 / 0]")
        XCTAssertThrowsError(try expression.evaluate(in: TestContext())) { error in
            XCTAssertEqual((error as? ObsError)?.message, "division by zero at 6")
        }
    }

    func test_folding_changesNoResultErrorOrDependency() {
        let keys: [String: JSONValue] = ["a": 3, "b": "text", "a.b": [1, 2.5, "x"], "n": ["x": ["temp": 20]], "x-1": .null]
        for seed in UInt64(1)...2_000 {
            var generator = TreeGenerator(seed: seed)
            let tree = generator.tree(depth: 5)
            let folded = ObsCore.Expression(source: "", syntax: tree)
            let unfolded = ObsCore.Expression(source: "", syntax: tree, folding: false)
            let (foldedContext, unfoldedContext) = (TestContext(keys), TestContext(keys))
            let a = Result { () throws(ObsError) in try folded.evaluate(in: foldedContext, value: ["x": 1]) }
            let b = Result { () throws(ObsError) in try unfolded.evaluate(in: unfoldedContext, value: ["x": 1]) }
            switch (a, b) {
            case let (.success(x), .success(y)): XCTAssertTrue(isSame(x, y), "seed \(seed): \(folded)")
            case let (.failure(x), .failure(y)): XCTAssertEqual(x, y, "seed \(seed): \(folded)")
            default: XCTFail("seed \(seed): \(folded) gave \(a) folded, \(b) unfolded")
            }
            XCTAssertEqual(foldedContext.dependencies, unfoldedContext.dependencies, "seed \(seed): \(folded)")
            XCTAssertEqual(foldedContext.peeked, unfoldedContext.peeked, "seed \(seed): \(folded)")
        }
    }
}
