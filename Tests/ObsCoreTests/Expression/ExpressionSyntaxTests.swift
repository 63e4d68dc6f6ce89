import XCTest
@testable import ObsCore

/// Literals, key references, member and index access, and `value` (docs/expressions.md, Syntax).
final class ExpressionSyntaxTests: XCTestCase {
    func test_literals_evaluateToTheirValues() {
        assertEvaluations([
            ("1", 1), ("-2.5", -2.5), ("1e3", .double(1000)), ("1E-2", 0.01), ("0", 0), ("-0", 0),
            ("2.50", 2.5), ("9223372036854775807", .int(.max)), ("-9223372036854775808", .int(.min)),
            ("9223372036854775808", .double(9223372036854775808.0)),
            ("\"hi\"", "hi"), ("'hi'", "hi"), ("'say \"x\"'", "say \"x\""), ("\"it's\"", "it's"),
            ("'it\\'s'", "it's"), ("\"a\\nb\\t\\\"\\\\\\/\"", "a\nb\t\"\\/"), ("\"\\u00e9\\ud83d\\ude00\"", "é😀"),
            ("\"é\"", "é"), ("true", true), ("false", false), ("null", .null),
            ("[]", []), ("[1, \"a\", [null]]", [1, "a", [.null]]),
            ("{}", [:]), ("{\"x\": 1, y: 2, 'z w': 3}", ["x": 1, "y": 2, "z w": 3]),
            ("{true: 1, null: 2, value: 3}", ["true": 1, "null": 2, "value": 3]),
            (" \t\n( 1 )\r\n", 1),
        ])
    }

    func test_keyReference_readsTheKeyAndMissingIsNull() {
        let keys: [String: JSONValue] = ["a": 1, "a.b": 2, "sensor.kitchen.temp": 21.5, "net.wifi-5g.ssid": "home",
                                         "weather": ["temp": 12], "x_1": 3]
        assertEvaluations([
            ("$a", 1), ("$a.b", 2), ("$sensor.kitchen.temp", 21.5), ("${net.wifi-5g.ssid}", "home"),
            ("${a}", 1), ("${weather}.temp", 12), ("$weather.temp", .null), ("$x_1", 3),
            ("$missing", .null), ("$a-1", 0), ("$a -1", 0), ("$a.b-1", 1), ("${a.b}", 2),
        ], keys: keys)
    }

    func test_keyReference_missingKeyIsStillADependency() throws {
        let context = TestContext()
        XCTAssertEqual(try evaluate("$nope", context), .null)
        XCTAssertEqual(context.dependencies, ["nope"])
    }

    func test_keyReference_nameNeverEndsInADot() throws {
        XCTAssertEqual(try Expression.compile("$a.b").tree, try Expression.compile("${a.b}").tree)
        assertParseErrors([
            ("$a.", "expected a member name after '.' at 3"),
            ("$a..b", "expected a member name after '.' at 3"),
            ("$", "expected key name after '$' at 1"),
            ("$-a", "expected key name after '$' at 1"),
            ("${}", "invalid key name \"\" at 2"),
            ("${a b}", "invalid key name \"a b\" at 2"),
            ("${a..b}", "invalid key name \"a..b\" at 2"),
            ("${a", "expected '}' at 3"),
            ("$" + String(repeating: "k", count: 257), "invalid key name \"\(String(repeating: "k", count: 257))\" at 1"),
        ])
    }

    func test_memberAccess_missingMembersAndIndexesAreNull() {
        let keys: [String: JSONValue] = ["o": ["a": ["b": [10, 20, 30]], "k": "a"], "arr": [1, 2, 3], "s": "abc"]
        assertEvaluations([
            ("${o}.a.b[0]", 10), ("${o}[\"a\"][\"b\"][2]", 30), ("${o}.a.b[-1]", 30), ("${o}.a.b[-3]", 10),
            ("${o}.a.b[-4]", .null), ("${o}.a.b[3]", .null), ("${o}.a.b[1.0]", 20), ("${o}.a.b[0.5]", .null),
            ("${o}.nope", .null), ("${o}.nope.deeper", .null), ("${o}[${o}.k].b[1]", 20),
            ("$arr[\"x\"]", .null), ("${o}[0]", .null), ("$s[0]", .null), ("${s}.length", .null),
            ("$missing.x", .null), ("${missing}.x[3]", .null), ("{a: 1}.a", 1), ("[1, 2][1]", 2),
            ("{\"a b\": 1}[\"a b\"]", 1), ("{true: 5}.true", 5), ("1.x", .null),
        ], keys: keys)
    }

    func test_value_isTheBoundValueInBindingMaps() throws {
        XCTAssertEqual(try evaluate("value ?? \"offline\"", value: nil, allowValue: true), "offline")
        XCTAssertEqual(try evaluate("value ?? \"offline\"", value: "home", allowValue: true), "home")
        XCTAssertEqual(try evaluate("value * 2 + $k", TestContext(["k": 1]), value: 20, allowValue: true), 41)
        XCTAssertEqual(try evaluate("value.x", value: ["x": 7], allowValue: true), 7)
    }

    func test_value_isAParseErrorOutsideBindingMaps() {
        assertParseErrors([
            ("value", "'value' is only allowed in binding maps at 0"),
            ("1 + value", "'value' is only allowed in binding maps at 4"),
        ])
    }

    func test_whitespace_isFreeBetweenTokens() {
        assertEvaluations([("len ( [ 1 , 2 ] )", 2), ("1+2*3", 7), ("$a?1:2", 2), ("{a:1}.a", 1)])
    }

    func test_peek_readsWithoutDependency() throws {
        let context = TestContext(["a": 1, "b": 2])
        XCTAssertEqual(try evaluate("peek(\"a\") + $b", context), 3)
        XCTAssertEqual(context.dependencies, ["b"])
        XCTAssertEqual(context.peeked, ["a"])
        XCTAssertEqual(try evaluate("peek(\"zz\")", TestContext()), .null)
    }

    func test_exists_isADependency() throws {
        let context = TestContext(["a": .null])
        XCTAssertEqual(try evaluate("[exists(\"a\"), exists(\"b\")]", context), [true, false])
        XCTAssertEqual(context.dependencies, ["a", "b"])
    }

    func test_match_returnsMatchingKeysInNameOrder() throws {
        let context = TestContext([
            "sensor.a.online": true, "sensor.b.online": false, "sensor.b.temp": 3, "sensor": 0,
            "cart.items.1": 5, "cart.items.2": 7.5, "other": 1,
        ])
        XCTAssertTrue(isSame(try evaluate("match(\"sensor.*.online\")", context),
                             ["sensor.a.online": true, "sensor.b.online": false]))
        XCTAssertEqual(try evaluate("keys(match(\"sensor.**\"))", context),
                       ["sensor", "sensor.a.online", "sensor.b.online", "sensor.b.temp"])
        XCTAssertEqual(try evaluate("len(match(\"**\"))", context), 7)
        XCTAssertEqual(try evaluate("match(\"nothing.*\")", context), [:])
        XCTAssertEqual(context.patterns, ["sensor.*.online", "sensor.**", "**", "nothing.*"])
        assertFails("match(\"a..b\")", .evalError, "match: bad pattern \"a..b\" at 0")
    }

    func test_keyErrors_passThroughWithTheirCode() {
        let context = TestContext()
        context.failing["bad"] = ObsError(.evalError, "key bad: division by zero at 3")
        context.failing["loop"] = ObsError(.cycle, "cycle: a -> loop -> a", details: ["path": ["a", "loop", "a"]])
        XCTAssertThrowsError(try evaluate("$bad + 1", context)) { error in
            XCTAssertEqual(error as? ObsError, context.failing["bad"])
        }
        XCTAssertThrowsError(try evaluate("peek(\"loop\")", context)) { error in
            XCTAssertEqual((error as? ObsError)?.code, .cycle)
        }
        XCTAssertEqual(try evaluate("false && $bad", context), false)
    }

    func test_referencedKeys_listsEveryKeyReferenceReadOrNot() throws {
        XCTAssertEqual(try Expression.compile("$a ? ${b-1}.x : $c.d + peek(\"e\")").referencedKeys, ["a", "b-1", "c.d"])
        XCTAssertEqual(try Expression.compile("1 + 2").referencedKeys, [])
    }
}
