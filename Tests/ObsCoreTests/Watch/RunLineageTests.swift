// The rule a watch resumed from another run follows (RunLineage), and the text of a run's identity.
import XCTest
@testable import ObsCore

final class RunLineageUnitTests: XCTestCase {
    func test_aResume_isTakenFromThisRun_orFromTheRunThatWroteTheStateAtItsRevisionOnly() {
        let lineage = RunLineage(run: 2, previous: 1, loadedRev: 10)
        XCTAssertTrue(lineage.resumes(since: 4, seen: 2), "this run: the history decides")
        XCTAssertTrue(lineage.resumes(since: 99, seen: 2))
        XCTAssertTrue(lineage.resumes(since: 10, seen: 1), "the run that wrote the state, at its revision")
        XCTAssertFalse(lineage.resumes(since: 11, seen: 1), "past the state loaded: that run went on in another state")
        XCTAssertFalse(lineage.resumes(since: 9, seen: 1), "before it: no history reaches back across a restart")
        XCTAssertFalse(lineage.resumes(since: 10, seen: 3), "another run")
        XCTAssertFalse(lineage.resumes(since: 10, seen: nil), "a run no daemon gave out")
        let unknown = RunLineage(run: 2, previous: nil, loadedRev: 10)
        XCTAssertFalse(unknown.resumes(since: 10, seen: 1), "no run known to have written the state")
    }

    func test_aRunsText_isSixteenLowercaseHexDigits_andOnlyThatParses() {
        XCTAssertEqual(RunLineage.text(0xab), "00000000000000ab")
        XCTAssertEqual(RunLineage.text(.max), "ffffffffffffffff")
        for run: UInt64 in [1, 0xab, 0x0123_4567_89ab_cdef, .max] {
            XCTAssertEqual(RunLineage.parse(RunLineage.text(run)), run)
        }
        for text in ["", "ab", "FFFFFFFFFFFFFFFF", "0x0000000000000ab", "00000000000000ab0", "+000000000000000a", "-000000000000000a"] {
            XCTAssertNil(RunLineage.parse(text), text)
        }
    }
}
