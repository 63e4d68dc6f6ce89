import XCTest
@testable import ObsCore

/// Every expression the product's contract and docs write (docs/expressions.md, docs/cli.md, docs/protocol.md) works as written.
final class ExpressionSpecExampleTests: XCTestCase {
    private let now = 1_700_000_000.0

    private var context: TestContext {
        TestContext([
            "price": 2.5, "qty": 4, "battery.percent": 15, "volume": 0.75, "weather": ["temp": 12],
            "sensor.a.online": true, "sensor.b.online": false, "sensor.b.temp": 20,
            "cart.items.1": 10, "cart.items.2": 5.5, "build.finished_at": .double(now - 300),
        ], now: now)
    }

    func test_examples_ofExpressionsMd() throws {
        let rows: [(String, JSONValue)] = [
            ("$price * $qty", 10.0),
            ("$battery.percent < 20 ? \"low\" : \"ok\"", "low"),
            ("format(\"{}%\", round($volume * 100))", "75%"),
            ("${weather}.temp ?? \"n/a\"", 12),
            ("len(keys(match(\"sensor.*.online\")))", 2),
            ("sum(values(match(\"cart.items.*\")))", 15.5),
            ("ago($build.finished_at)", "5 minutes ago"),
            ("$battery.percent < 20", true),
        ]
        for (source, expected) in rows {
            XCTAssertTrue(isSame(try evaluate(source, context), expected), source)
        }
        XCTAssertEqual(try evaluate("${weather}.temp ?? \"n/a\"", TestContext()), "n/a")
    }

    func test_example_bindingMapOfCliMd() throws {
        XCTAssertEqual(try evaluate("value ?? \"offline\"", value: nil, allowValue: true), "offline")
        XCTAssertEqual(try evaluate("value ?? \"offline\"", value: "home-5g", allowValue: true), "home-5g")
    }

    func test_example_errorMessageOfExpressionsMd() {
        assertEvalErrors([("\"celsius\" < $t", "cannot compare string with number at 10")], keys: ["t": 7])
    }

    func test_examples_dependOnTheKeysTheyRead() throws {
        let c = context
        _ = try evaluate("$battery.percent < 20 ? \"low\" : \"ok\"", c)
        XCTAssertEqual(c.dependencies, ["battery.percent"])
        XCTAssertTrue(try Expression.compile("ago($build.finished_at)").usesTime)
        XCTAssertFalse(try Expression.compile("$price * $qty").usesTime)
    }
}
