import XCTest
import ObsCore

/// The canonical compact encoding: one byte sequence per value, the same for equal values.
final class JSONEncodingTests: XCTestCase {
    func test_encode_writesScalarsCompactly() {
        XCTAssertEqual(JSONValue.null.encoded, "null")
        XCTAssertEqual(JSONValue.bool(true).encoded, "true")
        XCTAssertEqual(JSONValue.bool(false).encoded, "false")
        XCTAssertEqual(JSONValue.int(0).encoded, "0")
        XCTAssertEqual(JSONValue.int(-42).encoded, "-42")
        XCTAssertEqual(JSONValue.int(.max).encoded, "9223372036854775807")
        XCTAssertEqual(JSONValue.int(.min).encoded, "-9223372036854775808")
    }

    func test_encode_writesNoWhitespace() {
        let value: JSONValue = ["a": [1, "x", nil, [:], []], "b": ["c": true]]
        XCTAssertEqual(value.encoded, #"{"a":[1,"x",null,{},[]],"b":{"c":true}}"#)
    }

    func test_encode_sortsMembersByUTF8Bytes() {
        let value: JSONValue = ["b": 1, "a": 2, "B": 3, "": 4, "aa": 5, "é": 6, "z": 7, "😀": 8, "\u{FFFD}": 9]
        XCTAssertEqual(value.encoded, #"{"":4,"B":3,"a":2,"aa":5,"b":1,"z":7,"é":6,"�":9,"😀":8}"#)
    }

    func test_encode_isIndependentOfInsertionOrder() {
        var forward: [String: JSONValue] = [:]
        var backward: [String: JSONValue] = [:]
        let names = (0..<200).map { "key\($0 * 7919 % 1000)" }
        for (i, name) in names.enumerated() { forward[name] = .int(Int64(i)) }
        for (i, name) in names.enumerated().reversed() { backward[name] = .int(Int64(i)) }
        XCTAssertEqual(JSONValue.object(forward).encoded, JSONValue.object(backward).encoded)
    }

    func test_encode_escapesQuoteBackslashAndControlCharacters() {
        XCTAssertEqual(JSONValue.string("a\"b\\c").encoded, #""a\"b\\c""#)
        XCTAssertEqual(JSONValue.string("\u{8}\u{C}\n\r\t").encoded, #""\b\f\n\r\t""#)
        XCTAssertEqual(JSONValue.string("\u{0}\u{1}\u{1F}\u{1B}").encoded, #""\u0000\u0001\u001f\u001b""#)
        XCTAssertEqual(JSONValue.object(["\n": 1]).encoded, #"{"\n":1}"#)
    }

    func test_encode_writesSlashDeleteAndNonASCIIRaw() {
        XCTAssertEqual(JSONValue.string("a/b").encoded, #""a/b""#)
        XCTAssertEqual(JSONValue.string("\u{7F}").encoded, "\"\u{7F}\"")
        XCTAssertEqual(JSONValue.string("grüße 日本 🎉 \u{2028}").encoded, "\"grüße 日本 🎉 \u{2028}\"")
        var buffer: [UInt8] = []
        JSONValue.string("é").encode(into: &buffer)
        XCTAssertEqual(buffer, [0x22, 0xC3, 0xA9, 0x22])
    }

    func test_encode_writesIntegralDoublesAsIntegers() {
        XCTAssertEqual(JSONValue.double(1.0).encoded, "1")
        XCTAssertEqual(JSONValue.double(-3.0).encoded, "-3")
        XCTAssertEqual(JSONValue.double(1e15).encoded, "1000000000000000")
        XCTAssertEqual(JSONValue.double(9007199254740992.0).encoded, "9007199254740992")
        XCTAssertEqual(JSONValue.double(-9223372036854775808.0).encoded, "-9223372036854775808")
        XCTAssertEqual(JSONValue.double(1.0).encoded, JSONValue.int(1).encoded)
    }

    func test_encode_writesMinusZeroAsZero() {
        XCTAssertEqual(JSONValue.double(-0.0).encoded, "0")
    }

    func test_encode_writesOtherDoublesInShortestRoundTripForm() {
        XCTAssertEqual(JSONValue.double(21.5).encoded, "21.5")
        XCTAssertEqual(JSONValue.double(0.1).encoded, "0.1")
        XCTAssertEqual(JSONValue.double(0.30000000000000004).encoded, "0.30000000000000004")
        XCTAssertEqual(JSONValue.double(-1e-7).encoded, "-1e-07")
        XCTAssertEqual(JSONValue.double(9223372036854775808.0).encoded, "9.223372036854776e+18")
        XCTAssertEqual(JSONValue.double(1.5e300).encoded, "1.5e+300")
        XCTAssertEqual(JSONValue.double(.greatestFiniteMagnitude).encoded, "1.7976931348623157e+308")
        XCTAssertEqual(JSONValue.double(.leastNonzeroMagnitude).encoded, "5e-324")
    }

    func test_encode_neverWritesNonFiniteNumbers() {
        XCTAssertEqual(JSONValue.array([.double(.nan), .double(.infinity), .double(-.infinity)]).encoded,
                       "[null,null,null]")
    }

    func test_encode_appendsToTheBuffer() {
        var buffer = Array("x".utf8)
        JSONValue.array([1, 2]).encode(into: &buffer)
        XCTAssertEqual(String(decoding: buffer, as: UTF8.self), "x[1,2]")
    }

    func test_encode_descriptionIsTheEncoding() {
        let value: JSONValue = ["k": [1.5, "v"]]
        XCTAssertEqual(value.description, value.encoded)
        XCTAssertEqual("\(value)", #"{"k":[1.5,"v"]}"#)
    }

    func test_encode_outputOfEachFormDecodesBackToAnEqualValue() throws {
        let values: [JSONValue] = [
            .double(1e-7), .double(1.5e300), .double(9223372036854775808.0), .double(-0.0),
            .double(.leastNonzeroMagnitude), .string("\u{0}\u{1F}\"\\/"), ["a": ["b": [nil]]],
        ]
        for value in values {
            let decoded = try JSONValue.parse(value.encoded)
            XCTAssertEqual(decoded, value, value.encoded)
            XCTAssertEqual(decoded.encoded, value.encoded)
        }
    }
}
