// The comparison's rows: each run's figure for both servers, the medians, the ratios, and the
// output as a Markdown table and as JSON.
//
// Each run measures both servers one right after the other (in turns of a tenth of a second in
// the fan-out rows), so a run's two figures are a pair taken on the same machine, and the median
// of the runs' ratios is what the goal is judged on: a shared machine's speed moves by more from
// run to run than the servers differ, and the ratio of the two medians can pair one server's good
// run with the other's bad one. Both are printed.
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
    /// The ratio of the medians.
    var ratio: Double { redisMedian == 0 ? .infinity : obsdMedian / redisMedian }
    /// The median of each run's obsd/redis ratio: the figure the goal is judged on.
    var pairedRatio: Double {
        let ratios = zip(obsd, redis).map { $1 == 0 ? Double.infinity : $0 / $1 }
        return ratios.isEmpty ? .nan : median(ratios)
    }
    var ahead: Bool { higherIsBetter ? pairedRatio >= 1 : pairedRatio <= 1 }
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
    print("| row | unit | obsd | redis | obsd/redis | runs' ratios: median | goal (on the runs' ratios) |")
    print("|---|---|---:|---:|---:|---:|---|")
    for row in rows {
        let goal = row.higherIsBetter ? ">= 1" : "<= 1"
        let mark = row.ahead ? "ahead" : "behind"
        print("| \(row.name) | \(row.unit) | \(formatFigure(row.obsdMedian, row.unit)) | \(formatFigure(row.redisMedian, row.unit)) | \(String(format: "%.2f", row.ratio)) | \(String(format: "%.2f", row.pairedRatio)) | \(goal): \(mark) |")
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
                "paired_ratio": number(row.pairedRatio),
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
