import Foundation
import ObsClient
import ObsCore

/// set, del, incr, define, bind, unbind, publish, restore, apply.
enum WriteCommandsRunner {
    /// define, bind, unbind, del: the shared request builder, one request each, pipelined.
    static func simple(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let name = parsed.commandName
        let requests = try WriteCommands.requests(name, parsed)
        let connection = try context.connect()
        for request in requests { try connection.send(request.op, request.fields) }
        for request in requests {
            do throws(ClientError) {
                _ = try connection.response(deadline: context.deadline)
            } catch {
                guard case .server(let failure) = error else { throw error }
                throw ClientError.server(inObsctlTerms(failure, request.fields))
            }
        }
        return 0
    }

    /// The daemon's message in the words of obsctl's options: `exists` names the protocol's
    /// `replace: true`, which obsctl spells `--replace`.
    static func inObsctlTerms(_ failure: ObsError, _ fields: [String: JSONValue]) -> ObsError {
        guard failure.code == .exists, let key = fields["key"]?.stringValue else { return failure }
        return ObsError(.exists, "'\(key)' is a value key; define --replace makes it a computed key", details: failure.details)
    }

    static func set(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let mode = try WriteCommands.valueMode(parsed)
        guard parsed.positionals[1] == "-" else {
            let fields = try WriteCommands.setFields(parsed, value: WriteCommands.value(parsed.positionals[1], mode: mode))
            if let warning = WriteCommands.stringWarning(parsed.positionals[1], mode: mode) { context.output.error(warning) }
            let connection = try context.connect()
            try connection.request("set", fields, deadline: context.deadline)
            if parsed.has("--ephemeral") { holdUntilStdinCloses() }
            return 0
        }
        // `sensor | obsctl set temp -`: each line as it arrives, on one connection.
        let connection = try context.connect()
        while let line = readLine() {
            let fields = try WriteCommands.setFields(parsed, value: WriteCommands.value(line, mode: mode))
            try connection.request("set", fields, deadline: context.deadline)
        }
        return 0
    }

    /// An ephemeral key lives as long as its connection: obsctl stays until stdin closes, and a
    /// signal's default action ends the process, which closes the connection just the same.
    private static func holdUntilStdinCloses() {
        while readLine() != nil {}
    }

    static func incr(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        var fields: [String: JSONValue] = ["key": .string(parsed.positionals[0])]
        if parsed.positionals.count > 1 {
            let text = parsed.positionals[1]
            guard let by = try? JSONValue.parse(text), by.doubleValue != nil, by.boolValue == nil else {
                throw UsageError("incr: BY must be a number, not '\(text)'")
            }
            fields["by"] = by
        }
        let response = try context.request("incr", fields)
        context.output.line(ReadCommands.render(response["value"] ?? .null, json: parsed.has("--json")))
        return 0
    }

    static func publish(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let mode = try WriteCommands.valueMode(parsed)
        let channel = JSONValue.string(parsed.positionals[0])
        let connection = try context.connect()
        guard parsed.positionals.count > 1, parsed.positionals[1] == "-" else {
            let payload = try parsed.positionals.count > 1 ? WriteCommands.value(parsed.positionals[1], mode: mode) : .null
            if parsed.positionals.count > 1, let warning = WriteCommands.stringWarning(parsed.positionals[1], mode: mode) {
                context.output.error(warning)
            }
            try connection.request("publish", ["channel": channel, "payload": payload], deadline: context.deadline)
            return 0
        }
        while let line = readLine() {
            let payload = try WriteCommands.value(line, mode: mode)
            try connection.request("publish", ["channel": channel, "payload": payload], deadline: context.deadline)
        }
        return 0
    }

    static func restore(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let input = FileHandle.standardInput.readDataToEndOfFile()
        guard case .object(var fields)? = try? JSONValue.parse(Array(input)) else {
            throw UsageError("restore: stdin is not a JSON object (the output of obsctl dump)")
        }
        fields["op"] = nil
        fields["id"] = nil
        if parsed.has("--split") {
            guard !parsed.has("--replace") else {
                throw UsageError("restore: --split adds to the state and cannot --replace it (restore into an empty state, or delete its keys first)")
            }
            guard fields["keys"]?.arrayValue != nil else {
                throw UsageError("restore: stdin has no keys array (the output of obsctl dump)")
            }
        }
        if parsed.has("--replace") { fields["replace"] = .bool(true) }
        let connection = try context.connect()
        let lineLimit = try connection.request("hello", deadline: context.deadline)["max_line_bytes"]?.intValue ?? 1 << 20
        guard parsed.has("--split") else {
            try restoreOnce(fields, connection, partBytes: Int(lineLimit) / 2, deadline: context.deadline)
            return 0
        }
        // As many transactions as the daemon needs: all in one when it takes them, else halves
        // of what it refused as too large (in cluster mode, etcd's bounds on one transaction),
        // down to one item. Value keys first, then computed keys and bindings, so that every
        // transaction restores what the ones before it left whole.
        let keys = fields["keys"]?.arrayValue ?? []
        let values = keys.filter { $0.objectValue?["kind"]?.stringValue != "computed" }
        let items = values.map { (item: $0, isBinding: false) }
            + keys.filter { $0.objectValue?["kind"]?.stringValue == "computed" }.map { (item: $0, isBinding: false) }
            + (fields["bindings"]?.arrayValue ?? []).map { (item: $0, isBinding: true) }
        var start = 0, size = max(1, items.count), transactions = 0
        while start < items.count {
            let part = items[start..<min(items.count, start + size)]
            let fields: [String: JSONValue] = ["keys": .array(part.filter { !$0.isBinding }.map(\.item)),
                                               "bindings": .array(part.filter(\.isBinding).map(\.item))]
            do {
                try restoreOnce(fields, connection, partBytes: Int(lineLimit) / 2, deadline: context.deadline)
            } catch {
                guard case .server(let failure) = error, failure.code == .tooLarge, part.count > 1 else { throw error }
                size = part.count / 2
                continue
            }
            start += part.count
            transactions += 1
        }
        if transactions > 1 { context.output.error("restore: \(items.count) items in \(transactions) transactions") }
        return 0
    }

    /// Restores `fields` as one transaction: a state larger than a request line goes in parts on
    /// one connection (`more`), restored with the last part.
    static func restoreOnce(_ fields: [String: JSONValue], _ connection: ObsConnection, partBytes: Int, deadline: Double?) throws(ClientError) {
        let parts = restoreParts(fields, partBytes: partBytes)
        for (index, part) in parts.enumerated() {
            _ = try connection.request("restore", part.merging(index < parts.count - 1 ? ["more": .bool(true)] : [:]) { a, _ in a },
                                       deadline: deadline)
        }
    }

    /// `fields` (a dump, and `replace`) as restore requests of about `partBytes` each at most: one
    /// when it fits, else the keys and bindings spread over several, the other fields in the last.
    static func restoreParts(_ fields: [String: JSONValue], partBytes: Int) -> [[String: JSONValue]] {
        guard JSONValue.object(fields).encoded.utf8.count > partBytes,
              let keys = fields["keys"]?.arrayValue else { return [fields] }
        let bindings = fields["bindings"]?.arrayValue ?? []
        var parts: [[String: JSONValue]] = []
        var current: (keys: [JSONValue], bindings: [JSONValue], bytes: Int) = ([], [], 0)
        for (item, isBinding) in keys.map({ ($0, false) }) + bindings.map({ ($0, true) }) {
            let size = item.encoded.utf8.count + 1
            if current.bytes + size > partBytes, current.bytes > 0 {
                parts.append(["keys": .array(current.keys), "bindings": .array(current.bindings)])
                current = ([], [], 0)
            }
            if isBinding { current.bindings.append(item) } else { current.keys.append(item) }
            current.bytes += size
        }
        var last = fields
        last["keys"] = .array(current.keys)
        last["bindings"] = .array(current.bindings)
        parts.append(last)
        return parts
    }

    static func apply(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let path = parsed.positionals[0]
        let text: String
        if path == "-" {
            text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        } else {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw UsageError("apply: cannot read \(path)")
            }
            text = String(decoding: data, as: UTF8.self)
        }
        let file: DefinitionsFile
        do throws(DefinitionsFile.Failure) {
            file = try DefinitionsFile(parsing: text)
        } catch {
            throw UsageError("\(path):\(error.line): \(error.usage?.message ?? "")")
        }
        for warning in file.warnings { context.output.error("\(path):\(warning.line): \(warning.message)") }
        let connection = try context.connect()
        do throws(ClientError) {
            let outcome = try file.apply { op, fields throws(ClientError) in
                try connection.request(op, fields, deadline: context.deadline)
            }
            context.output.line(outcome.rev.map { "\(path): applied at revision \($0)" } ?? "\(path): unchanged")
        } catch {
            guard case .server(let failure) = error else { throw error }
            let line = failure.details["line"]?.intValue
            let entry = file.entries.first { Int64($0.line) == line }
            let message = ClientError.describe(inObsctlTerms(failure, entry?.fields ?? [:]))
            context.output.error("\(path)\(line.map { ":\($0)" } ?? ""): \(message)")
            let expressions = [("expr", false), ("map", true), ("unmap", true)].compactMap { name, allowValue in
                entry?.fields[name]?.stringValue.map { (text: $0, allowValue: allowValue) }
            }
            if let caret = ExpressionCaret.lines(failure, among: expressions) { context.output.note(caret) }
            return 1
        }
        return 0
    }
}
