import XCTest
import ObsCore

/// The parsing cases of nst/JSONTestSuite (test_parsing/), ported as tables: every y_ document must
/// decode (to the value written next to it), every n_ document must be rejected, and each i_
/// ("implementation defined") document gets the answer this project's contract decides.
/// The suite's y_object_duplicated_key* cases are rejects here: obsd refuses duplicate names.
final class JSONTestSuiteTests: XCTestCase {
    struct Case {
        var name: String
        var bytes: [UInt8]
        var expected: JSONValue?
    }

    func test_suite_acceptsValidArrays() { assertAccepted(prefix: "y_array_") }
    func test_suite_acceptsValidNumbers() { assertAccepted(prefix: "y_number") }
    func test_suite_acceptsValidObjects() { assertAccepted(prefix: "y_object") }
    func test_suite_acceptsValidStrings() { assertAccepted(prefix: "y_string_") }
    func test_suite_acceptsValidStructure() { assertAccepted(prefix: "y_structure_") }

    func test_suite_rejectsInvalidArrays() { assertRejected(prefixes: ["n_array_"]) }
    func test_suite_rejectsInvalidNumbers() { assertRejected(prefixes: ["n_number_", "n_multidigit_"]) }
    func test_suite_rejectsInvalidObjects() { assertRejected(prefixes: ["n_object_"]) }
    func test_suite_rejectsInvalidStrings() { assertRejected(prefixes: ["n_string_"]) }
    func test_suite_rejectsInvalidStructure() {
        assertRejected(prefixes: ["n_structure_", "n_incomplete_", "n_single_"])
    }

    func test_suite_rejectsEveryDocumentWithInvalidUTF8() {
        let invalid = Self.rejected.filter { String(validating: $0.bytes, as: UTF8.self) == nil }
        XCTAssertGreaterThan(invalid.count, 10)
        for c in invalid { assertRejects(c) }
    }

    func test_suite_implementationDefinedCasesFollowTheContract() {
        for c in Self.implementationDefined {
            if let expected = c.expected {
                XCTAssertEqual(try JSONValue.parse(c.bytes), expected, c.name)
            } else {
                assertRejects(c)
            }
        }
    }

    func test_suite_tablesCoverEveryCategory() {
        XCTAssertGreaterThanOrEqual(Self.accepted.count, 90)
        XCTAssertGreaterThanOrEqual(Self.rejected.count, 180)
        XCTAssertEqual(Set(Self.accepted.map(\.name)).count, Self.accepted.count)
        XCTAssertEqual(Set(Self.rejected.map(\.name)).count, Self.rejected.count)
    }

    private func assertAccepted(prefix: String, file: StaticString = #filePath, line: UInt = #line) {
        let cases = Self.accepted.filter { $0.name.hasPrefix(prefix) }
        XCTAssertFalse(cases.isEmpty, "no cases for \(prefix)", file: file, line: line)
        for c in cases {
            do {
                let value = try JSONValue.parse(c.bytes)
                XCTAssertEqual(value, c.expected, c.name, file: file, line: line)
            } catch {
                XCTFail("\(c.name): \(error)", file: file, line: line)
            }
        }
    }

    private func assertRejected(prefixes: [String], file: StaticString = #filePath, line: UInt = #line) {
        let cases = Self.rejected.filter { c in prefixes.contains { c.name.hasPrefix($0) } }
        XCTAssertFalse(cases.isEmpty, "no cases for \(prefixes)", file: file, line: line)
        for c in cases { assertRejects(c, file: file, line: line) }
    }

    private func assertRejects(_ c: Case, file: StaticString = #filePath, line: UInt = #line) {
        do {
            let value = try JSONValue.parse(c.bytes)
            XCTFail("\(c.name) was accepted as \(value)", file: file, line: line)
        } catch {
            XCTAssertFalse(error.message.isEmpty, c.name, file: file, line: line)
            XCTAssertTrue((0...c.bytes.count).contains(error.offset),
                          "\(c.name): offset \(error.offset) outside the input", file: file, line: line)
        }
    }

    // MARK: - y_: documents that must decode, with their values

    static let accepted: [Case] = {
        var cases: [Case] = []
        // Swift string literals may not spell noncharacters, so those are built from scalars.
        func scalar(_ value: UInt32) -> JSONValue { .string(String(Unicode.Scalar(value)!)) }
        func y(_ name: String, _ text: String, _ expected: JSONValue) {
            cases.append(Case(name: name, bytes: Array(text.utf8), expected: expected))
        }
        y("y_array_arraysWithSpaces", "[[]   ]", [[]])
        y("y_array_empty", "[]", [])
        y("y_array_empty-string", #"[""]"#, [""])
        y("y_array_ending_with_newline", #"["a"]"#, ["a"])
        y("y_array_false", "[false]", [false])
        y("y_array_heterogeneous", #"[null, 1, "1", {}]"#, [nil, 1, "1", [:]])
        y("y_array_null", "[null]", [nil])
        y("y_array_with_1_and_newline", "[1\n]", [1])
        y("y_array_with_leading_space", " [1]", [1])
        y("y_array_with_several_null", "[1,null,null,null,2]", [1, nil, nil, nil, 2])
        y("y_array_with_trailing_space", "[2] ", [2])

        y("y_number", "[123e65]", [.double(123e65)])
        y("y_number_0e+1", "[0e+1]", [.double(0)])
        y("y_number_0e1", "[0e1]", [.double(0)])
        y("y_number_after_space", "[ 4]", [4])
        y("y_number_double_close_to_zero",
          "[-0.000000000000000000000000000000000000000000000000000000000000000000000000000001]",
          [.double(-1e-78)])
        y("y_number_int_with_exp", "[20e1]", [.double(200)])
        y("y_number_minus_zero", "[-0]", [.int(0)])
        y("y_number_negative_int", "[-123]", [-123])
        y("y_number_negative_one", "[-1]", [-1])
        y("y_number_negative_zero", "[-0]", [0])
        y("y_number_real_capital_e", "[1E22]", [.double(1e22)])
        y("y_number_real_capital_e_neg_exp", "[1E-2]", [.double(0.01)])
        y("y_number_real_capital_e_pos_exp", "[1E+2]", [.double(100)])
        y("y_number_real_exponent", "[123e45]", [.double(123e45)])
        y("y_number_real_fraction_exponent", "[123.456e78]", [.double(123.456e78)])
        y("y_number_real_neg_exp", "[1e-2]", [.double(0.01)])
        y("y_number_real_pos_exponent", "[1e+2]", [.double(100)])
        y("y_number_simple_int", "[123]", [123])
        y("y_number_simple_real", "[123.456789]", [.double(123.456789)])

        y("y_object", #"{"asd":"sdf", "dfg":"fgh"}"#, ["asd": "sdf", "dfg": "fgh"])
        y("y_object_basic", #"{"asd":"sdf"}"#, ["asd": "sdf"])
        y("y_object_empty", "{}", [:])
        y("y_object_empty_key", #"{"":0}"#, ["": 0])
        y("y_object_escaped_null_in_key", #"{"foo\u0000bar": 42}"#, ["foo\u{0}bar": 42])
        y("y_object_extreme_numbers", #"{ "min": -1.0e+28, "max": 1.0e+28 }"#,
          ["min": .double(-1e28), "max": .double(1e28)])
        y("y_object_long_strings",
          #"{"x":[{"id": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}], "id": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#,
          ["x": [["id": .string(String(repeating: "x", count: 40))]],
           "id": .string(String(repeating: "x", count: 40))])
        y("y_object_simple", #"{"a":[]}"#, ["a": []])
        y("y_object_string_unicode",
          #"{"title":"\u041f\u043e\u043b\u0442\u043e\u0440\u0430 \u0417\u0435\u043c\u043b\u0435\u043a\u043e\u043f\u0430" }"#,
          ["title": "Полтора Землекопа"])
        y("y_object_with_newlines", "{\n\"a\": \"b\"\n}", ["a": "b"])

        y("y_string_1_2_3_bytes_UTF-8_sequences", #"["\u0060\u012a\u12AB"]"#, ["\u{60}\u{12A}\u{12AB}"])
        y("y_string_accepted_surrogate_pair", #"["\uD801\udc37"]"#, ["\u{10437}"])
        y("y_string_accepted_surrogate_pairs", #"["\ud83d\ude39\ud83d\udc8d"]"#, ["\u{1F639}\u{1F48D}"])
        y("y_string_allowed_escapes", #"["\"\\\/\b\f\n\r\t"]"#, ["\"\\/\u{8}\u{C}\n\r\t"])
        y("y_string_backslash_and_u_escaped_zero", #"["\\u0000"]"#, [#"\u0000"#])
        y("y_string_backslash_doublequotes", #"["\""]"#, ["\""])
        y("y_string_comments", #"["a/*b*/c/*d//e"]"#, ["a/*b*/c/*d//e"])
        y("y_string_double_escape_a", #"["\\a"]"#, [#"\a"#])
        y("y_string_double_escape_n", #"["\\n"]"#, [#"\n"#])
        y("y_string_escaped_control_character", #"["\u0012"]"#, ["\u{12}"])
        y("y_string_escaped_noncharacter", #"["\uFFFF"]"#, [scalar(0xFFFF)])
        y("y_string_in_array", #"["asd"]"#, ["asd"])
        y("y_string_in_array_with_leading_space", #"[ "asd"]"#, ["asd"])
        y("y_string_last_surrogates_1_and_2", #"["\uDBFF\uDFFF"]"#, [scalar(0x10FFFF)])
        y("y_string_nbsp_uescaped", #"["new\u00A0line"]"#, ["new\u{A0}line"])
        y("y_string_nonCharacterInUTF-8_U+10FFFF", "[\"" + String(Unicode.Scalar(UInt32(0x10FFFF))!) + "\"]", [scalar(0x10FFFF)])
        y("y_string_nonCharacterInUTF-8_U+FFFF", "[\"" + String(Unicode.Scalar(UInt32(0xFFFF))!) + "\"]", [scalar(0xFFFF)])
        y("y_string_null_escape", #"["\u0000"]"#, ["\u{0}"])
        y("y_string_one-byte-utf-8", #"["\u002c"]"#, [","])
        y("y_string_pi", "[\"π\"]", ["π"])
        y("y_string_reservedCharacterInUTF-8_U+1BFFF", "[\"\u{1BFFF}\"]", ["\u{1BFFF}"])
        y("y_string_simple_ascii", #"["asd "]"#, ["asd "])
        y("y_string_space", #"" ""#, " ")
        y("y_string_surrogates_U+1D11E_MUSICAL_SYMBOL_G_CLEF", #"["\uD834\uDd1e"]"#, ["\u{1D11E}"])
        y("y_string_three-byte-utf-8", #"["\u0821"]"#, ["\u{821}"])
        y("y_string_two-byte-utf-8", #"["\u0123"]"#, ["\u{123}"])
        y("y_string_u+2028_line_sep", "[\"\u{2028}\"]", ["\u{2028}"])
        y("y_string_u+2029_par_sep", "[\"\u{2029}\"]", ["\u{2029}"])
        y("y_string_uEscape", #"["\u0061\u30af\u30EA\u30b9"]"#, ["aクリス"])
        y("y_string_uescaped_newline", #"["new\u000Aline"]"#, ["new\nline"])
        y("y_string_unescaped_char_delete", "[\"\u{7F}\"]", ["\u{7F}"])
        y("y_string_unicode", #"["\uA66D"]"#, ["\u{A66D}"])
        y("y_string_unicodeEscapedBackslash", #"["\u005C"]"#, ["\\"])
        y("y_string_unicode_2", "[\"⍂㈴⍂\"]", ["⍂㈴⍂"])
        y("y_string_unicode_U+10FFFE_nonchar", #"["\uDBFF\uDFFE"]"#, [scalar(0x10FFFE)])
        y("y_string_unicode_U+1FFFE_nonchar", #"["\uD83F\uDFFE"]"#, [scalar(0x1FFFE)])
        y("y_string_unicode_U+200B_ZERO_WIDTH_SPACE", #"["\u200B"]"#, ["\u{200B}"])
        y("y_string_unicode_U+2064_invisible_plus", #"["\u2064"]"#, ["\u{2064}"])
        y("y_string_unicode_U+FDD0_nonchar", #"["\uFDD0"]"#, [scalar(0xFDD0)])
        y("y_string_unicode_U+FFFE_nonchar", #"["\uFFFE"]"#, [scalar(0xFFFE)])
        y("y_string_unicode_escaped_double_quote", #"["\u0022"]"#, ["\""])
        y("y_string_utf8", "[\"€𝄞\"]", ["€𝄞"])
        y("y_string_with_del_character", "[\"a\u{7F}a\"]", ["a\u{7F}a"])

        y("y_structure_lonely_false", "false", false)
        y("y_structure_lonely_int", "42", 42)
        y("y_structure_lonely_negative_real", "-0.1", .double(-0.1))
        y("y_structure_lonely_null", "null", nil)
        y("y_structure_lonely_string", #""asd""#, "asd")
        y("y_structure_lonely_true", "true", true)
        y("y_structure_string_empty", #""""#, "")
        y("y_structure_trailing_newline", "[\"a\"]\n", ["a"])
        y("y_structure_true_in_array", "[true]", [true])
        y("y_structure_whitespace_array", " [] ", [])
        return cases
    }()

    // MARK: - n_: documents that must be rejected

    static let rejected: [Case] = {
        var cases: [Case] = []
        func n(_ name: String, _ text: String) {
            cases.append(Case(name: name, bytes: Array(text.utf8)))
        }
        func n(_ name: String, bytes: [UInt8]) {
            cases.append(Case(name: name, bytes: bytes))
        }
        // Accepted by the suite, rejected by obsd's contract.
        n("n_object_duplicated_key", #"{"a":"b","a":"c"}"#)
        n("n_object_duplicated_key_and_value", #"{"a":"b","a":"b"}"#)
        n("n_array_1_true_without_comma", "[1 true]")
        n("n_array_a_invalid_utf8", bytes: [0x5B, 0x61, 0xE5, 0x5D])
        n("n_array_colon_instead_of_comma", "[\"\": 1]")
        n("n_array_comma_after_close", "[\"\"],")
        n("n_array_comma_and_number", "[,1]")
        n("n_array_double_comma", "[1,,2]")
        n("n_array_double_extra_comma", "[\"x\",,]")
        n("n_array_extra_close", "[\"x\"]]")
        n("n_array_extra_comma", "[\"\",]")
        n("n_array_incomplete", "[\"x\"")
        n("n_array_incomplete_invalid_value", "[x")
        n("n_array_inner_array_no_comma", "[3[4]]")
        n("n_array_invalid_utf8", bytes: [0x5B, 0xFF, 0x5D])
        n("n_array_items_separated_by_semicolon", "[1:2]")
        n("n_array_just_comma", "[,]")
        n("n_array_just_minus", "[-]")
        n("n_array_missing_value", "[   , \"\"]")
        n("n_array_newlines_unclosed", "[\"a\",\u{A}4\u{A},1,")
        n("n_array_number_and_comma", "[1,]")
        n("n_array_number_and_several_commas", "[1,,]")
        n("n_array_spaces_vertical_tab_formfeed", "[\"\u{B}a\"\\f]")
        n("n_array_star_inside", "[*]")
        n("n_array_unclosed", "[\"\"")
        n("n_array_unclosed_trailing_comma", "[1,")
        n("n_array_unclosed_with_new_lines", "[1,\u{A}1\u{A},1")
        n("n_array_unclosed_with_object_inside", "[{}")
        n("n_incomplete_false", "[fals]")
        n("n_incomplete_null", "[nul]")
        n("n_incomplete_true", "[tru]")
        n("n_multidigit_number_then_00", "123\u{0}")
        n("n_number_++", "[++1234]")
        n("n_number_+1", "[+1]")
        n("n_number_+Inf", "[+Inf]")
        n("n_number_-01", "[-01]")
        n("n_number_-1.0.", "[-1.0.]")
        n("n_number_-2.", "[-2.]")
        n("n_number_-NaN", "[-NaN]")
        n("n_number_.-1", "[.-1]")
        n("n_number_.2e-3", "[.2e-3]")
        n("n_number_0.1.2", "[0.1.2]")
        n("n_number_0.3e+", "[0.3e+]")
        n("n_number_0.3e", "[0.3e]")
        n("n_number_0.e1", "[0.e1]")
        n("n_number_0_capital_E+", "[0E+]")
        n("n_number_0_capital_E", "[0E]")
        n("n_number_0e+", "[0e+]")
        n("n_number_0e", "[0e]")
        n("n_number_1.0e+", "[1.0e+]")
        n("n_number_1.0e-", "[1.0e-]")
        n("n_number_1.0e", "[1.0e]")
        n("n_number_1_000", "[1 000.0]")
        n("n_number_1eE2", "[1eE2]")
        n("n_number_2.e+3", "[2.e+3]")
        n("n_number_2.e-3", "[2.e-3]")
        n("n_number_2.e3", "[2.e3]")
        n("n_number_9.e+", "[9.e+]")
        n("n_number_Inf", "[Inf]")
        n("n_number_NaN", "[NaN]")
        n("n_number_U+FF11_fullwidth_digit_one", "[\u{FF11}]")
        n("n_number_expression", "[1+2]")
        n("n_number_hex_1_digit", "[0x1]")
        n("n_number_hex_2_digits", "[0x42]")
        n("n_number_infinity", "[Infinity]")
        n("n_number_invalid+-", "[0e+-1]")
        n("n_number_invalid-negative-real", "[-123.123foo]")
        n("n_number_invalid-utf-8-in-bigger-int", bytes: [0x5B, 0x31, 0x32, 0x33, 0xE5, 0x5D])
        n("n_number_invalid-utf-8-in-exponent", bytes: [0x5B, 0x31, 0x65, 0x31, 0xE5, 0x5D])
        n("n_number_invalid-utf-8-in-int", bytes: [0x5B, 0x30, 0xE5, 0x5D, 0x0A])
        n("n_number_minus_infinity", "[-Infinity]")
        n("n_number_minus_sign_with_trailing_garbage", "[-foo]")
        n("n_number_minus_space_1", "[- 1]")
        n("n_number_multi_minus", "---123")
        n("n_number_neg_int_starting_with_zero", "[-012]")
        n("n_number_neg_real_without_int_part", "[-.123]")
        n("n_number_neg_with_garbage_at_end", "[-1x]")
        n("n_number_preceding_char", "x12345")
        n("n_number_real_garbage_after_e", "[1ea]")
        n("n_number_real_with_invalid_utf8_after_e", bytes: [0x5B, 0x31, 0x65, 0xE5, 0x5D])
        n("n_number_real_without_fractional_part", "[1.]")
        n("n_number_starting_with_dot", "[.123]")
        n("n_number_with_alpha", "[1.2a-3]")
        n("n_number_with_alpha_char", "[1.8011670033376514H-308]")
        n("n_number_with_leading_zero", "[012]")
        n("n_object_bad_value", "[\"x\", truth]")
        n("n_object_bracket_key", "{[: \"x\"}\u{A}")
        n("n_object_comma_instead_of_colon", "{\"x\", null}")
        n("n_object_double_colon", "{\"x\"::\"b\"}")
        n("n_object_emoji", "{\u{1F1E8}\u{1F1ED}}")
        n("n_object_garbage_at_end", "{\"a\":\"a\" 123}")
        n("n_object_key_with_single_quotes", "{key: 'value'}")
        n("n_object_lone_continuation_byte_in_key_and_trailing_comma", bytes: [0x7B, 0x22, 0xB9, 0x22, 0x3A, 0x22, 0x30, 0x22, 0x2C, 0x7D])
        n("n_object_missing_colon", "{\"a\" b}")
        n("n_object_missing_key", "{:\"b\"}")
        n("n_object_missing_semicolon", "{\"a\" \"b\"}")
        n("n_object_missing_value", "{\"a\":")
        n("n_object_no-colon", "{\"a\"")
        n("n_object_non_string_key", "{1:1}")
        n("n_object_non_string_key_but_huge_number_instead", "{9999E9999:1}")
        n("n_object_repeated_null_null", "{null:null,null:null}")
        n("n_object_several_trailing_commas", "{\"id\":0,,,,,}")
        n("n_object_single_quote", "{'a':0}")
        n("n_object_trailing_comma", "{\"id\":0,}")
        n("n_object_trailing_comment", "{\"a\":\"b\"}/**/")
        n("n_object_trailing_comment_open", "{\"a\":\"b\"}/**//")
        n("n_object_trailing_comment_slash_open", "{\"a\":\"b\"}//")
        n("n_object_trailing_comment_slash_open_incomplete", "{\"a\":\"b\"}/")
        n("n_object_two_commas_in_a_row", "{\"a\":\"b\",,\"c\":\"d\"}")
        n("n_object_unquoted_key", "{a: \"b\"}")
        n("n_object_unquoted_key_start", "{Xx\": 1}")
        n("n_object_unterminated-value", "{\"a\":\"a")
        n("n_object_with_single_string", "{ \"foo\" : \"bar\", \"a\" }")
        n("n_object_with_trailing_garbage", "{\"a\":\"b\"}#")
        n("n_single_space", " ")
        n("n_string_1_surrogate_then_escape", "[\"\\uD800\\\"]")
        n("n_string_1_surrogate_then_escape_u", "[\"\\uD800\\u\"]")
        n("n_string_1_surrogate_then_escape_u1", "[\"\\uD800\\u1\"]")
        n("n_string_1_surrogate_then_escape_u1x", "[\"\\uD800\\u1x\"]")
        n("n_string_accentuated_char_no_quotes", "[\u{E9}]")
        n("n_string_backslash_00", "[\"\\\u{0}\"]")
        n("n_string_escape_x", "[\"\\x00\"]")
        n("n_string_escaped_backslash_bad", "[\"\\\\\\\"]")
        n("n_string_escaped_ctrl_char_tab", "[\"\\\u{9}\"]")
        n("n_string_escaped_emoji", "[\"\\\u{1F300}\"]")
        n("n_string_incomplete_escape", "[\"\\\"]")
        n("n_string_incomplete_escaped_character", "[\"\\u00A\"]")
        n("n_string_incomplete_surrogate", "[\"\\uD834\\uDd\"]")
        n("n_string_incomplete_surrogate_escape_invalid", "[\"\\uD800\\uD800\\x\"]")
        n("n_string_invalid-utf-8-in-escape", bytes: [0x5B, 0x22, 0x5C, 0x75, 0xE5, 0x22, 0x5D])
        n("n_string_invalid_backslash_esc", "[\"\\a\"]")
        n("n_string_invalid_unicode_escape", "[\"\\uqqqq\"]")
        n("n_string_invalid_utf8_after_escape", bytes: [0x5B, 0x22, 0x5C, 0xE5, 0x22, 0x5D])
        n("n_string_leading_uescaped_thinspace", "[\\u0020\"asd\"]")
        n("n_string_no_quotes_with_bad_escape", "[\\n]")
        n("n_string_single_doublequote", "\"")
        n("n_string_single_quote", "['single quote']")
        n("n_string_single_string_no_double_quotes", "abc")
        n("n_string_start_escape_unclosed", "[\"\\")
        n("n_string_unescaped_ctrl_char", "[\"a\u{0}a\"]")
        n("n_string_unescaped_newline", "[\"new\u{A}line\"]")
        n("n_string_unescaped_tab", "[\"\u{9}\"]")
        n("n_string_unicode_CapitalU", "\"\\UA66D\"")
        n("n_string_with_trailing_garbage", "\"\"x")
        n("n_structure_angle_bracket_.", "<.>")
        n("n_structure_angle_bracket_null", "[<null>]")
        n("n_structure_array_trailing_garbage", "[1]x")
        n("n_structure_array_with_extra_array_close", "[1]]")
        n("n_structure_array_with_unclosed_string", "[\"asd]")
        n("n_structure_ascii-unicode-identifier", "a\u{E5}")
        n("n_structure_capitalized_True", "[True]")
        n("n_structure_close_unopened_array", "1]")
        n("n_structure_comma_instead_of_closing_brace", "{\"x\": true,")
        n("n_structure_double_array", "[][]")
        n("n_structure_end_array", "]")
        n("n_structure_incomplete_UTF8_BOM", bytes: [0xEF, 0xBB, 0x7B, 0x7D])
        n("n_structure_lone-invalid-utf-8", bytes: [0xE5])
        n("n_structure_lone-open-bracket", "[")
        n("n_structure_no_data", "")
        n("n_structure_null-byte-outside-string", "[\u{0}]")
        n("n_structure_number_with_trailing_garbage", "2@")
        n("n_structure_object_followed_by_closing_object", "{}}")
        n("n_structure_object_unclosed_no_value", "{\"\":")
        n("n_structure_object_with_comment", "{\"a\":/*comment*/\"b\"}")
        n("n_structure_object_with_trailing_garbage", "{\"a\": true} \"x\"")
        n("n_structure_open_array_apostrophe", "['")
        n("n_structure_open_array_comma", "[,")
        n("n_structure_open_array_open_object", "[{")
        n("n_structure_open_array_open_string", "[\"a")
        n("n_structure_open_array_string", "[\"a\"")
        n("n_structure_open_object", "{")
        n("n_structure_open_object_close_array", "{]")
        n("n_structure_open_object_comma", "{,")
        n("n_structure_open_object_open_array", "{[")
        n("n_structure_open_object_open_string", "{\"a")
        n("n_structure_open_object_string_with_apostrophes", "{'a'")
        n("n_structure_open_open", "[\"\\{[\"\\{[\"\\{[\"\\{")
        n("n_structure_single_eacute", bytes: [0xE9])
        n("n_structure_single_star", "*")
        n("n_structure_trailing_#", "{\"a\":\"b\"}#{}")
        n("n_structure_U+2060_word_joined", "[\u{2060}]")
        n("n_structure_uescaped_LF_before_string", "[\\u000A\"\"]")
        n("n_structure_unclosed_array", "[1")
        n("n_structure_unclosed_array_partial_null", "[ false, nul")
        n("n_structure_unclosed_array_unfinished_false", "[ true, fals")
        n("n_structure_unclosed_array_unfinished_true", "[ false, tru")
        n("n_structure_unclosed_object", "{\"asd\":\"asd\"")
        n("n_structure_unicode-identifier", "\u{E5}")
        n("n_structure_UTF8_BOM_no_data", "\u{FEFF}")
        n("n_structure_whitespace_formfeed", "[\u{C}]")
        n("n_structure_whitespace_U+2060_word_joiner", "[\u{2060}]")
        n("n_structure_open_array_object", String(repeating: #"[{"":"#, count: 50_000))
        return cases
    }()

    // MARK: - i_: documents the suite leaves to the implementation (nil: rejected)

    static let implementationDefined: [Case] = {
        var cases: [Case] = []
        func i(_ name: String, _ text: String, _ expected: JSONValue?) {
            cases.append(Case(name: name, bytes: Array(text.utf8), expected: expected))
        }
        func i(_ name: String, bytes: [UInt8]) {
            cases.append(Case(name: name, bytes: bytes))
        }
        i("i_number_double_huge_neg_exp", "[123.456e-789]", [.double(0)])
        i("i_number_huge_exp", "[0.4e" + String(repeating: "6", count: 120) + "]", nil)
        i("i_number_neg_int_huge_exp", "[-1e+9999]", nil)
        i("i_number_pos_double_huge_exp", "[1.5e+9999]", nil)
        i("i_number_real_neg_overflow", "[-123123e100000]", nil)
        i("i_number_real_pos_overflow", "[123123e100000]", nil)
        i("i_number_real_underflow", "[123e-10000000]", [.double(0)])
        i("i_number_too_big_neg_int", "[-123123123123123123123123123123]",
          [.double(-123123123123123123123123123123.0)])
        i("i_number_too_big_pos_int", "[100000000000000000000]", [.double(1e20)])
        i("i_number_very_big_negative_int", "[-237462374673276894279832749832423479823246327846]",
          [.double(-237462374673276894279832749832423479823246327846.0)])
        i("i_object_key_lone_2nd_surrogate", #"{"\uDFAA":0}"#, nil)
        i("i_string_1st_surrogate_but_2nd_missing", #"["\uDADA"]"#, nil)
        i("i_string_1st_valid_surrogate_2nd_invalid", #"["\uD888\u1234"]"#, nil)
        i("i_string_incomplete_surrogate_and_escape_valid", #"["\uD800\n"]"#, nil)
        i("i_string_incomplete_surrogate_pair", #"["\uDd1ea"]"#, nil)
        i("i_string_incomplete_surrogates_escape_valid", #"["\uD800\uD800\n"]"#, nil)
        i("i_string_invalid_lonely_surrogate", #"["\ud800"]"#, nil)
        i("i_string_invalid_surrogate", #"["\ud800abc"]"#, nil)
        i("i_string_inverted_surrogates_U+1D11E", #"["\uDd1e\uD834"]"#, nil)
        i("i_string_lone_second_surrogate", #"["\uDFAA"]"#, nil)
        i("i_string_invalid_utf-8", bytes: [0x5B, 0x22, 0xFF, 0x22, 0x5D])
        i("i_string_iso_latin_1", bytes: [0x5B, 0x22, 0xE9, 0x22, 0x5D])
        i("i_string_lone_utf8_continuation_byte", bytes: [0x5B, 0x22, 0x81, 0x22, 0x5D])
        i("i_string_not_in_unicode_range", bytes: [0x5B, 0x22, 0xF4, 0xBF, 0xBF, 0xBF, 0x22, 0x5D])
        i("i_string_overlong_sequence_2_bytes", bytes: [0x5B, 0x22, 0xC0, 0xAF, 0x22, 0x5D])
        i("i_string_overlong_sequence_6_bytes",
          bytes: [0x5B, 0x22, 0xFC, 0x83, 0xBF, 0xBF, 0xBF, 0xBF, 0x22, 0x5D])
        i("i_string_overlong_sequence_6_bytes_null",
          bytes: [0x5B, 0x22, 0xFC, 0x80, 0x80, 0x80, 0x80, 0x80, 0x22, 0x5D])
        i("i_string_truncated-utf-8", bytes: [0x5B, 0x22, 0xE0, 0xFF, 0x22, 0x5D])
        i("i_string_utf16BE_no_BOM", bytes: [0x00, 0x5B, 0x00, 0x22, 0x00, 0xE9, 0x00, 0x22, 0x00, 0x5D])
        i("i_string_utf16LE_no_BOM", bytes: [0x5B, 0x00, 0x22, 0x00, 0xE9, 0x00, 0x22, 0x00, 0x5D, 0x00])
        i("i_string_UTF-16LE_with_BOM",
          bytes: [0xFF, 0xFE, 0x5B, 0x00, 0x22, 0x00, 0xE9, 0x00, 0x22, 0x00, 0x5D, 0x00])
        i("i_string_UTF-8_invalid_sequence", bytes: [0x5B, 0x22, 0xE6, 0x97, 0xA5, 0xD1, 0x88, 0xFA, 0x22, 0x5D])
        i("i_string_UTF8_surrogate_U+D800", bytes: [0x5B, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x5D])
        i("i_structure_500_nested_arrays",
          String(repeating: "[", count: 500) + String(repeating: "]", count: 500), nil)
        i("i_structure_UTF-8_BOM_empty_object", bytes: [0xEF, 0xBB, 0xBF, 0x7B, 0x7D])
        return cases
    }()
}
