import XCTest
@testable import ObsCore

/// An in-memory store for expression tests: keys, keys in the error state, a fixed clock, and a
/// log of what each evaluation read, so tests can check dependency recording.
final class TestContext: ExpressionContext {
    var keys: [String: JSONValue]
    var failing: [String: ObsError] = [:]
    var now: Double
    private(set) var dependencies: [String] = []
    private(set) var peeked: [String] = []
    private(set) var patterns: [String] = []

    init(_ keys: [String: JSONValue] = [:], now: Double = 1_700_000_000) {
        self.keys = keys
        self.now = now
    }

    func value(ofKey name: String) throws(ObsError) -> JSONValue? {
        dependencies.append(name)
        if let error = failing[name] { throw error }
        return keys[name]
    }

    func peek(key name: String) throws(ObsError) -> JSONValue? {
        peeked.append(name)
        if let error = failing[name] { throw error }
        return keys[name]
    }

    func exists(key name: String) -> Bool {
        dependencies.append(name)
        return keys[name] != nil
    }

    func match(pattern: String) throws(ObsError) -> [(key: String, value: JSONValue)] {
        patterns.append(pattern)
        let segments = pattern.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard segments.allSatisfy({ !$0.isEmpty }) else {
            throw ObsError(.badKey, "bad pattern \"\(pattern)\"")
        }
        return keys.keys.filter { TestContext.matches(segments[...], $0.split(separator: ".").map(String.init)[...]) }
            .sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) })
            .map { (key: $0, value: keys[$0]!) }
    }

    /// `*` is one segment, `**` zero or more: the watch pattern grammar, naively.
    static func matches(_ pattern: ArraySlice<String>, _ key: ArraySlice<String>) -> Bool {
        guard let head = pattern.first else { return key.isEmpty }
        if head == "**" {
            return (0...key.count).contains { matches(pattern.dropFirst(), key.dropFirst($0)) }
        }
        guard let k = key.first, head == "*" || head == k else { return false }
        return matches(pattern.dropFirst(), key.dropFirst())
    }
}

/// Exactly the same value: equal, and every number of the same kind (int or double).
func isSame(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case let (.int(x), .int(y)): return x == y
    case let (.double(x), .double(y)): return x == y
    case let (.array(x), .array(y)): return x.count == y.count && zip(x, y).allSatisfy(isSame)
    case let (.object(x), .object(y)): return x.count == y.count && x.allSatisfy { k, v in y[k].map { isSame(v, $0) } ?? false }
    case (.int, _), (.double, _), (.array, _), (.object, _): return false
    default: return a == b
    }
}

extension XCTestCase {
    func evaluate(_ source: String, _ context: TestContext = TestContext(), value: JSONValue? = nil,
                  allowValue: Bool = false) throws(ObsError) -> JSONValue {
        try Expression.compile(source, allowValue: allowValue).evaluate(in: context, value: value)
    }

    /// Checks each `(source, expected)` row evaluates to exactly `expected`.
    func assertEvaluations(_ rows: [(String, JSONValue)], keys: [String: JSONValue] = [:],
                           file: StaticString = #filePath, line: UInt = #line) {
        for (source, expected) in rows {
            do {
                let result = try evaluate(source, TestContext(keys))
                XCTAssertTrue(isSame(result, expected), "\(source) gave \(result), expected \(expected)", file: file, line: line)
            } catch {
                XCTFail("\(source) failed: \(error)", file: file, line: line)
            }
        }
    }

    /// Checks each `(source, message)` row fails to evaluate with eval_error and exactly `message`.
    func assertEvalErrors(_ rows: [(String, String)], keys: [String: JSONValue] = [:],
                          file: StaticString = #filePath, line: UInt = #line) {
        for (source, message) in rows {
            assertFails(source, .evalError, message, keys: keys, file: file, line: line)
        }
    }

    /// Checks each `(source, message)` row is rejected at compile time with parse_error.
    func assertParseErrors(_ rows: [(String, String)], allowValue: Bool = false,
                           file: StaticString = #filePath, line: UInt = #line) {
        for (source, message) in rows {
            do throws(ObsError) {
                let compiled = try Expression.compile(source, allowValue: allowValue)
                XCTFail("\(source) compiled to \(compiled)", file: file, line: line)
            } catch {
                XCTAssertEqual(error.code, .parseError, source, file: file, line: line)
                XCTAssertEqual(error.message, message, source, file: file, line: line)
                XCTAssertEqual(error.details["pos"], .int(Int64(position(in: message))), source, file: file, line: line)
            }
        }
    }

    func assertFails(_ source: String, _ code: ObsError.Code, _ message: String, keys: [String: JSONValue] = [:],
                     file: StaticString = #filePath, line: UInt = #line) {
        do throws(ObsError) {
            let result = try evaluate(source, TestContext(keys))
            XCTFail("\(source) gave \(result)", file: file, line: line)
        } catch {
            XCTAssertEqual(error.code, code, source, file: file, line: line)
            XCTAssertEqual(error.message, message, source, file: file, line: line)
            if code == .evalError {
                XCTAssertEqual(error.details["pos"], .int(Int64(position(in: message))), source, file: file, line: line)
            }
        }
    }

    /// The offset a message ends with ("... at 7").
    private func position(in message: String) -> Int {
        Int(message.split(separator: " ").last ?? "") ?? -1
    }
}
