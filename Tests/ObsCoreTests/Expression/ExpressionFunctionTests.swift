import XCTest
@testable import ObsCore

/// Every built-in function of docs/expressions.md, with its normal results and its errors.
final class ExpressionFunctionTests: XCTestCase {
    func test_math_functions() {
        assertEvaluations([
            ("abs(-3)", 3), ("abs(2.5)", 2.5), ("abs(-0.5)", 0.5),
            ("min(3, 1, 2)", 1), ("max(3, 1, 2)", 3), ("min([4, 2.5, 3])", 2.5), ("max([1])", 1), ("min(7)", 7),
            ("min([])", .null), ("max(\"b\", \"a\", \"c\")", "c"), ("min(1, 1.0)", 1), ("max(2.0, 2)", 2.0),
            ("round(2.5)", 3), ("round(-2.5)", -3), ("round(2.4)", 2), ("round(7)", 7), ("round(-0.4)", 0),
            ("round(3.14159, 2)", 3.14), ("round(2.5, 0)", 3.0), ("round(1234, -2)", 1200.0), ("round(-1.005, 1)", -1.0),
            ("round(1.23, 400)", 1.23), ("round(5, -400)", 0.0),
            ("floor(2.7)", 2), ("floor(-2.1)", -3), ("floor(4)", 4), ("ceil(2.1)", 3), ("ceil(-2.7)", -2), ("ceil(4)", 4),
            ("clamp(5, 0, 3)", 3), ("clamp(-1, 0, 3)", 0), ("clamp(1.5, 0, 3)", 1.5), ("clamp(2, 2, 2)", 2),
            ("sqrt(16)", 4.0), ("sqrt(2)", .double(2.0.squareRoot())), ("sqrt(0)", 0.0),
            ("pow(2, 10)", 1024), ("pow(2, -1)", 0.5), ("pow(2.5, 2)", 6.25), ("pow(-2, 3)", -8), ("pow(0, 0)", 1),
            ("pow(9, 0.5)", 3.0), ("pow(1, 9223372036854775807)", 1), ("pow(-1, 9223372036854775807)", -1),
        ])
        assertEvalErrors([
            ("abs(\"x\")", "abs: argument must be a number, got string at 0"),
            ("abs(-9223372036854775808)", "abs: integer overflow at 0"),
            ("min(1, \"a\")", "min: cannot compare string with number at 0"),
            ("max([null])", "max: arguments must be numbers or strings, got null at 0"),
            ("min(true)", "min: arguments must be numbers or strings, got bool at 0"),
            ("max([1, [2]])", "max: cannot compare array with number at 0"),
            ("round(\"1\")", "round: argument must be a number, got string at 0"),
            ("round(1.5, 0.5)", "round: digits must be an integer at 0"),
            ("round(1e300)", "round: result 1e+300 is out of the integer range at 0"),
            ("floor(null)", "floor: argument must be a number, got null at 0"),
            ("ceil(-1e19)", "ceil: result -1e+19 is out of the integer range at 0"),
            ("clamp(1, 3, 2)", "clamp: lo is greater than hi at 0"),
            ("clamp(1, \"a\", 2)", "clamp: lo must be a number, got string at 0"),
            ("sqrt(-1)", "sqrt: square root of a negative number at 0"),
            ("pow(2, 63)", "pow: integer overflow at 0"),
            ("pow(10, 400.0)", "pow: result is not a finite number at 0"),
            ("pow(0, -1)", "pow: result is not a finite number at 0"),
            ("pow(-8, 1 / 3)", "pow: result is not a finite number at 0"),
        ])
    }

    func test_string_functions() {
        assertEvaluations([
            ("len(\"héllo\")", 5), ("len(\"e\\u0301\")", 2), ("len(\"😀\")", 1), ("len([1, 2])", 2), ("len({a: 1})", 1),
            ("len(\"\")", 0), ("upper(\"abc é\")", "ABC É"), ("lower(\"ABC\")", "abc"), ("trim(\"  a b \\n\")", "a b"),
            ("trim(\"   \")", ""), ("contains(\"hello\", \"ell\")", true), ("contains(\"hello\", \"\")", true),
            ("contains(\"hello\", \"xyz\")", false), ("contains([1, \"a\"], 1.0)", true), ("contains([[1]], [1])", true),
            ("contains([1], \"1\")", false), ("contains({a: 1}, \"a\")", true), ("contains(\"e\\u0301\", \"e\")", true),
            ("starts_with(\"hello\", \"he\")", true), ("starts_with(\"hello\", \"lo\")", false),
            ("ends_with(\"hello\", \"lo\")", true), ("ends_with(\"hello\", \"\")", true),
            ("replace(\"a-b-c\", \"-\", \"+\")", "a+b+c"), ("replace(\"aaa\", \"aa\", \"b\")", "ba"),
            ("replace(\"abc\", \"x\", \"y\")", "abc"),
            ("split(\"a,b,,c\", \",\")", ["a", "b", "", "c"]), ("split(\"\", \",\")", [""]), ("split(\"abc\", \"\")", ["a", "b", "c"]),
            ("split(\"a::b\", \"::\")", ["a", "b"]),
            ("join([\"a\", \"b\"], \", \")", "a, b"), ("join([], \"-\")", ""), ("join([1, null, \"x\"], \"/\")", "1/null/x"),
            ("slice(\"hello\", 1, 3)", "el"), ("slice(\"hello\", -3)", "llo"), ("slice(\"hello\", 2, -1)", "ll"),
            ("slice(\"hello\", 10)", ""), ("slice(\"hello\", 3, 1)", ""), ("slice([1, 2, 3, 4], 1)", [2, 3, 4]),
            ("slice([1, 2, 3], -2, 99)", [2, 3]), ("slice(\"héllo\", 1, 2)", "é"),
            ("pad_left(\"5\", 3, \"0\")", "005"), ("pad_left(7, 2, \"0\")", "07"), ("pad_left(\"ab\", 4)", "  ab"),
            ("pad_left(\"abcdef\", 3)", "abcdef"), ("pad_left(\"x\", -1)", "x"),
            ("format(\"{} of {}\", 1, 2)", "1 of 2"), ("format(\"{1}{0}{1}\", \"a\", \"b\")", "bab"),
            ("format(\"{:.2f}\", 3.14159)", "3.14"), ("format(\"{0:.1f}/{1:.0f}\", 2, 2.5)", "2.0/2"),
            ("format(\"{{}} {{{}}}\", 1)", "{} {1}"), ("format(\"{}%\", 75)", "75%"), ("format(\"plain\")", "plain"),
            ("format(\"{} {}\", \"s\", [1, {a: true}])", "s [1,{\"a\":true}]"), ("format(\"{:.3f}\", -0.0005)", "-0.001"),
        ])
        assertEvalErrors([
            ("len(5)", "len: argument must be a string, array or object, got number at 0"),
            ("upper(1)", "upper: argument must be a string, got number at 0"),
            ("lower(null)", "lower: argument must be a string, got null at 0"),
            ("trim([])", "trim: argument must be a string, got array at 0"),
            ("contains(1, 1)", "contains: first argument must be a string, array or object, got number at 0"),
            ("contains(\"a\", 1)", "contains: the second argument must be a string, got number at 0"),
            ("starts_with(1, \"a\")", "starts_with: argument must be a string, got number at 0"),
            ("ends_with(\"a\", null)", "ends_with: argument must be a string, got null at 0"),
            ("replace(\"a\", \"\", \"b\")", "replace: from must not be empty at 0"),
            ("replace(\"a\", \"a\", 1)", "replace: to must be a string, got number at 0"),
            ("split(\"a\", 1)", "split: separator must be a string, got number at 0"),
            ("join(\"ab\", \"\")", "join: argument must be an array, got string at 0"),
            ("slice(1, 0)", "slice: first argument must be a string or an array, got number at 0"),
            ("slice(\"a\", 0.5)", "slice: start must be an integer at 0"),
            ("pad_left(\"a\", 3, \"ab\")", "pad_left: fill must be exactly one character at 0"),
            ("pad_left(\"a\", 2000000)", "pad_left: width is over 1048576 at 0"),
            ("format(\"{}\")", "format: placeholder {} refers to argument 0, but only 0 were given at 0"),
            ("format(\"{5}\", 1)", "format: placeholder {5} refers to argument 5, but only 1 were given at 0"),
            ("format(\"{\", 1)", "format: unclosed '{' in format string at offset 0 at 0"),
            ("format(\"a}\", 1)", "format: unmatched '}' in format string at offset 1; write '}}' for a brace at 0"),
            ("format(\"{:x}\", 1)", "format: bad placeholder {:x} in format string at offset 0; precision is written {:.2f} at 0"),
            ("format(\"{a}\", 1)", "format: bad placeholder {a} in format string at offset 0 at 0"),
            ("format(\"{:.2f}\", \"x\")", "format: {:.2f} needs a number, got string at 0"),
            ("format(\"{:.101f}\", 1)", "format: precision 101 is over 100 at 0"),
            ("format(1)", "format: format must be a string, got number at 0"),
        ])
    }

    func test_type_functions() {
        assertEvaluations([
            ("string(\"a\")", "a"), ("string(1)", "1"), ("string(2.5)", "2.5"), ("string(null)", "null"),
            ("string(true)", "true"), ("string([1, \"a\"])", "[1,\"a\"]"), ("string({b: 1, a: [] })", "{\"a\":[],\"b\":1}"),
            ("number(\"42\")", 42), ("number(\" 2.5 \")", 2.5), ("number(\"-1e3\")", .double(-1000)), ("number(7)", 7),
            ("number(true)", 1), ("number(false)", 0),
            ("int(2.9)", 2), ("int(-2.9)", -2), ("int(\"7.8\")", 7), ("int(5)", 5), ("int(true)", 1),
            ("bool(0)", false), ("bool(\"x\")", true), ("bool([])", false), ("bool({a: 1})", true),
            ("type(null)", "null"), ("type(true)", "bool"), ("type(1)", "number"), ("type(1.5)", "number"),
            ("type(\"\")", "string"), ("type([])", "array"), ("type({})", "object"), ("type($missing)", "null"),
            ("json(\"a\")", "\"a\""), ("json({x: [1, null]})", "{\"x\":[1,null]}"), ("json(1)", "1"),
            ("parse(\"[1, 2.5, {\\\"a\\\": null}]\")", [1, 2.5, ["a": .null]]), ("parse(\"\\\"s\\\"\")", "s"),
            ("parse(json({a: [1]}))", ["a": [1]]),
        ])
        assertEvalErrors([
            ("number(\"abc\")", "number: cannot convert \"abc\" to a number at 0"),
            ("number(\"nan\")", "number: cannot convert \"nan\" to a number at 0"),
            ("number(\"0x10\")", "number: cannot convert \"0x10\" to a number at 0"),
            ("number(\"1e400\")", "number: cannot convert \"1e400\" to a number at 0"),
            ("number(\"1 2\")", "number: cannot convert \"1 2\" to a number at 0"),
            ("number(\"[1]\")", "number: cannot convert \"[1]\" to a number at 0"),
            ("number(null)", "number: cannot convert null to a number at 0"),
            ("number([1])", "number: cannot convert array to a number at 0"),
            ("int(1e300)", "int: result 1e+300 is out of the integer range at 0"),
            ("int({})", "int: cannot convert object to a number at 0"),
            ("parse(1)", "parse: argument must be a string, got number at 0"),
        ])
        assertFails("parse(\"[1,\")", .evalError, "parse: invalid JSON (\(jsonError("[1,"))) at 0")
    }

    func test_collection_functions() {
        let keys: [String: JSONValue] = ["o": ["b": 2, "a": 1, "c": ["d": [10, 20]]]]
        assertEvaluations([
            ("keys(${o})", ["a", "b", "c"]), ("values({z: 1, y: 2})", [2, 1]), ("keys({})", []),
            ("keys({\"B\": 0, \"a\": 0, \"é\": 0, \"Z\": 0})", ["B", "Z", "a", "é"]),
            ("sum([1, 2, 3])", 6), ("sum([1, 2.5])", 3.5), ("sum([])", 0),
            ("avg([1, 2, 3])", 2), ("avg([1, 2])", 1.5), ("avg([])", .null),
            ("sort([3, 1, 2.5])", [1, 2.5, 3]), ("sort([\"b\", \"a\", \"B\"])", ["B", "a", "b"]), ("sort([])", []),
            ("reverse([1, 2, 3])", [3, 2, 1]), ("reverse(\"abc\")", "cba"),
            ("first([1, 2])", 1), ("first([])", .null), ("last([1, 2])", 2), ("last([])", .null),
            ("unique([1, 2, 1.0, \"1\", 2, [1], [1]])", [1, 2, "1", [1]]),
            ("get(${o}, \"c.d.1\")", 20), ("get(${o}, \"c.d.-1\")", 20), ("get(${o}, \"a\")", 1),
            ("get(${o}, \"x.y\", \"dflt\")", "dflt"), ("get(${o}, \"c.d.5\")", .null), ("get(${o}, \"a.b\", 0)", 0),
            ("get(${o}, \"\")", ["b": 2, "a": 1, "c": ["d": [10, 20]]]), ("get({a: null}, \"a\", 5)", .null),
        ], keys: keys)
        assertEvalErrors([
            ("keys([1])", "keys: argument must be an object, got array at 0"),
            ("values(\"a\")", "values: argument must be an object, got string at 0"),
            ("sum([1, \"2\"])", "sum: can only sum numbers, not string at 0"),
            ("sum([9223372036854775807, 1])", "integer overflow in '+' at 0"),
            ("avg(null)", "avg: argument must be an array, got null at 0"),
            ("sort([1, \"a\"])", "sort: can only sort numbers or strings, not string among them at 0"),
            ("sort([null])", "sort: can only sort numbers or strings, not null among them at 0"),
            ("reverse(1)", "reverse: argument must be an array or a string, got number at 0"),
            ("first({})", "first: argument must be an array, got object at 0"),
            ("last(\"ab\")", "last: argument must be an array, got string at 0"),
            ("unique(1)", "unique: argument must be an array, got number at 0"),
            ("get({}, 1)", "get: path must be a string, got number at 0"),
        ])
    }

    func test_key_functions_rejectNonStringNames() {
        assertEvalErrors([
            ("peek(1)", "peek: key name must be a string, got number at 0"),
            ("exists(null)", "exists: key name must be a string, got null at 0"),
            ("match([])", "match: pattern must be a string, got array at 0"),
        ])
    }

    func test_functionPosition_isTheCallsName() {
        assertEvalErrors([("1 + abs(\"x\")", "abs: argument must be a number, got string at 4")])
    }

    func test_everyFunctionOfTheSpec_exists() {
        let spec = """
            abs min max round floor ceil clamp sqrt pow len upper lower trim contains starts_with ends_with \
            replace split join slice pad_left format string number int bool type json parse keys values sum avg \
            sort reverse first last unique get peek exists match now ago time_format
            """
        XCTAssertEqual(Builtin.all.map(\.name), spec.split(separator: " ").map(String.init).sorted())
    }

    private func jsonError(_ text: String) -> String {
        do throws(JSONParseError) {
            _ = try JSONValue.parse(text)
            return ""
        } catch {
            return "\(error.message) at byte \(error.offset)"
        }
    }
}
