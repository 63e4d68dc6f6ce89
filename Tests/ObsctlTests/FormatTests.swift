import Foundation
@testable import ObsClient
import ObsCore
@testable import ObsctlCore
import XCTest

final class FormatTests: XCTestCase {
    func event(_ line: String) -> WatchEvent {
        guard case .object(let fields) = try! JSONValue.parse(line) else { fatalError() }
        return WatchEvent(fields: fields)
    }

    func test_format_placeholders_braces_andMissingFields() {
        let change = event(#"{"event":"change","watch":1,"key":"vol","old":0.4,"new":"loud","rev":7,"created":false}"#)
        XCTAssertEqual(EventFormat.render("{key}={new} (was {old}) @{rev} [{event}]", change), "vol=loud (was 0.4) @7 [change]")
        XCTAssertEqual(EventFormat.render("{{key}} }} {channel}{payload}|{nope}|{", change), "{key} } |{nope}|{")
        let initial = event(#"{"event":"initial","key":"a","kind":"value","value":[1],"rev":2}"#)
        XCTAssertEqual(EventFormat.render("{new}|{old}", initial), "[1]|")
        let publish = event(#"{"event":"publish","channel":"bar.click","payload":{"b":1}}"#)
        XCTAssertEqual(EventFormat.render("{channel}:{payload}:{key}", publish), #"bar.click:{"b":1}:"#)
        let time = EventFormat.render("{time}", publish, now: Date(timeIntervalSince1970: 0))
        XCTAssertEqual(time, "1970-01-01T00:00:00.000Z")
    }

    func test_values_lines() {
        XCTAssertEqual(EventFormat.valuesLine(event(#"{"event":"change","key":"k","new":"x","rev":1}"#)), "x")
        XCTAssertEqual(EventFormat.valuesLine(event(#"{"event":"initial","key":"k","value":{"a":1},"rev":1}"#)), #"{"a":1}"#)
        XCTAssertEqual(EventFormat.valuesLine(event(#"{"event":"delete","key":"k","old":1,"rev":2}"#)), "")
        XCTAssertNil(EventFormat.valuesLine(event(#"{"event":"synced","rev":2}"#)))
    }

    func test_environment_ofACommand() {
        let env = EventFormat.environment(event(#"{"event":"change","key":"k","old":1,"new":"two","rev":3,"created":false}"#))
        XCTAssertEqual(env["OBS_KEY"], "k")
        XCTAssertEqual(env["OBS_VALUE"], "two")
        XCTAssertEqual(env["OBS_OLD"], "1")
        XCTAssertEqual(env["OBS_REV"], "3")
        XCTAssertEqual(env["OBS_CHANNEL"], "")
    }

    func test_watchField_isCutOut_keepingEveryOtherByte() {
        XCTAssertEqual(WatchEvent.removingWatchField(#"{"event":"change","watch":12,"key":"watch","new":",\"watch\":3","rev":1}"#),
                       #"{"event":"change","key":"watch","new":",\"watch\":3","rev":1}"#)
    }
}
