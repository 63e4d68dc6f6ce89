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

final class CommandSpecTests: XCTestCase {
    let spec = CommandSpec("x", summary: "", arguments: [ArgumentSpec("A", ""), ArgumentSpec("B", optional: true, "")],
                           options: [OptionSpec(["--flag"], ""), OptionSpec(["-n", "--count"], value: "N", "")], takesCommand: true)

    func test_optionsAnywhere_valuesInlineOrNext_andNegativeNumbersArePositionals() throws {
        let parsed = try spec.parse(["--flag", "a", "-n", "3", "--count=4"])
        XCTAssertEqual(parsed.positionals, ["a"])
        XCTAssertTrue(parsed.has("--flag"))
        XCTAssertEqual(parsed.values["--count"], ["3", "4"])
        XCTAssertEqual(try spec.parse(["-5", "-"]).positionals, ["-5", "-"])
    }

    func test_doubleDash_startsTheCommand() throws {
        let parsed = try spec.parse(["a", "--", "sh", "-c", "--flag"])
        XCTAssertEqual(parsed.positionals, ["a"])
        XCTAssertEqual(parsed.command, ["sh", "-c", "--flag"])
        XCTAssertFalse(parsed.has("--flag"))
    }

    func test_usageErrors() {
        let cases: [([String], String)] = [([], "'x' needs A"), (["a", "b", "c"], "unexpected argument 'c' for 'x'"),
                                           (["a", "--nope"], "unknown option '--nope' for 'x'"), (["a", "-n"], "option '-n' needs a value"),
                                           (["a", "--flag=1"], "option '--flag' takes no value")]
        for (words, message) in cases {
            XCTAssertThrowsError(try spec.parse(words)) { XCTAssertEqual(($0 as? UsageError)?.message, message) }
        }
    }

    func test_socketDiscovery() {
        XCTAssertEqual(defaultSocketPath(explicit: "/x.sock", environment: ["OBSD_SOCKET": "/y"], uid: 1000), "/x.sock")
        XCTAssertEqual(defaultSocketPath(environment: ["OBSD_SOCKET": "/y", "XDG_RUNTIME_DIR": "/run/user/1000"], uid: 1000), "/y")
        XCTAssertEqual(defaultSocketPath(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], uid: 0), "/run/obsd/obsd.sock")
        XCTAssertEqual(defaultSocketPath(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], uid: 1000), "/run/user/1000/obsd/obsd.sock")
        XCTAssertEqual(defaultSocketPath(environment: [:], uid: 1000), "/tmp/obsd-1000/obsd.sock")
    }
}
