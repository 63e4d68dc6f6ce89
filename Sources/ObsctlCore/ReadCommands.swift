import ObsClient
import ObsCore

/// get, eval, list, describe, graph, stats, dump, ping.
enum ReadCommands {
    static func get(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let connection = try context.connect()
        // Pipelined: the answers are printed as they come, while later requests go out. Printed
        // by a thread of their own: while stdout is slow, the answers under way are taken off the
        // socket (at most a window's worth more: no request goes out meanwhile).
        var status: Int32 = 0
        let output = context.output
        let json = parsed.has("--json")
        let printer = LinePrinter(capacity: ObsConnection.pipelineWindow)
        defer { printer.finish() }
        let requests = parsed.positionals.map { (op: "get", fields: ["key": JSONValue.string($0)]) }
        try connection.pipeline(requests, deadline: { context.deadline }) { _, result in
            let write: @Sendable () -> Void
            switch result {
            case .success(let response):
                let line = render(response["value"] ?? .null, json: json)
                write = { output.line(line) }
            case .failure(let error):
                // A key that cannot be read (missing, or a computed in error) does not stop the rest,
                // and prints an empty line: line N is always key N, for `read a b c`.
                guard case .server(let failure) = error else { throw error }
                let message = ClientError.describe(failure)
                write = {
                    output.error(message)
                    output.line("")
                }
                status = 1
            }
            printer.enqueue(write) { connection.takeArrived(waitingAtMost: 0) }
        }
        return status
    }

    static func eval(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let response = try context.request("eval", ["expr": .string(parsed.positionals[0])])
        context.output.line(render(response["value"] ?? .null, json: parsed.has("--json")))
        return 0
    }

    static func list(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        var fields: [String: JSONValue] = [:]
        if let pattern = parsed.positionals.first { fields["pattern"] = .string(pattern) }
        let response = try context.request("list", fields)
        if parsed.has("--json") {
            context.output.line(response.line)
            return 0
        }
        let rows = (response["keys"]?.arrayValue ?? []).map { [$0["key"]?.stringValue ?? "", $0["kind"]?.stringValue ?? ""] }
        for line in TextTable.lines(rows) { context.output.line(line) }
        return 0
    }

    static func describe(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let response = try context.request("describe", ["key": .string(parsed.positionals[0])])
        if parsed.has("--json") {
            context.output.line(response.line)
            return 0
        }
        var rows: [[String]] = []
        func row(_ name: String, _ value: JSONValue?) {
            guard let value else { return }
            rows.append([name + ":", Self.describeText(value)])
        }
        row("key", response["key"])
        row("kind", response["kind"])
        row("value", response["value"])
        if let error = response["error"] {
            rows.append(["error:", "\(error["code"]?.stringValue ?? ""): \(error["message"]?.stringValue ?? "")"])
        }
        row("expr", response["expr"])
        row("deps", response["deps"])
        row("dependents", response["dependents"])
        if let binding = response["binding"] {
            var text = binding["from"]?.stringValue ?? ""
            if binding["two_way"]?.boolValue == true { text += " (two-way)" }
            if let map = binding["map"]?.stringValue { text += " map \(map)" }
            if let unmap = binding["unmap"]?.stringValue { text += " unmap \(unmap)" }
            rows.append(["binding:", text])
        }
        row("bound to", response["bound_to"])
        row("rev", response["rev"])
        row("created_rev", response["created_rev"])
        row("version", response["version"])
        if let ttl = response["ttl_ms"]?.doubleValue { rows.append(["ttl:", "\(formatSeconds(ttl / 1000)) left"]) }
        row("ephemeral", response["ephemeral"])
        for line in TextTable.lines(rows) { context.output.line(line) }
        return 0
    }

    /// Lists as comma-separated names ("-" when empty), other values as `get` prints them.
    static func describeText(_ value: JSONValue) -> String {
        if let items = value.arrayValue {
            return items.isEmpty ? "-" : items.map { ValueArgument.renderLine($0) }.joined(separator: ", ")
        }
        return ValueArgument.renderLine(value)
    }

    static func graph(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        var fields: [String: JSONValue] = [:]
        if let pattern = parsed.positionals.first { fields["pattern"] = .string(pattern) }
        let response = try context.request("graph", fields)
        if parsed.has("--json") {
            context.output.line(response.line)
            return 0
        }
        let nodes = (response["nodes"]?.arrayValue ?? []).map { ($0["key"]?.stringValue ?? "", $0["kind"]?.stringValue ?? "") }
        let edges = (response["edges"]?.arrayValue ?? []).map {
            ($0["from"]?.stringValue ?? "", $0["to"]?.stringValue ?? "", $0["type"]?.stringValue ?? "")
        }
        for line in parsed.has("--dot") ? GraphText.dot(nodes: nodes, edges: edges) : GraphText.text(nodes: nodes, edges: edges) {
            context.output.line(line)
        }
        return 0
    }

    static func stats(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let format = parsed.value("--format") ?? (parsed.has("--json") ? "json" : "text")
        guard ["text", "json", "prometheus"].contains(format) else {
            throw UsageError("stats: unknown format '\(format)' (text, json or prometheus)")
        }
        let connection = try context.connect()
        let response = try connection.request("stats", deadline: context.deadline)
        if format == "json" {
            context.output.line(response.line)
            return 0
        }
        var fields = response.fields.filter { $0.key != "id" && $0.key != "ok" }
        // A daemon older than its `version` field still says it in hello.
        if fields["version"] == nil { fields["version"] = try connection.request("hello", deadline: context.deadline)["version"] }
        if format == "prometheus" {
            for line in PrometheusText.lines(fields) { context.output.line(line) }
            return 0
        }
        fields["obsctl_version"] = .string(obsctlVersion)
        let rows = fields.sorted { $0.key < $1.key }.map { [$0.key, statsText($0.value, allMembers: $0.key == "cluster")] }
        for line in TextTable.lines(rows) { context.output.line(line) }
        return 0
    }

    /// A counter as `stats` prints it; a group of counts (requests by operation, errors by code)
    /// as its non-zero members, `get 2, set 5`, or `-`. `allMembers` keeps the zeros: the
    /// cluster's `lag_revisions 0` and `skipped_records 0` are what an operator looks for.
    static func statsText(_ value: JSONValue, allMembers: Bool = false) -> String {
        guard let members = value.objectValue else { return ValueArgument.renderLine(value) }
        let counted = members.filter { allMembers || $0.value != .int(0) }.sorted { $0.key < $1.key }
        return counted.isEmpty ? "-" : counted.map { "\($0.key) \(ValueArgument.renderLine($0.value))" }.joined(separator: ", ")
    }

    static func dump(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let response = try context.request("dump")
        let state = response.fields.filter { $0.key != "id" && $0.key != "ok" }
        context.output.line(JSONValue.object(state).encoded)
        return 0
    }

    static func ping(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let connection = try context.connect()
        let hello = try connection.request("hello", deadline: context.deadline)
        let start = monotonicNow()
        try connection.request("ping", deadline: context.deadline)
        let elapsed = monotonicNow() - start
        let version = hello["version"].map(ValueArgument.renderLine) ?? "unknown"
        context.output.line("pong from \(context.socketPath) in \(formatSeconds(elapsed)) (obsd \(version), obsctl \(obsctlVersion))")
        return 0
    }

    /// `get` and `eval` output: strings raw unless `json` (or they hold a line break), everything
    /// else compact JSON.
    static func render(_ value: JSONValue, json: Bool) -> String {
        json ? value.encoded : ValueArgument.renderLine(value)
    }

    /// A short human duration: "0.42 ms", "12.3 s".
    static func formatSeconds(_ seconds: Double) -> String {
        if seconds < 1 {
            let ms = (seconds * 100_000).rounded() / 100
            return "\(ms) ms"
        }
        return "\((seconds * 10).rounded() / 10) s"
    }
}
