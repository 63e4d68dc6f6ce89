import XCTest
import ObsCore

/// Literals and typed accessors.
final class JSONValueAccessorsTests: XCTestCase {
    func test_literals_buildTheMatchingCases() {
        XCTAssertEqual(nil as JSONValue, .null)
        XCTAssertEqual(true as JSONValue, .bool(true))
        XCTAssertEqual(7 as JSONValue, .int(7))
        XCTAssertEqual(2.5 as JSONValue, .double(2.5))
        XCTAssertEqual("s" as JSONValue, .string("s"))
        XCTAssertEqual([1, "a"] as JSONValue, .array([.int(1), .string("a")]))
        XCTAssertEqual(["k": nil] as JSONValue, .object(["k": .null]))
        if case .double = (1.0 as JSONValue) {} else { XCTFail("1.0 is not a double literal") }
    }

    func test_accessors_answerOnlyForTheirKind() {
        let object: JSONValue = ["s": "text", "i": 3, "d": 2.5, "b": false, "a": [1], "n": nil]
        XCTAssertEqual(object["s"]?.stringValue, "text")
        XCTAssertEqual(object["i"]?.intValue, 3)
        XCTAssertEqual(object["b"]?.boolValue, false)
        XCTAssertEqual(object["a"]?.arrayValue, [1])
        XCTAssertEqual(object["n"]?.isNull, true)
        XCTAssertEqual(object.objectValue?.count, 6)
        XCTAssertNil(object["missing"])
        XCTAssertNil(JSONValue.array([1])["s"])
        XCTAssertNil(object["s"]?.intValue)
        XCTAssertNil(object["i"]?.stringValue)
        XCTAssertNil(object["n"]?.boolValue)
        XCTAssertNil(object["a"]?.objectValue)
        XCTAssertNil(object["s"]?.arrayValue)
        XCTAssertEqual(object["s"]?.isNull, false)
    }

    func test_accessors_intValueIsOnlyForIntegers() {
        XCTAssertNil(JSONValue.double(3.0).intValue)
        XCTAssertEqual(JSONValue.int(-5).intValue, -5)
    }

    func test_accessors_doubleValueCoversIntegers() {
        XCTAssertEqual(JSONValue.double(2.5).doubleValue, 2.5)
        XCTAssertEqual(JSONValue.int(4).doubleValue, 4.0)
        XCTAssertEqual(JSONValue.int(.max).doubleValue, 9223372036854775808.0)
        XCTAssertNil(JSONValue.string("4").doubleValue)
    }

    func test_accessors_typeNameMatchesTheExpressionLanguage() {
        let values: [JSONValue] = [nil, true, 1, 1.5, "s", [], [:]]
        XCTAssertEqual(values.map(\.typeName), ["null", "bool", "number", "number", "string", "array", "object"])
    }
}
