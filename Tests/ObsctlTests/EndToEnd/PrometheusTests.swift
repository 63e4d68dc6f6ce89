import Foundation
import TestSupport
import XCTest

/// `obsctl stats --format prometheus`, read back by the Prometheus project's own Python parser.
final class PrometheusTests: XCTestCase {
    /// Parses exposition text with prometheus_client and prints `name type sample-name{labels} value` per sample.
    static let parser = """
        import sys
        from prometheus_client.parser import text_string_to_metric_families
        for family in text_string_to_metric_families(sys.stdin.read()):
            for sample in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                print(family.name, family.type, f"{sample.name}{{{labels}}}", repr(float(sample.value)))
        """

    func test_statsFormatPrometheus_parsesWithPrometheusOwnParser() throws {
        try XCTSkipUnless(FileManager.default.fileExists(atPath: "/usr/lib/python3/dist-packages/prometheus_client"),
                          "Debian's python3-prometheus-client is not installed (scripts/test installs it)")
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "a", "1"])
        try obsctl(daemon, ["define", "b", "$a + 1"])
        XCTAssertEqual(try obsctl(daemon, ["get", "missing"]).status, 1)
        let watch = try Obsctl(daemon, ["watch", "a"])
        daemon.waitForWatches(1)
        let script = daemon.write(Self.parser, to: "parse.py")
        let run = try Obsctl(daemon, [], shell: "\"$OBSCTL\" stats --format prometheus | /usr/bin/python3 \(script)")
        let result = run.finish()
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        let samples = result.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(samples.contains("obsd_info gauge obsd_info{durability=\"memory\",version=\"0.1.0\"} 1.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_revision gauge obsd_revision{} 2.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_keys gauge obsd_keys{} 2.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_computed_keys gauge obsd_computed_keys{} 1.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_watches gauge obsd_watches{} 1.0"), result.stdout)
        XCTAssertTrue(samples.contains { $0.hasPrefix("obsd_events_sent counter obsd_events_sent_total{} ") }, result.stdout)
        XCTAssertTrue(samples.contains { $0.hasPrefix("obsd_overflows counter obsd_overflows_total{} ") }, result.stdout)
        XCTAssertTrue(samples.contains { $0.hasPrefix("obsd_connections gauge obsd_connections{} ") }, result.stdout)
        XCTAssertTrue(samples.contains { $0.hasPrefix("obsd_connections_accepted counter obsd_connections_accepted_total{} ") }, result.stdout)
        XCTAssertTrue(samples.contains("obsd_requests counter obsd_requests_total{op=\"set\"} 1.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_requests counter obsd_requests_total{op=\"define\"} 1.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_requests counter obsd_requests_total{op=\"restore\"} 0.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_request_errors counter obsd_request_errors_total{code=\"not_found\"} 1.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_request_errors counter obsd_request_errors_total{code=\"cycle\"} 0.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_unwritten_revisions gauge obsd_unwritten_revisions{} 0.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_unwritten_age_seconds gauge obsd_unwritten_age_seconds{} 0.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_unwritten_bytes gauge obsd_unwritten_bytes{} 0.0"), result.stdout)
        XCTAssertTrue(samples.contains("obsd_write_failing gauge obsd_write_failing{} 0.0"), result.stdout)
        XCTAssertFalse(samples.contains { $0.contains(" untyped ") }, "every field of this daemon is known: \(result.stdout)")
        XCTAssertEqual(try obsctl(daemon, ["stats", "--format", "yaml"]).stderr,
                       "obsctl: stats: unknown format 'yaml' (text, json or prometheus)\nSee 'obsctl --help'.\n")
        kill(watch.process.processIdentifier, SIGTERM)
        _ = watch.finish()
    }
}
