import XCTest
@testable import ObsCore

/// now(), ago() and time_format() on a fixed clock.
final class ExpressionTimeTests: XCTestCase {
    /// 2023-11-14 22:13:20.25 UTC, a Tuesday.
    private let clock = 1_700_000_000.25

    func test_now_readsTheInjectedClock() throws {
        XCTAssertTrue(isSame(try evaluate("now()", TestContext(now: clock)), .double(clock)))
        XCTAssertEqual(try evaluate("now() - 60", TestContext(now: clock)), .double(clock - 60))
    }

    func test_usesTime_isSetByClockReadingCallsOnly() throws {
        XCTAssertTrue(try Expression.compile("now()").usesTime)
        XCTAssertTrue(try Expression.compile("$a ? 1 : ago($t)").usesTime)
        XCTAssertTrue(try Expression.compile("time_format(now(), \"%H\")").usesTime)
        XCTAssertFalse(try Expression.compile("time_format($t, \"%H\")").usesTime)
        XCTAssertFalse(try Expression.compile("$a + 1").usesTime)
    }

    func test_ago_wordsTheDistanceFromNow() throws {
        let rows: [(Double, String)] = [
            (0, "just now"), (59, "just now"), (-59, "just now"), (60, "1 minute ago"), (300, "5 minutes ago"),
            (3_599, "59 minutes ago"), (3_600, "1 hour ago"), (-7_200, "in 2 hours"), (-7_199, "in 1 hour"),
            (86_400 * 3, "3 days ago"), (86_400 * 45, "1 month ago"), (-86_400 * 400, "in 1 year"),
            (86_400 * 365 * 3, "3 years ago"),
        ]
        for (secondsAgo, words) in rows {
            let context = TestContext(["t": .double(clock - secondsAgo)], now: clock)
            XCTAssertEqual(try evaluate("ago($t)", context), .string(words), "\(secondsAgo) s ago")
        }
        assertEvalErrors([("ago(\"yesterday\")", "ago: timestamp must be a number, got string at 0")])
    }

    func test_timeFormat_rendersStrftimeConversionsInUTC() throws {
        let rows: [(String, String)] = [
            ("%Y-%m-%d %H:%M:%S", "2023-11-14 22:13:20"), ("%F %T", "2023-11-14 22:13:20"), ("%D %R", "11/14/23 22:13"),
            ("%a %A %b %B %h", "Tue Tuesday Nov November Nov"), ("%c", "Tue Nov 14 22:13:20 2023"),
            ("%I:%M %p", "10:13 PM"), ("%l|%k|%e", "10|22|14"), ("%j %u %w %y %C", "318 2 2 23 20"),
            ("%s", "1700000000"), ("%L %f", "250 250000"), ("%z %Z", "+0000 UTC"), ("100%% %n%t", "100% \n\t"),
            ("no conversions", "no conversions"), ("", ""),
        ]
        for (format, expected) in rows {
            let context = TestContext(["t": .double(clock)])
            XCTAssertEqual(try evaluate("time_format($t, \(Printer.quote(format)))", context), .string(expected), format)
        }
    }

    func test_timeFormat_coversCalendarEdges() throws {
        let rows: [(Double, String)] = [
            (0, "1970-01-01 00 Thu 001"), (-1, "1969-12-31 23 Wed 365"), (951_782_400, "2000-02-29 00 Tue 060"),
            (1_709_251_199, "2024-02-29 23 Thu 060"), (-62_135_596_800, "1-01-01 00 Mon 001"),
            (253_402_300_799, "9999-12-31 23 Fri 365"), (1_704_067_200, "2024-01-01 00 Mon 001"),
        ]
        for (timestamp, expected) in rows {
            let context = TestContext(["t": .double(timestamp)])
            XCTAssertEqual(try evaluate("time_format($t, \"%Y-%m-%d %H %a %j\")", context), .string(expected), "\(timestamp)")
        }
    }

    func test_timeFormat_zonePrefixSelectsATimeZone() throws {
        let context = TestContext(["t": .double(clock)])
        XCTAssertEqual(try evaluate("time_format($t, \"TZ=Asia/Kolkata %H:%M %z\")", context), "03:43 +0530")
        XCTAssertEqual(try evaluate("time_format($t, \"TZ=America/New_York %F %H %z\")", context), "2023-11-14 17 -0500")
        XCTAssertEqual(try evaluate("time_format($t, \"TZ=UTC %H\")", context), "22")
    }

    func test_timeFormat_errors() {
        assertEvalErrors([
            ("time_format(0, \"%Q\")", "time_format: unknown conversion '%Q' at 0"),
            ("time_format(0, \"50%\")", "time_format: format ends with a lone '%' at 0"),
            ("time_format(0, \"TZ=Mars/Base %H\")", "time_format: unknown time zone \"Mars/Base\" at 0"),
            ("time_format(1e12, \"%Y\")", "time_format: timestamp is outside years 1 to 9999 at 0"),
            ("time_format(\"0\", \"%Y\")", "time_format: timestamp must be a number, got string at 0"),
            ("time_format(0, 1)", "time_format: format must be a string, got number at 0"),
        ])
    }
}
