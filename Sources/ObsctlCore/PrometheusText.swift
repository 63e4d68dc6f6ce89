import ObsCore

/// `obsctl stats --format prometheus`: the daemon's counters in Prometheus's text exposition
/// format (version 0.0.4), for node_exporter's textfile collector. Known fields get a metric name,
/// a type and a help line; numeric fields obsctl does not know yet (a newer daemon's) come out as
/// untyped `obsd_NAME`, and objects of numbers as one labelled series each.
enum PrometheusText {
    struct Metric {
        let name: String
        let type: String
        let help: String
        /// For an object of counts: the label its member names go in.
        var label: String? = nil
    }

    static let known: [String: Metric] = [
        "rev": Metric(name: "obsd_revision", type: "gauge", help: "The store's revision: transactions committed since the store was empty."),
        "keys": Metric(name: "obsd_keys", type: "gauge", help: "Keys in the store, value and computed."),
        "computed": Metric(name: "obsd_computed_keys", type: "gauge", help: "Computed keys in the store."),
        "bindings": Metric(name: "obsd_bindings", type: "gauge", help: "Bindings in the store."),
        "connections": Metric(name: "obsd_connections", type: "gauge", help: "Client connections open now."),
        "connections_accepted": Metric(name: "obsd_connections_accepted_total", type: "counter", help: "Client connections accepted since obsd started."),
        "watches": Metric(name: "obsd_watches", type: "gauge", help: "Watches open now, on all connections."),
        "uptime_s": Metric(name: "obsd_uptime_seconds", type: "gauge", help: "Seconds since obsd started."),
        "events_sent": Metric(name: "obsd_events_sent_total", type: "counter", help: "Watch events queued for clients since obsd started."),
        "overflows": Metric(name: "obsd_overflows_total", type: "counter", help: "Times a slow client's watches overflowed and were sent a fresh snapshot."),
        "requests": Metric(name: "obsd_requests_total", type: "counter", help: "Requests answered since obsd started, by operation.", label: "op"),
        "errors": Metric(name: "obsd_request_errors_total", type: "counter", help: "Requests answered with an error since obsd started, by error code.", label: "code"),
        "unwritten_revisions": Metric(name: "obsd_unwritten_revisions", type: "gauge", help: "Committed revisions not yet written to the commit log (durability lag)."),
        "unwritten_age_s": Metric(name: "obsd_unwritten_age_seconds", type: "gauge", help: "Age of the oldest committed change not yet written to the commit log (0 when none)."),
        "unwritten_bytes": Metric(name: "obsd_unwritten_bytes", type: "gauge", help: "Bytes of commit log records waiting to be written, held in memory (0 when none)."),
        "write_failing": Metric(name: "obsd_write_failing", type: "gauge", help: "1 while the last write of the commit log failed (a full disk): writes are refused until a retry succeeds."),
    ]

    /// Cluster mode's fields (`cluster` in `stats`).
    static let cluster: [String: Metric] = [
        "applied_rev": Metric(name: "obsd_cluster_applied_revision", type: "gauge", help: "The etcd revision this host has applied."),
        "etcd_rev": Metric(name: "obsd_cluster_etcd_revision", type: "gauge", help: "The newest etcd revision this host has heard of."),
        "lag_revisions": Metric(name: "obsd_cluster_lag_revisions", type: "gauge", help: "etcd revisions this host has not applied yet."),
        "skipped_records": Metric(name: "obsd_cluster_skipped_records_total", type: "counter", help: "Records under the etcd prefix, committed while this host ran, that obsd could not read and skipped."),
        "skipped_at_start": Metric(name: "obsd_cluster_skipped_at_start", type: "gauge", help: "Records under the etcd prefix, committed before this host started, that obsd could not read and skipped."),
        "requests_sent": Metric(name: "obsd_cluster_requests_sent", type: "gauge", help: "Requests sent to etcd and not answered yet."),
        "requests_waiting": Metric(name: "obsd_cluster_requests_waiting", type: "gauge", help: "Requests waiting for one of those sent to finish."),
        "applied_from_answers": Metric(name: "obsd_cluster_applied_from_answers_total", type: "counter", help: "Plain writes of this host applied from etcd's answer, before the watch's copy of them came."),
    ]

    /// The exposition lines for a `stats` answer's fields (without `id` and `ok`).
    static func lines(_ fields: [String: JSONValue]) -> [String] {
        var fields = fields
        var lines: [String] = []
        if let members = fields.removeValue(forKey: "cluster")?.objectValue {
            if let state = members["state"]?.stringValue {
                lines += ["# HELP obsd_cluster_state The cluster state (connected, degraded, unavailable or diverged); the value is always 1.",
                          "# TYPE obsd_cluster_state gauge", "obsd_cluster_state{state=\"\(escaped(state))\"} 1"]
            }
            for (field, value) in members.sorted(by: { $0.key < $1.key }) {
                guard let metric = cluster[field], let number = number(value) else { continue }
                lines += header(metric) + ["\(metric.name) \(number)"]
            }
        }
        // Strings (version, durability) are labels of one info series, as Prometheus exporters do.
        let info = fields.filter { $0.value.stringValue != nil }.sorted { $0.key < $1.key }
        if !info.isEmpty {
            lines += ["# HELP obsd_info The daemon's version and settings, as labels; the value is always 1.",
                      "# TYPE obsd_info gauge",
                      "obsd_info{" + info.map { "\(labelName($0.key))=\"\(escaped($0.value.stringValue!))\"" }.joined(separator: ",") + "} 1"]
        }
        for (field, value) in fields.sorted(by: { $0.key < $1.key }) {
            let metric = known[field] ?? Metric(name: "obsd_" + labelName(field), type: "untyped", help: "The stats field '\(field)'.", label: "name")
            if let number = number(value) {
                lines += header(metric) + ["\(metric.name) \(number)"]
            } else if let members = value.objectValue {
                let series = members.sorted { $0.key < $1.key }.compactMap { member in
                    number(member.value).map { "\(metric.name){\(metric.label ?? "name")=\"\(escaped(member.key))\"} \($0)" }
                }
                if !series.isEmpty { lines += header(metric) + series }
            }
        }
        return lines
    }

    private static func header(_ metric: Metric) -> [String] {
        ["# HELP \(metric.name) \(metric.help)", "# TYPE \(metric.name) \(metric.type)"]
    }

    private static func number(_ value: JSONValue) -> String? {
        switch value {
        case .int(let i): "\(i)"
        case .double(let d): "\(d)"
        case .bool(let b): b ? "1" : "0"
        default: nil
        }
    }

    /// A metric or label name: `[a-zA-Z_][a-zA-Z0-9_]*`.
    private static func labelName(_ text: String) -> String {
        String(text.map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" })
    }

    /// A label value: backslash, double quote and line feed escaped.
    private static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
