import XCTest
@testable import ObsCore

/// Operators, precedence, truthiness and short-circuit evaluation (docs/expressions.md, Semantics).
final class ExpressionOperatorTests: XCTestCase {
    func test_arithmetic_integersStayIntegral() {
        assertEvaluations([
            ("1 + 2", 3), ("5 - 7", -2), ("6 * 7", 42), ("8 / 2", 4), ("7 / 2", 3.5), ("-7 / 2", -3.5),
            ("7 % 3", 1), ("-7 % 3", -1), ("7 % -3", 1), ("-9223372036854775808 % -1", 0),
            ("1.5 + 1", 2.5), ("0.1 + 0.2", .double(0.1 + 0.2)), ("2 * 1.5", 3.0), ("1.0 + 1", .double(2)),
            ("7.5 % 2", 1.5), ("-7.5 % 2", -1.5), ("9 / 3.0", .double(3)), ("-(3)", -3), ("-(-2.5)", 2.5),
            ("- -3", 3), ("--3", 3),
        ])
    }

    func test_arithmetic_overflowIsAnEvalError() {
        assertEvalErrors([
            ("9223372036854775807 + 1", "integer overflow in '+' at 20"),
            ("-9223372036854775808 - 1", "integer overflow in '-' at 21"),
            ("9223372036854775807 * 2", "integer overflow in '*' at 20"),
            ("-9223372036854775808 / -1", "integer overflow in '/' at 21"),
            ("-$m", "integer overflow in '-' at 0"),
        ], keys: ["m": .int(.min)])
    }

    func test_arithmetic_divisionByZeroIsAnEvalError() {
        assertEvalErrors([
            ("1 / 0", "division by zero at 2"), ("1.5 / 0", "division by zero at 4"), ("1 / 0.0", "division by zero at 2"),
            ("1 % 0", "modulo by zero at 2"), ("1.5 % 0.0", "modulo by zero at 4"),
        ])
    }

    func test_arithmetic_nonFiniteResultsAreEvalErrors() {
        assertEvalErrors([
            ("1e308 * 10", "result of '*' is not a finite number at 6"),
            ("1e308 + 1e308", "result of '+' is not a finite number at 6"),
            ("-1e308 - 1e308", "result of '-' is not a finite number at 7"),
            ("1e308 / 1e-308", "result of '/' is not a finite number at 6"),
        ])
    }

    func test_arithmetic_typesOtherThanNumbersAreEvalErrors() {
        assertEvalErrors([
            ("true + 1", "cannot add bool and number at 5"), ("null + null", "cannot add null and null at 5"),
            ("[1] + {}", "cannot add array and object at 4"), ("\"a\" - 1", "cannot subtract string and number at 4"),
            ("2 * \"2\"", "cannot multiply number and string at 2"), ("[] / 1", "cannot divide array and number at 3"),
            ("1 % null", "cannot take the remainder of number and null at 2"), ("-\"x\"", "cannot negate string at 0"),
            ("-null", "cannot negate null at 0"),
        ])
    }

    func test_plus_concatenatesStringsAndArrays() {
        assertEvaluations([
            ("\"a\" + \"b\"", "ab"), ("\"n=\" + 1", "n=1"), ("1.5 + \"x\"", "1.5x"), ("\"\" + null", "null"),
            ("\"v\" + true", "vtrue"), ("\"\" + [1, \"a\"]", "[1,\"a\"]"), ("\"\" + {b: 1, a: 2}", "{\"a\":2,\"b\":1}"),
            ("[1] + [2, 3]", [1, 2, 3]), ("[] + []", []), ("1 + 2 + \"x\"", "3x"), ("\"x\" + 1 + 2", "x12"),
        ])
    }

    func test_equality_isDeepAndStructuralWithoutCoercion() {
        assertEvaluations([
            ("1 == 1.0", true), ("1 == \"1\"", false), ("null == null", true), ("null == false", false),
            ("0 == false", false), ("\"\" == null", false), ("[1, [2]] == [1.0, [2]]", true), ("[1, 2] == [2, 1]", false),
            ("{a: 1, b: 2} == {b: 2, a: 1}", true), ("{a: 1} == {a: 1, b: null}", false), ("1 != 2", true),
            ("\"a\" != \"a\"", false), ("$missing == null", true),
        ])
    }

    func test_comparison_numbersWithNumbersStringsWithStrings() {
        assertEvaluations([
            ("1 < 2", true), ("2 <= 2", true), ("3 > 2.5", true), ("2 >= 2.5", false), ("-1 < -0.5", true),
            ("9007199254740993 > 9007199254740992.0", true), ("9007199254740992 < 9007199254740992.0", false),
            ("9223372036854775807 < 9223372036854775808.0", true), ("\"a\" < \"b\"", true), ("\"B\" < \"a\"", true),
            ("\"ab\" < \"abc\"", true), ("\"é\" > \"z\"", true), ("\"\" >= \"\"", true),
            ("\"\\u00e9\" < \"e\\u0301\"", false),
        ])
        assertEvalErrors([
            ("\"abc\" < 5", "cannot compare string with number at 6"), ("1 >= null", "cannot compare number with null at 2"),
            ("true > false", "cannot compare bool with bool at 5"), ("[1] <= [2]", "cannot compare array with array at 4"),
            ("1 < 2 < 3", "cannot compare bool with number at 6"),
        ])
    }

    func test_truthiness_falsyValuesAreFalseNullZeroEmpty() {
        assertEvaluations([
            ("!false", true), ("!null", true), ("!0", true), ("!0.0", true), ("!\"\"", true), ("![]", true), ("!{}", true),
            ("!true", false), ("!1", false), ("!-0.5", false), ("!\"0\"", false), ("![0]", false), ("!{a: null}", false),
            ("!!$missing", false), ("!!!1", false), ("bool(\"false\")", true),
        ])
    }

    func test_andOr_returnTheDecidingOperand() {
        assertEvaluations([
            ("1 && 2", 2), ("0 && 2", 0), ("null && 2", .null), ("\"\" || \"d\"", "d"), ("\"a\" || \"d\"", "a"),
            ("[] || {}", [:]), ("false || 0", 0), ("$x || \"none\"", "none"), ("1 && 0 || 3", 3),
        ])
    }

    func test_coalesce_replacesOnlyNull() {
        assertEvaluations([
            ("null ?? 1", 1), ("0 ?? 1", 0), ("false ?? 1", false), ("\"\" ?? 1", ""), ("$m ?? $n ?? 3", 3),
            ("$m.x ?? \"n/a\"", "n/a"),
        ])
    }

    func test_conditional_choosesByTruthiness() {
        assertEvaluations([
            ("true ? 1 : 2", 1), ("0 ? 1 : 2", 2), ("[] ? 1 : 2", 2), ("\"x\" ? 1 : 2", 1),
            ("false ? 1 : true ? 2 : 3", 2), ("true ? false ? 1 : 2 : 3", 2), ("null ?? 0 ? \"a\" : \"b\"", "b"),
        ])
    }

    func test_precedence_everyLevelBindsAsDocumented() {
        assertEvaluations([
            ("1 + 2 * 3", 7), ("(1 + 2) * 3", 9), ("10 - 4 - 3", 3), ("100 / 10 / 5", 2), ("2 * 7 % 4", 2),
            ("1 + 2 < 4", true), ("1 < 2 == true", true), ("1 == 1 && 2 == 2", true), ("0 && 1 || 2", 2),
            ("1 || 0 && 0", 1), ("null ?? 0 || 5", 5), ("null ?? 1 ? \"t\" : \"f\"", "t"), ("-2 * 3", -6),
            ("-$a.b", -2), ("!1 == false", true), ("-{a: 4}.a", -4), ("1 - -1", 2), ("2 * -$a.b", -4),
            ("true ? 1 : 0 + 10", 1), ("false ? 1 : 0 + 10", 10), ("1 + (true ? 1 : 0)", 2),
        ], keys: ["a.b": 2])
    }

    func test_shortCircuit_recordsOnlyKeysActuallyRead() throws {
        // `$a ? $b : $c` depends on a and on exactly one of b, c.
        let rows: [(source: String, keys: [String: JSONValue], read: [String])] = [
            ("$a ? $b : $c", ["a": true], ["a", "b"]),
            ("$a ? $b : $c", ["a": 0], ["a", "c"]),
            ("$a && $b", ["a": false], ["a"]),
            ("$a && $b", ["a": 1], ["a", "b"]),
            ("$a || $b", ["a": 1], ["a"]),
            ("$a || $b", [:], ["a", "b"]),
            ("$a ?? $b", ["a": 0], ["a"]),
            ("$a ?? $b", [:], ["a", "b"]),
            ("$a + $b", [:], ["a", "b"]),
            ("true ? $b : $c", [:], ["b"]),
            ("false && $b", [:], []),
            ("null ?? $b", [:], ["b"]),
        ]
        for row in rows {
            let context = TestContext(row.keys)
            _ = try? evaluate(row.source, context)
            XCTAssertEqual(context.dependencies, row.read, "\(row.source) with \(row.keys)")
        }
    }
}
