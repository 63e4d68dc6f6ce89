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
        var lines = StdinLines(command: "set")
        while let line = try lines.next() {
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
        var lines = StdinLines(command: "publish")
        while let line = try lines.next() {
            let payload = try WriteCommands.value(line, mode: mode)
            try connection.request("publish", ["channel": channel, "payload": payload], deadline: context.deadline)
        }
        return 0
    }

    static func restore(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let input = try readAll("-", for: "restore")
        guard case .object(var fields)? = try? JSONValue.parse(input) else {
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

    /// Every byte of `path` (`-`: stdin) to its end: a regular file, and as well a pipe, a FIFO or
    /// a process substitution (`obsctl apply <(envsubst < bar.obs)`), which have no size to read
    /// up front. What cannot be read (a directory, a missing file, a closed stdin) is a usage
    /// error that says why.
    static func readAll(_ path: String, for command: String) throws(UsageError) -> [UInt8] {
        let name = path == "-" ? "stdin" : path
        func failure(_ code: Int32) -> UsageError {
            UsageError("\(command): cannot read \(name): \(String(cString: strerror(code)))")
        }
        let fd = path == "-" ? 0 : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(errno) }
        defer { if fd != 0 { close(fd) } }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(errno) }
        if info.st_mode & S_IFMT == S_IFDIR { throw failure(EISDIR) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += chunk[..<count]
            } else if count == 0 {
                return bytes
            } else if errno == EAGAIN {
                // A stdin another program left non-blocking is waited on.
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&poller, 1, -1)
            } else if errno != EINTR {
                throw failure(errno)
            }
        }
    }

    static func apply(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let path = parsed.positionals[0]
        let bytes = try readAll(path, for: "apply")
        guard let text = String(validating: bytes, as: UTF8.self) else {
            // Not replaced with U+FFFD: a value would be stored other than the file says.
            let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
            let line = (lines.firstIndex { String(validating: $0, as: UTF8.self) == nil } ?? 0) + 1
            throw UsageError("\(path):\(line): not valid UTF-8")
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

/// The lines of stdin as they arrive (`set KEY -`, `publish CHANNEL -`), without their `\n` or
/// `\r\n`. A line that is not valid UTF-8 stops obsctl (exit 64, naming the line) rather than
/// reaching the daemon with its bytes replaced by U+FFFD, as Swift's readLine would.
struct StdinLines {
    let command: String
    /// What was read and not yet returned starts at `start` (taken off the front only when more
    /// is read, so a chunk of many short lines is not moved once per line).
    private var buffer: [UInt8] = []
    private var start = 0
    private var number = 0
    private var ended = false

    init(command: String) { self.command = command }

    mutating func next() throws(UsageError) -> String? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 0x0A) {
                let line = buffer[start..<newline]
                start = newline + 1
                return try decode(line.last == 0x0D ? line.dropLast() : line)
            }
            if ended {
                guard start < buffer.count else { return nil }
                defer { buffer = []; start = 0 }
                return try decode(buffer[start...])
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count > 0 {
                buffer.removeSubrange(..<start)
                start = 0
                buffer += chunk[..<count]
            } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                ended = true
            } else if errno == EAGAIN {
                var poller = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
                _ = poll(&poller, 1, -1)
            }
        }
    }

    private mutating func decode(_ bytes: ArraySlice<UInt8>) throws(UsageError) -> String {
        number += 1
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw UsageError("\(command): line \(number) of stdin is not valid UTF-8")
        }
        return text
    }
}
