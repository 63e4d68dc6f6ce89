@testable import ObsCore
import XCTest

/// The key-name and pattern grammar, and the pattern index.
final class KeyNameTests: XCTestCase {
    func test_keyNames_segmentsOfNameCharactersJoinedByDots() {
        for name in ["volume", "sensor.kitchen.temp", "net.wifi-5g.ssid", "A_b-9", String(repeating: "x", count: 256)] {
            XCTAssertTrue(KeyName.isValid(name), name)
        }
        for name in ["", ".", "a.", ".a", "a..b", "a b", "a*", "é", "a/b", String(repeating: "x", count: 257)] {
            XCTAssertFalse(KeyName.isValid(name), name)
        }
    }

    func test_patterns_starIsOneSegmentDoubleStarAny() throws {
        let cases: [(String, String, Bool)] = [
            ("sensor.*", "sensor.a", true), ("sensor.*", "sensor", false), ("sensor.*", "sensor.a.b", false),
            ("sensor.**", "sensor", true), ("sensor.**", "sensor.a", true), ("sensor.**", "sensor.a.b", true),
            ("sensor.**", "sensors", false), ("**", "anything.at.all", true), ("*.temp", "kitchen.temp", true),
            ("*.temp", "a.b.temp", false), ("a.**.z", "a.z", true), ("a.**.z", "a.b.c.z", true), ("a.**.z", "a.b.c", false),
            ("a.b", "a.b", true), ("a.b", "a.bc", false), ("a.b", "a", false), ("a", "a.b", false),
            ("**.z", "z", true), ("**.z", "a.b.z", true), ("**.z", "a.b", false), ("**.z", "a.zz", false),
            ("a.**.b.**", "a.x.b.y.z", true), ("a.**.b.**", "a.b", true), ("a.**.b.**", "a.x.c", false),
            ("*.*", "a.b", true), ("*.*", "a", false), ("*.*", "a.b.c", false), ("**.**", "a", true),
        ]
        for (pattern, name, expected) in cases {
            XCTAssertEqual(try KeyPattern(pattern).matches(name), expected, "\(pattern) ~ \(name)")
        }
        for bad in ["", "a.", "a..b", "***", "a.*b", "a b"] {
            XCTAssertThrowsError(try KeyPattern(bad), bad) { XCTAssertEqual(($0 as? ObsError)?.code, .badKey) }
        }
    }

    func test_patternIndex_looksOnlyInTheBucketsOfTheNamesPrefixes() throws {
        var index = PatternIndex<WatchedPattern>()
        for i in 0..<1000 { let pattern = try KeyPattern("room\(i).*")
            _ = index.entry(for: pattern) { WatchedPattern(pattern: pattern) } }
        for text in ["**", "room7.temp"] {
            let pattern = try KeyPattern(text)
            _ = index.entry(for: pattern) { WatchedPattern(pattern: pattern) }
        }
        var seen: [String] = []
        index.forEachEntry(matching: "room7.temp") { seen.append($0.pattern.text) }
        XCTAssertEqual(Set(seen), ["**", "room7.*", "room7.temp"])
    }

    /// The buckets of every prefix of the name are visited: "", "a", "a.b" and "a.b.c".
    func test_patternIndex_visitsEveryPrefixOfTheName() throws {
        var index = PatternIndex<WatchedPattern>()
        for text in ["**", "*.b.c", "a.*", "a.**", "a.b.*", "a.b.c", "a.b.c.*", "a.c.*", "b.**"] {
            let pattern = try KeyPattern(text)
            _ = index.entry(for: pattern) { WatchedPattern(pattern: pattern) }
        }
        var seen: [String] = []
        index.forEachEntry(matching: "a.b.c") { seen.append($0.pattern.text) }
        XCTAssertEqual(seen.sorted(), ["**", "*.b.c", "a.**", "a.b.*", "a.b.c"])
        seen = []
        index.forEachEntry(matching: "b") { seen.append($0.pattern.text) }
        XCTAssertEqual(seen.sorted(), ["**", "b.**"])
    }
}
