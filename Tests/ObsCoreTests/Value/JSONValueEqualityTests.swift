import XCTest
import ObsCore

final class JSONValueEqualityTests: XCTestCase {
    func test_equality_numbersCompareByValue() {
        XCTAssertEqual(JSONValue.int(1), .double(1.0))
        XCTAssertNotEqual(JSONValue.int(1), .string("1"))
        XCTAssertNotEqual(JSONValue.int(Int64.max), .double(9223372036854775807.0))
    }

    func test_equality_objectMemberOrderIsInsignificant() {
        let a: JSONValue = .object(["x": .int(1), "y": .array([.null, .bool(true)])])
        let b: JSONValue = .object(["y": .array([.null, .bool(true)]), "x": .double(1)])
        XCTAssertEqual(a, b)
        XCTAssertEqual(a.hashValue, b.hashValue)
    }
}
