import ObsClient
import ObsCore
@testable import ObsctlCore
import XCTest

final class ArgumentParsingTests: XCTestCase {
    func test_valueArgument_isJSONWhenItParses_elseString() {
        XCTAssertEqual(ValueArgument.parse("42"), .int(42))
        XCTAssertEqual(ValueArgument.parse("true"), .bool(true))
        XCTAssertEqual(ValueArgument.parse("null"), .null)
        XCTAssertEqual(ValueArgument.parse("\"x\""), .string("x"))
        XCTAssertEqual(ValueArgument.parse("[1]"), .array([.int(1)]))
        XCTAssertEqual(ValueArgument.parse("{\"a\":1}"), .object(["a": .int(1)]))
        XCTAssertEqual(ValueArgument.parse("hello world"), .string("hello world"))
        XCTAssertEqual(ValueArgument.parse("{bad"), .string("{bad"))
        XCTAssertEqual(ValueArgument.parse("42", mode: .string), .string("42"))
        XCTAssertNil(ValueArgument.parse("{bad", mode: .json))
        XCTAssertEqual(ValueArgument.parse("1.5", mode: .json), .double(1.5))
    }

    func test_durations() {
        XCTAssertEqual(DurationText.seconds("250ms"), 0.25)
        XCTAssertEqual(DurationText.seconds("5s"), 5)
        XCTAssertEqual(DurationText.seconds("2m"), 120)
        XCTAssertEqual(DurationText.seconds("1h"), 3600)
        XCTAssertEqual(DurationText.seconds("10"), 10)
        XCTAssertEqual(DurationText.seconds("0.5"), 0.5)
        for bad in ["", "s", "ms", "-1", "inf", "nan", "1x", "1.2.3", "5 s", "."] {
            XCTAssertNil(DurationText.seconds(bad), bad)
        }
    }
}
