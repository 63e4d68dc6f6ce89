import Foundation
import Glibc
import XCTest
@testable import ObsDaemon

final class LoggerTests: XCTestCase {
    private final class Lines: @unchecked Sendable {
        var values: [String] = []
    }

    func test_journal_prefixesSyslogPriorities() {
        let lines = Lines()
        let log = Logger(level: .debug, journal: true) { lines.values.append($0) }
        log.debug("d")
        log.info("i")
        log.warn("w")
        log.error("e\nsecond line")
        XCTAssertEqual(lines.values, ["<7>d\n", "<6>i\n", "<4>w\n", "<3>e second line\n"])
    }

    func test_plain_namesTheLevel_andFiltersBelowIt() {
        let lines = Lines()
        let log = Logger(level: .warn, journal: false) { lines.values.append($0) }
        log.info("hidden")
        log.warn("shown")
        log.level = .error
        log.warn("hidden too")
        XCTAssertEqual(lines.values, ["obsd: warn: shown\n"])
    }
}
