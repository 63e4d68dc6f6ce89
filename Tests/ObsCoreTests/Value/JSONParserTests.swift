import XCTest
import ObsCore

/// The decoder's guarantees beyond the suite's tables: what each kind of bad input is called, the
/// offset reported for it, the limits, and how numbers are typed and rounded.
final class JSONParserTests: XCTestCase {
    // MARK: - Rejections, with message and offset

    func test_decode_rejectsTrailingCommaInArray() {
        assertError(#"[1,2,]"#, "trailing comma in array", at: 5)
        assertError("[1, \n]", "trailing comma in array", at: 5)
    }

    func test_decode_rejectsTrailingCommaInObject() {
        assertError(#"{"a":1,}"#, "trailing comma in object", at: 7)
    }

    func test_decode_rejectsComments() {
        assertError("[1 /* one */]", "comments are not allowed", at: 3)
        assertError("// note\n1", "comments are not allowed", at: 0)
        assertError("{}//", "comments are not allowed", at: 2)
    }

    func test_decode_rejectsNaNAndInfinity() {
        assertError("[NaN]", "NaN and Infinity are not JSON numbers", at: 1)
        assertError("Infinity", "NaN and Infinity are not JSON numbers", at: 0)
        assertError("[-Infinity]", "NaN and Infinity are not JSON numbers", at: 2)
    }

    func test_decode_rejectsLeadingZeros() {
        assertError("[01]", "leading zero in number", at: 1)
        assertError("-00.5", "leading zero in number", at: 0)
    }

    func test_decode_rejectsMalformedNumbers() {
        assertError("[-]", "expected a digit after '-'", at: 2)
        assertError("[1.]", "expected a digit after '.'", at: 3)
        assertError("[1e+]", "expected a digit in the exponent", at: 4)
        assertError("[.5]", "unexpected '.', expected a value", at: 1)
        assertError("[+1]", "unexpected '+', expected a value", at: 1)
    }

    func test_decode_rejectsNumbersBeyondTheDoubleRange() {
        assertError("1e400", "number out of range", at: 0)
        assertError(#"{"v":-1e400}"#, "number out of range", at: 5)
        assertError("[1" + String(repeating: "0", count: 400) + "]", "number out of range", at: 1)
    }

    func test_decode_rejectsInvalidLiterals() {
        assertError("[tru]", "invalid literal, expected 'true'", at: 1)
        assertError("nul", "invalid literal, expected 'null'", at: 0)
        assertError("[True]", "unexpected 'T', expected a value", at: 1)
    }

    func test_decode_rejectsRawControlCharactersInStrings() {
        assertError("[\"a\nb\"]", "unescaped control character 0x0A in string", at: 3)
        assertError("\"\t\"", "unescaped control character 0x09 in string", at: 1)
        assertError("\"\u{0}\"", "unescaped control character 0x00 in string", at: 1)
        assertError("\"\u{1F}\"", "unescaped control character 0x1F in string", at: 1)
    }

    func test_decode_rejectsInvalidEscapes() {
        assertError(#"["\x41"]"#, "invalid escape in string", at: 2)
        assertError(#"["\u12G4"]"#, "invalid \\u escape", at: 2)
        assertError(#""\u12"#, "invalid \\u escape", at: 1)
    }

    func test_decode_rejectsLoneSurrogateEscapes() {
        assertError(#"["\uD800"]"#, "lone high surrogate in \\u escape", at: 2)
        assertError(#"["ab\uDBFFx"]"#, "lone high surrogate in \\u escape", at: 4)
        assertError(#"["\uD800\u0041"]"#, "high surrogate not followed by a low surrogate", at: 2)
        assertError(#"["\uD800\uD800"]"#, "high surrogate not followed by a low surrogate", at: 2)
        assertError(#"["\uDC00"]"#, "lone low surrogate in \\u escape", at: 2)
        assertError(#"["\uDFFF\uD800"]"#, "lone low surrogate in \\u escape", at: 2)
    }

    func test_decode_rejectsOverlongUTF8() {
        for bytes: [UInt8] in [[0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF],
                               [0xF0, 0x80, 0x80, 0x80], [0xF0, 0x8F, 0xBF, 0xBF]] {
            assertRejectsInString(bytes)
        }
    }

    func test_decode_rejectsSurrogatesEncodedInUTF8() {
        for bytes: [UInt8] in [[0xED, 0xA0, 0x80], [0xED, 0xAF, 0xBF], [0xED, 0xB0, 0x80], [0xED, 0xBF, 0xBF]] {
            assertRejectsInString(bytes)
        }
    }

    func test_decode_rejectsTruncatedUTF8() {
        for bytes: [UInt8] in [[0xC2], [0xDF], [0xE1, 0x80], [0xF0, 0x90], [0xF0, 0x90, 0x80], [0xF4, 0x80, 0x80]] {
            assertRejectsInString(bytes)
        }
        assertError([0x22, 0x61, 0xE2, 0x82], "truncated UTF-8 sequence", at: 2)
    }

    func test_decode_rejectsBytesAboveF4AndStrayContinuations() {
        for lead in [UInt8](0xF5...0xFF) + [0x80, 0xBF, 0xC0, 0xC1] {
            assertRejectsInString([lead, 0x80, 0x80, 0x80])
        }
        assertRejectsInString([0xF4, 0x90, 0x80, 0x80])
        assertError([0x22, 0x61, 0xF8, 0x22], "invalid UTF-8 byte 0xF8", at: 2)
    }

    func test_decode_reportsTheStartOfABadUTF8Sequence() {
        assertError([0x5B, 0x22, 0x61, 0xE2, 0x28, 0xA1, 0x22, 0x5D], "invalid UTF-8 sequence", at: 3)
        assertError([0x22, 0x5C, 0x6E, 0xED, 0xA0, 0x80, 0x22], "invalid UTF-8 sequence", at: 3)
    }

    func test_decode_rejectsDuplicateMemberNames() {
        assertError(#"{"a":1,"b":2,"a":3}"#, #"duplicate member name "a""#, at: 13)
        assertError(#"{"x":{"k":1,"k":1}}"#, #"duplicate member name "k""#, at: 12)
        assertError(#"{"\u0061":1,"a":2}"#, #"duplicate member name "a""#, at: 12)
    }

    func test_decode_treatsCanonicallyEquivalentNamesAsDuplicates() {
        assertError("{\"\u{E9}\":1,\"e\u{301}\":2}", "duplicate member name \"e\u{301}\"", at: 8)
    }

    func test_decode_acceptsTheSameNameInDifferentObjects() throws {
        XCTAssertEqual(try JSONValue.parse(#"[{"a":1},{"a":2}]"#), [["a": 1], ["a": 2]])
    }

    func test_decode_rejectsTrailingGarbage() {
        assertError("[1] x", "unexpected 'x', expected end of input", at: 4)
        assertError("1 2", "unexpected '2', expected end of input", at: 2)
        assertError("{}}", "unexpected '}', expected end of input", at: 2)
        assertError("\"a\"\u{0}", "unexpected byte 0x00, expected end of input", at: 3)
    }

    func test_decode_rejectsEmptyInput() {
        assertError("", "empty input", at: 0)
        assertError([], "empty input", at: 0)
        assertError(" \n\t\r", "unexpected end of input, expected a value", at: 4)
    }

    func test_decode_rejectsTruncatedDocuments() {
        assertError("[1,", "unexpected end of input, expected a value", at: 3)
        assertError(#"{"a""#, "unexpected end of input, expected ':' after the member name", at: 4)
        assertError(#"{"a":1"#, "unexpected end of input, expected ',' or '}'", at: 6)
        assertError(#"["abc"#, "unterminated string", at: 5)
        assertError(#"["\"#, "unterminated string", at: 3)
    }

    func test_decode_rejectsMissingSeparators() {
        assertError("[1 2]", "unexpected '2', expected ',' or ']'", at: 3)
        assertError(#"{"a" 1}"#, "unexpected '1', expected ':' after the member name", at: 5)
        assertError(#"{"a":1 "b":2}"#, "unexpected '\"', expected ',' or '}'", at: 7)
        assertError("{a:1}", "unexpected 'a', expected a member name in double quotes", at: 1)
        assertError("{'a':1}", "single quotes are not allowed, strings use double quotes", at: 1)
    }

    // MARK: - Whitespace

    func test_decode_acceptsOnlySpaceTabCRAndLFAsWhitespace() throws {
        XCTAssertEqual(try JSONValue.parse(" \t\r\n[ \t\r\n1 \t\r\n, \t\r\n{ \"a\" : 2 } ]\r\n"), [1, ["a": 2]])
        assertError("[\u{0C}1]", "unexpected byte 0x0C, expected a value", at: 1)
        assertError("[\u{0B}1]", "unexpected byte 0x0B, expected a value", at: 1)
        assertError("\u{A0}1", "unexpected byte 0xC2, expected a value", at: 0)
        assertError("\u{FEFF}{}", "unexpected byte 0xEF, expected a value", at: 0)
    }

    // MARK: - Nesting limit

    func test_decode_acceptsNestingExactlyAtTheLimit() throws {
        let depth = JSONValue.defaultMaxDepth
        XCTAssertEqual(depth, 128)
        var expected: JSONValue = []
        for _ in 1..<depth { expected = [expected] }
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        XCTAssertEqual(try JSONValue.parse(text), expected)
        let objects = String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
        XCTAssertNoThrow(try JSONValue.parse(objects))
    }

    func test_decode_rejectsNestingOneBeyondTheLimit() {
        let depth = JSONValue.defaultMaxDepth + 1
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        assertError(text, "nesting deeper than 128", at: 128)
        let objects = String(repeating: #"{"a":"#, count: depth - 1) + "{}" + String(repeating: "}", count: depth - 1)
        assertError(objects, "nesting deeper than 128", at: 128 * 5)
    }

    func test_decode_rejects100000NestedBracketsWithoutCrashing() {
        assertError(String(repeating: "[", count: 100_000), "nesting deeper than 128", at: 128)
        let closed = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        assertError(closed, "nesting deeper than 128", at: 128)
        assertError(String(repeating: "{\"\":", count: 100_000), "nesting deeper than 128", at: 128 * 4)
    }

    func test_decode_honoursACustomDepthLimit() throws {
        XCTAssertEqual(try JSONValue.parse("[[1]]", maxDepth: 2), [[1]])
        assertError("[[1]]", maxDepth: 1, "nesting deeper than 1", at: 1)
        XCTAssertEqual(try JSONValue.parse("7", maxDepth: 0), 7)
        assertError("[]", maxDepth: 0, "nesting deeper than 0", at: 0)
        let deep = 1_000
        let text = String(repeating: "[", count: deep) + String(repeating: "]", count: deep)
        XCTAssertNoThrow(try JSONValue.parse(text, maxDepth: deep))
    }

    // MARK: - Numbers

    func test_decode_keepsInt64BoundariesAsIntegers() throws {
        XCTAssertEqual(try JSONValue.parse("9223372036854775807").intValue, Int64.max)
        XCTAssertEqual(try JSONValue.parse("-9223372036854775808").intValue, Int64.min)
        XCTAssertEqual(try JSONValue.parse("[0,-1,1]"), [.int(0), .int(-1), .int(1)])
    }

    func test_decode_turnsIntegersBeyondInt64IntoDoubles() throws {
        assertDouble("9223372036854775808", 9223372036854775808.0)
        assertDouble("-9223372036854775809", -9223372036854775808.0)
        assertDouble("18446744073709551616", 18446744073709551616.0)
        assertDouble("123456789012345678901234567890", 123456789012345678901234567890.0)
    }

    func test_decode_turnsFractionsAndExponentsIntoDoubles() throws {
        assertDouble("1.0", 1.0)
        assertDouble("1e2", 100.0)
        assertDouble("-2.5E-3", -0.0025)
        assertDouble("21.5", 21.5)
    }

    func test_decode_turnsMinusZeroIntoTheIntegerZero() throws {
        XCTAssertEqual(try JSONValue.parse("-0"), .int(0))
        let fraction = try JSONValue.parse("-0.0")
        guard case .double(let d) = fraction else { return XCTFail("\(fraction)") }
        XCTAssertEqual(d.sign, .minus)
        XCTAssertEqual(fraction, .int(0))
    }

    func test_decode_roundsUnderflowToZeroOrSubnormals() throws {
        assertDouble("1e-400", 0.0)
        assertDouble("-1e-400", -0.0)
        assertDouble("4.9406564584124654e-324", Double.leastNonzeroMagnitude)
        assertDouble("2.2250738585072011e-308", Double.leastNormalMagnitude.nextDown)
    }

    func test_decode_roundsDoublesCorrectly() throws {
        assertDouble("0.1", 0.1)
        assertDouble("0.30000000000000004", 0.30000000000000004)
        assertDouble("1.7976931348623157e308", .greatestFiniteMagnitude)
        assertDouble("9007199254740993.0", 9007199254740992.0)
        assertDouble("9007199254740995.0", 9007199254740996.0)
        assertDouble("2.2250738585072014e-308", .leastNormalMagnitude)
        assertDouble("7.2057594037927933e16", 72057594037927936.0)
        assertDouble("1e23", 1e23)
        assertDouble("8.41e21", 8.41e21)
        assertDouble("0.000000000000000000000000000000000000000000001", 1e-45)
        assertDouble("3.14159265358979323846264338327950288", .pi)
        assertDouble("1" + String(repeating: "0", count: 308), 1e308)
    }

    // MARK: - Strings

    func test_decode_buildsStringsWithAndWithoutEscapes() throws {
        XCTAssertEqual(try JSONValue.parse(#""plain""#), "plain")
        XCTAssertEqual(try JSONValue.parse("\"grüße, 日本, 🎉\""), "grüße, 日本, 🎉")
        XCTAssertEqual(try JSONValue.parse(#""a\"b\\c\/d\u00e9\uD83C\uDF89\n""#), "a\"b\\c/dé🎉\n")
        XCTAssertEqual(try JSONValue.parse(#"["\n", "x", "\t"]"#), ["\n", "x", "\t"])
    }

    // MARK: - Entry points and errors

    func test_decode_givesTheSameResultFromEveryEntryPoint() throws {
        let text = #"{"id":5,"op":"set","key":"sensor.kitchen.temp","value":21.5}"#
        let fromString = try JSONValue.parse(text)
        let fromBytes = try JSONValue.parse(Array(text.utf8))
        let fromBuffer = try Array(text.utf8).withUnsafeBytes { try JSONValue.parse($0) }
        XCTAssertEqual(fromString, ["id": 5, "op": "set", "key": "sensor.kitchen.temp", "value": 21.5])
        XCTAssertEqual(fromBytes, fromString)
        XCTAssertEqual(fromBuffer, fromString)
    }

    func test_decode_errorDescribesItselfAndBecomesBadJSON() {
        let error = JSONParseError("trailing comma in array", offset: 3)
        XCTAssertEqual(error.description, "trailing comma in array at byte 3")
        XCTAssertEqual(error.obsError, ObsError(.badJSON, "trailing comma in array at byte 3"))
        XCTAssertEqual(error.obsError.code, .badJSON)
    }

    // MARK: - Helpers

    private func assertError(
        _ text: String, maxDepth: Int = JSONValue.defaultMaxDepth, _ message: String, at offset: Int,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        assertError(Array(text.utf8), maxDepth: maxDepth, message, at: offset, file: file, line: line)
    }

    private func assertError(
        _ bytes: [UInt8], maxDepth: Int = JSONValue.defaultMaxDepth, _ message: String, at offset: Int,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let value = try JSONValue.parse(bytes, maxDepth: maxDepth)
            XCTFail("accepted as \(value)", file: file, line: line)
        } catch {
            XCTAssertEqual(error, JSONParseError(message, offset: offset), file: file, line: line)
        }
    }

    /// `bytes` inside a string: `"a<bytes>"`, which must fail on a UTF-8 error at offset 2.
    private func assertRejectsInString(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) {
        do {
            let value = try JSONValue.parse([0x22, 0x61] + bytes + [0x22])
            XCTFail("\(bytes) accepted as \(value)", file: file, line: line)
        } catch {
            XCTAssertTrue(error.message.contains("UTF-8"), "\(bytes): \(error)", file: file, line: line)
            XCTAssertEqual(error.offset, 2, "\(bytes)", file: file, line: line)
        }
    }

    private func assertDouble(_ text: String, _ expected: Double, file: StaticString = #filePath, line: UInt = #line) {
        do {
            let value = try JSONValue.parse(text)
            guard case .double(let d) = value else {
                return XCTFail("\(text) decoded as \(value), not a double", file: file, line: line)
            }
            XCTAssertEqual(d.bitPattern, expected.bitPattern, "\(text): \(d) != \(expected)", file: file, line: line)
        } catch {
            XCTFail("\(text): \(error)", file: file, line: line)
        }
    }
}
