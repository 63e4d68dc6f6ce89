import XCTest
@testable import ObsCore

/// Every example row of docs/expressions.md (`| `expression` | `result or error` |`) holds.
final class ExpressionDocsTests: XCTestCase {
    private var documentedRows: [(source: String, result: String)] {
        get throws {
            let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../../docs/expressions.md")
            return try String(contentsOf: docs, encoding: .utf8).split(separator: "\n").compactMap { line in
                guard line.hasPrefix("| `"), line.hasSuffix("` |") else { return nil }
                let cells = line.dropFirst(3).dropLast(3).components(separatedBy: "` | `")
                return cells.count == 2 ? (cells[0], cells[1]) : nil
            }
        }
    }

    func test_docs_everyExampleEvaluatesAsDocumented() throws {
        let rows = try documentedRows
        XCTAssertGreaterThan(rows.count, 90)
        for row in rows {
            let context = TestContext([
                "a": 1, "sensor.a.online": true, "sensor.b.online": false, "cart.items.1": 10, "cart.items.2": 5.5,
            ], now: 1_700_000_000)
            do throws(ObsError) {
                let value = try evaluate(row.source, context)
                XCTAssertEqual(value, try? JSONValue.parse(row.result), row.source)
            } catch {
                XCTAssertEqual(error.description, row.result, row.source)
            }
        }
    }

    func test_docs_everyFunctionHasAnExample() throws {
        let sources = try documentedRows.map(\.source)
        for builtin in Builtin.all {
            XCTAssertTrue(sources.contains { $0.hasPrefix(builtin.name + "(") }, "\(builtin.name) has no example")
        }
    }
}
