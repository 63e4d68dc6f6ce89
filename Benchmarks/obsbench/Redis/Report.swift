// The comparison's rows: each run's figure for both servers, the medians, the ratio, and the
// output as a Markdown table and as JSON.
import Foundation

struct ComparisonRow {
    var name: String
    var unit: String
    /// Throughput rows: higher is better; latency and memory rows: lower is better.
    var higherIsBetter: Bool
    var obsd: [Double] = []
    var redis: [Double] = []

    var obsdMedian: Double { obsd.isEmpty ? .nan : median(obsd) }
    var redisMedian: Double { redis.isEmpty ? .nan : median(redis) }
    var ratio: Double { redisMedian == 0 ? .infinity : obsdMedian / redisMedian }
    var ahead: Bool { higherIsBetter ? ratio >= 1 : ratio <= 1 }
}

func formatFigure(_ value: Double, _ unit: String) -> String {
    guard value.isFinite else { return "n/a" }
    switch unit {
    case "ms": return String(format: "%.3f", value)
    case "MiB": return String(format: "%.1f", value)
    default: return value >= 100 ? String(format: "%.0f", value) : String(format: "%.2f", value)
    }
}

func printTable(_ rows: [ComparisonRow]) {
    print("| row | unit | obsd | redis | obsd/redis | goal |")
    print("|---|---|---:|---:|---:|---|")
    for row in rows {
        let goal = row.higherIsBetter ? ">= 1" : "<= 1"
        let mark = row.ahead ? "ahead" : "behind"
        print("| \(row.name) | \(row.unit) | \(formatFigure(row.obsdMedian, row.unit)) | \(formatFigure(row.redisMedian, row.unit)) | \(String(format: "%.2f", row.ratio)) | \(goal): \(mark) |")
    }
}

func writeJSON(_ rows: [ComparisonRow], context: [String: String], runs: Int, to path: String) throws(BenchError) {
    func number(_ value: Double) -> Any { value.isFinite ? value : NSNull() }
    let document: [String: Any] = [
        "context": context,
        "runs": runs,
        "rows": rows.map { row in
            [
                "name": row.name, "unit": row.unit, "better": row.higherIsBetter ? "higher" : "lower",
                "obsd": number(row.obsdMedian), "redis": number(row.redisMedian), "ratio": number(row.ratio),
                "ahead": row.ahead, "obsd_runs": row.obsd.map(number), "redis_runs": row.redis.map(number),
            ] as [String: Any]
        },
    ]
    do {
        let data = try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: URL(fileURLWithPath: path))
    } catch {
        throw BenchError("cannot write \(path): \(error)")
    }
}
