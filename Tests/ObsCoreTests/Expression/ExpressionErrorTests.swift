import XCTest
@testable import ObsCore

/// Parse errors: code parse_error, details `pos` (0-based scalar offset), a message saying what
/// was expected; and the nesting limit.
final class ExpressionErrorTests: XCTestCase {
    func test_parseErrors_sayWhatWasExpectedAndWhere() {
        assertParseErrors([
            ("", "expected an expression at 0"),
            ("   ", "expected an expression at 3"),
            ("(1 + 2", "expected ')' at 6"),
            ("len(1, 2", "expected ',' or ')' at 8"),
            ("[1, 2", "expected ',' or ']' at 5"),
            ("[1, 2,]", "expected an expression at 6"),
            ("{a 1}", "expected ':' at 3"),
            ("{a: 1,}", "expected a member name at 6"),
            ("{1: 2}", "expected a member name at 1"),
            ("{a: 1, a: 2}", "duplicate member \"a\" at 7"),
            ("1 2", "expected an operator or the end of the expression at 2"),
            ("$a $b", "expected an operator or the end of the expression at 3"),
            ("1 +", "expected an expression at 3"),
            ("* 2", "expected an expression at 0"),
            ("$a ? 1", "expected ':' at 6"),
            ("$a[1", "expected ']' at 4"),
            ("${a}.1", "expected a member name after '.' at 5"),
            ("\"abc", "unterminated string at 0"),
            ("'abc\"", "unterminated string at 0"),
            ("\"a\\x\"", "invalid escape '\\x' at 2"),
            ("\"\\u12\"", "expected 4 hex digits after \\u at 1"),
            ("\"\\ud800\"", "unpaired surrogate in \\u escape at 1"),
            ("\"\\udc00\"", "unpaired surrogate in \\u escape at 1"),
            ("\"a\nb\"", "control character in string; write it as an escape at 2"),
            ("1 # 2", "unexpected character \"#\" at 2"),
            ("é", "unexpected character \"é\" at 0"),
            ("1 = 1", "expected '==' at 2"),
            ("1 | 1", "expected '||' at 2"),
            ("1 & 1", "expected '&&' at 2"),
            ("01", "leading zeros are not allowed in a number at 0"),
            ("1e", "expected exponent digits at 2"),
            ("1e+", "expected exponent digits at 3"),
            ("1e999", "number out of range at 0"),
            ("-1e999", "number out of range at 0"),
            ("foo", "unknown identifier 'foo' (keys are read with $name) at 0"),
            ("len", "expected '(' after function 'len' at 3"),
            ("True", "unknown identifier 'True' (keys are read with $name) at 0"),
            ("é + 1", "unexpected character \"é\" at 0"),
            ("\"é\" + foo", "unknown identifier 'foo' (keys are read with $name) at 6"),
        ])
    }

    func test_unknownFunctionsAndWrongAritiesAreParseErrors() {
        assertParseErrors([
            ("nope(1)", "unknown function 'nope' at 0"),
            ("1 + Len(\"a\")", "unknown function 'Len' at 4"),
            ("abs()", "abs() takes 1 argument, got 0 at 0"),
            ("abs(1, 2)", "abs() takes 1 argument, got 2 at 0"),
            ("pow(1)", "pow() takes 2 arguments, got 1 at 0"),
            ("round(1, 2, 3)", "round() takes 1 to 2 arguments, got 3 at 0"),
            ("min()", "min() takes at least 1 argument, got 0 at 0"),
            ("format()", "format() takes at least 1 argument, got 0 at 0"),
            ("now(1)", "now() takes 0 arguments, got 1 at 0"),
            ("clamp(1, 2)", "clamp() takes 3 arguments, got 2 at 0"),
            ("$a ? now(1) : 0", "now() takes 0 arguments, got 1 at 5"),
        ])
    }

    func test_nesting_deepInputIsAParseErrorNotAStackOverflow() {
        let limit = ExpressionLimits.maxDepth
        for opener in ["(", "[", "!", "-", "{a:", "abs(", "$a[", "1 ? 1 : "] {
            let source = String(repeating: opener, count: 100_000) + "1"
            XCTAssertThrowsError(try Expression.compile(source), opener) { error in
                XCTAssertEqual((error as? ObsError)?.code, .parseError, opener)
                XCTAssertTrue((error as? ObsError)?.message.hasPrefix("expression nested deeper than \(limit) levels at") ?? false, opener)
            }
        }
    }

    func test_nesting_limitIsExactlyMaxDepth() throws {
        let limit = ExpressionLimits.maxDepth
        // The whole expression is one level and each `(` one more.
        XCTAssertNoThrow(try Expression.compile(String(repeating: "(", count: limit - 1) + "1" + String(repeating: ")", count: limit - 1)))
        assertParseErrors([(String(repeating: "(", count: limit) + "1" + String(repeating: ")", count: limit),
                            "expression nested deeper than \(limit) levels at \(limit)")])
        // A long chain builds a tall tree without recursing; its height is limited too.
        let chain = (0...limit).map { _ in "1" }.joined(separator: "+")
        assertParseErrors([(chain, "expression nested deeper than \(limit) levels at \(2 * limit - 1)")])
        let longest = (0..<limit).map { _ in "1" }.joined(separator: "+")
        XCTAssertEqual(try evaluate(longest), .int(Int64(limit)))
    }

    func test_evalErrors_carryCodePositionAndMessage() throws {
        do throws(ObsError) {
            _ = try evaluate("$s + 1 < 5", TestContext(["s": "x"]))
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual(error.code, .evalError)
            XCTAssertEqual(error.message, "cannot compare string with number at 7")
            XCTAssertEqual(error.details, ["pos": 7])
            XCTAssertEqual(error.description, "eval_error: cannot compare string with number at 7")
        }
    }

    func test_positions_countUnicodeScalars() {
        assertParseErrors([("\"😀é\" +", "expected an expression at 6")])
        assertEvalErrors([("\"😀\" < 1", "cannot compare string with number at 4")])
    }
}
