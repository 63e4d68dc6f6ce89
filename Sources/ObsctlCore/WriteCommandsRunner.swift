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
        // Every request goes out, as each is its own: the first refusal is the command's error.
        var refused: ObsError?
        try connection.pipeline(requests, deadline: { context.deadline }) { index, result in
            guard refused == nil, case .failure(.server(let failure)) = result else { return }
            refused = inObsctlTerms(failure, requests[index].fields)
        }
        if let refused { throw ClientError.server(refused) }
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
        if parsed.has("--hold"), parsed.positionals[1] == "-" {
            throw UsageError("--hold does not go with VALUE -: it holds a key set once, reading no stdin")
        }
        guard parsed.positionals[1] == "-" else {
            let fields = try WriteCommands.setFields(parsed, value: WriteCommands.value(parsed.positionals[1], mode: mode))
            if let warning = WriteCommands.stringWarning(parsed.positionals[1], mode: mode) { context.output.error(warning) }
            let connection = try context.connect()
            try connection.request("set", fields, deadline: context.deadline)
            if parsed.has("--ephemeral") { try holdEphemeralKey(connection, readingStdin: !parsed.has("--hold")) }
            return 0
        }
        // `sensor | obsctl set temp -`: each line as it arrives, on one connection.
        var connection = try context.connect()
        var lines = StdinLines(command: "set", maxLineBytes: try daemonLimits(connection, context).line)
        while let line = try lines.next() {
            let fields = try WriteCommands.setFields(parsed, value: WriteCommands.value(line, mode: mode))
            try lines.send { () throws(ClientError) in try streamRequest(&connection, context, "set", fields) }
        }
        return 0
    }

    /// An ephemeral key lives as long as its connection: obsctl stays until stdin closes (or,
    /// with `--hold`, without reading stdin at all: a service's stdin is /dev/null, which closes at
    /// once), and a signal's default action ends the process, which closes the connection just
    /// the same. What stdin brings meanwhile is read and dropped a chunk at a time, never held:
    /// Swift's readLine would hold a line without a newline (`cat /dev/zero`) until memory ran out.
    /// The connection is watched too: once the daemon has gone (a restart loses the key), obsctl
    /// ends with `connectionLost` (exit 2) rather than run on without its key, so that whatever
    /// started it (a supervisor, a loop) can set the key again.
    private static func holdEphemeralKey(_ connection: ObsConnection, readingStdin: Bool) throws(ClientError) {
        var chunk = [UInt8](repeating: 0, count: 65536)
        // poll(2) leaves an entry with a negative descriptor out: stdin is not watched when held.
        var pollers = [pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: readingStdin ? 0 : -1, events: Int16(POLLIN), revents: 0)]
        while true {
            pollers[0].revents = 0
            pollers[1].revents = 0
            if poll(&pollers, 2, -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            // Only a `goodbye` or the close come on this connection: nothing to keep.
            if pollers[0].revents != 0 { while try connection.nextEvent(deadline: monotonicNow()) != nil {} }
            guard pollers[1].revents != 0 else { continue }
            let count = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if count > 0 { continue }
            if count == 0 || (errno != EINTR && errno != EAGAIN) { return }
        }
    }

    /// The daemon's bounds obsctl holds its input to, as its `hello` reports them: `line`, the
    /// longest request line it takes (`max_line_bytes`), and `restore`, the most bytes of
    /// `restore` parts it holds (`max_restore_bytes`). Asked, not assumed: both are settings of
    /// the daemon's, with no maximum, so only the daemon knows them; a daemon that does not report
    /// one has the default (1 MiB, 256 MiB).
    static func daemonLimits(_ connection: ObsConnection, _ context: Context) throws(ClientError) -> (line: Int, restore: Int) {
        let hello = try connection.request("hello", deadline: context.deadline)
        return (line: hello["max_line_bytes"]?.intValue.map { Int(clamping: $0) } ?? 1 << 20,
                restore: hello["max_restore_bytes"]?.intValue.map { Int(clamping: $0) } ?? 256 << 20)
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
        var connection = try context.connect()
        guard parsed.positionals.count > 1, parsed.positionals[1] == "-" else {
            let payload = try parsed.positionals.count > 1 ? WriteCommands.value(parsed.positionals[1], mode: mode) : .null
            if parsed.positionals.count > 1, let warning = WriteCommands.stringWarning(parsed.positionals[1], mode: mode) {
                context.output.error(warning)
            }
            try connection.request("publish", ["channel": channel, "payload": payload], deadline: context.deadline)
            return 0
        }
        var lines = StdinLines(command: "publish", maxLineBytes: try daemonLimits(connection, context).line)
        while let line = try lines.next() {
            let payload = try WriteCommands.value(line, mode: mode)
            try lines.send { () throws(ClientError) in
                try streamRequest(&connection, context, "publish", ["channel": channel, "payload": payload])
            }
        }
        return 0
    }

    /// One request of `set KEY -` or `publish CHANNEL -`. Between two lines obsd may have
    /// restarted (an upgrade, `systemctl restart`), closing the connection: a line whose request
    /// found it closed before a byte went out reached no one, and goes again, once, on a new
    /// connection, so that a sensor's pipeline outlives the restart. (A request that went out
    /// and lost its answer is not sent again: it may have been applied.)
    static func streamRequest(_ connection: inout ObsConnection, _ context: Context, _ op: String,
                              _ fields: [String: JSONValue]) throws(ClientError) {
        do throws(ClientError) {
            _ = try connection.request(op, fields, deadline: context.deadline)
        } catch {
            guard case .connectionLost = error, connection.lastSendReachedNoOne else { throw error }
            connection = try context.connect()
            _ = try connection.request(op, fields, deadline: context.deadline)
        }
    }

    static func restore(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        if parsed.has("--split"), parsed.has("--replace") {
            throw UsageError("restore: --split adds to the state and cannot --replace it (restore into an empty state, or delete its keys first)")
        }
        // The daemon first: how much it takes bounds how much of stdin is read.
        let connection = try context.connect()
        let limits = try daemonLimits(connection, context)
        let lineLimit = limits.line
        // The most one restore can hold: the parts the daemon keeps (every connection's together,
        // so this one's at most) and the last part, one request line. obsctl holds the dump whole
        // to parse it, so --split, whose transactions are each within it, reads no more either.
        let (sum, overflow) = limits.restore.addingReportingOverflow(limits.line)
        let input = try readAll("-", for: "restore", maxBytes: overflow ? .max : sum, compactingJSON: true,
                                tooLarge: "the dump on stdin",
                                why: "the daemon's max_restore_bytes and max_line_bytes together, the most one restore holds")
        guard case .object(var fields)? = try? JSONValue.parse(input) else {
            throw UsageError("restore: stdin is not a JSON object (the output of obsctl dump)")
        }
        fields["op"] = nil
        fields["id"] = nil
        if parsed.has("--split") {
            guard fields["keys"]?.arrayValue != nil else {
                throw UsageError("restore: stdin has no keys array (the output of obsctl dump)")
            }
        }
        if parsed.has("--replace") { fields["replace"] = .bool(true) }
        guard parsed.has("--split") else {
            do {
                try restoreOnce(fields, connection, partBytes: Int(lineLimit) / 2, deadline: context.deadline)
            } catch {
                // One transaction over the daemon's bounds on a whole restore (in cluster mode,
                // etcd's): --split is the way that needs no setting changed. Not for one value or
                // expression over its limit, which no split makes smaller.
                let items = (fields["keys"]?.arrayValue?.count ?? 0) + (fields["bindings"]?.arrayValue?.count ?? 0)
                guard case .server(let failure) = error, failure.code == .tooLarge, !parsed.has("--replace"), items > 1,
                      ["etcd", "max_restore_bytes"].contains(failure.details["limit"]?.stringValue) else { throw error }
                throw ClientError.server(ObsError(.tooLarge, failure.message + "; obsctl restore --split restores it in as many transactions as it needs",
                                                  details: failure.details))
            }
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

    /// Every byte of `path` (`-`: stdin) to its end, at most `maxBytes`: a regular file, and as
    /// well a pipe, a FIFO or a process substitution (`obsctl apply <(envsubst < bar.obs)`), which
    /// have no size to read up front. What cannot be read (a directory, a missing file, a closed
    /// stdin) is a usage error that says why. Past `maxBytes` obsctl stops reading and answers
    /// `too_large` (exit 1), naming `tooLarge` and `why`: a regular file whose size says so
    /// before a byte is read, anything else once it has brought one byte more.
    /// `compactingJSON`: whitespace between JSON tokens (a dump pretty-printed by jq) is neither
    /// kept nor counted, so the bound is on the JSON itself, as the daemon counts it.
    static func readAll(_ path: String, for command: String, maxBytes: Int, compactingJSON: Bool = false,
                        tooLarge: String, why: String? = nil) throws -> [UInt8] {
        let name = path == "-" ? "stdin" : path
        func failure(_ code: Int32) -> UsageError {
            UsageError("\(command): cannot read \(name): \(String(cString: strerror(code)))")
        }
        func overBound(size: Int?) -> ClientError {
            let amount = size.map { "is \($0) bytes, more than" } ?? "is more than"
            return .server(ObsError(.tooLarge, "\(command): \(tooLarge) \(amount) the \(maxBytes) bytes read at most"
                                    + (why.map { ": \($0)" } ?? "")))
        }
        let fd = path == "-" ? 0 : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(errno) }
        defer { if fd != 0 { close(fd) } }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(errno) }
        if info.st_mode & S_IFMT == S_IFDIR { throw failure(EISDIR) }
        if !compactingJSON, info.st_mode & S_IFMT == S_IFREG, info.st_size > maxBytes { throw overBound(size: Int(info.st_size)) }
        var bytes: [UInt8] = []
        var compactor = JSONWhitespace()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                // A file growing while it is read is held to the same bound.
                if compactingJSON {
                    compactor.append(chunk[..<count], to: &bytes)
                    if bytes.count > maxBytes { throw overBound(size: nil) }
                } else {
                    if bytes.count + count > maxBytes { throw overBound(size: nil) }
                    bytes += chunk[..<count]
                }
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
        // The daemon's bound for its own definitions file, in the daemon's words.
        let bytes = try readAll(path, for: "apply", maxBytes: DefinitionsFile.maxBytes,
                                tooLarge: path == "-" ? "the definitions file on stdin" : "definitions file \(path)")
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
///
/// A line longer than `maxLineBytes`, the daemon's longest request line, could never be sent: its
/// request holds it whole, and more. obsctl holds no more of it than that (`cat /dev/zero | obsctl
/// set k -` would otherwise grow until memory ran out) and stops there, as the daemon would at the
/// request: `too_large` (exit 1), naming the line. Every line before it was sent and answered;
/// nothing after it is read. Stopping rather than skipping to the next newline is what the
/// daemon's own answer to a request line too long does (it closes the connection), and an
/// endless line ends that way too, instead of being read and dropped forever. (A line of JSON
/// padded with more whitespace than the daemon's whole request line, which compacted would have
/// fitted, is the only line refused that could have been sent.)
struct StdinLines {
    let command: String
    let maxLineBytes: Int
    /// What was read and not yet returned starts at `start` (taken off the front only when more
    /// is read, so a chunk of many short lines is not moved once per line).
    private var buffer: [UInt8] = []
    private var start = 0
    private var number = 0
    private var ended = false

    init(command: String, maxLineBytes: Int) {
        self.command = command
        self.maxLineBytes = maxLineBytes
    }

    mutating func next() throws -> String? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 0x0A) {
                let line = buffer[start..<newline]
                start = newline + 1
                return try decode(line.last == 0x0D ? line.dropLast() : line)
            }
            if ended {
                guard start < buffer.count else { return nil }
                defer { buffer = []; start = 0 }
                // The last line, without a newline: its `\r` goes as a line's before `\n` does.
                let line = buffer[start...]
                return try decode(line.last == 0x0D ? line.dropLast() : line)
            }
            // No newline yet in more than a line may hold (and its `\r`): it cannot end in time.
            if buffer.count - start - 1 > maxLineBytes { throw tooLong(number + 1) }
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

    /// Sends the request of the line `next` returned last: a `too_large` answer (its request
    /// line over the daemon's limit, though the line itself is not) names the line too.
    func send(_ request: () throws(ClientError) -> Void) throws(ClientError) {
        do throws(ClientError) {
            try request()
        } catch {
            guard case .server(let failure) = error, failure.code == .tooLarge else { throw error }
            throw .server(ObsError(.tooLarge, "\(command): line \(number) of stdin: \(failure.message)", details: failure.details))
        }
    }

    private func tooLong(_ line: Int) -> ClientError {
        .server(ObsError(.tooLarge, "\(command): line \(line) of stdin is more than \(maxLineBytes) bytes, the daemon's longest request line (max_line_bytes); stopped there, every line before it was sent"))
    }

    private mutating func decode(_ bytes: ArraySlice<UInt8>) throws -> String {
        number += 1
        guard bytes.count <= maxLineBytes else { throw tooLong(number) }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw UsageError("\(command): line \(number) of stdin is not valid UTF-8")
        }
        return text
    }
}

/// Takes out the whitespace between JSON tokens as bytes come (a pretty-printed dump becomes the
/// compact one), keeping one space only where two tokens would otherwise run together (`1 2`), so
/// that text which is not JSON stays not JSON. Inside strings every byte is kept.
struct JSONWhitespace {
    private var inString = false
    private var escaped = false
    private var skipped = false
    private var lastIsWord = false

    mutating func append(_ chunk: ArraySlice<UInt8>, to bytes: inout [UInt8]) {
        for byte in chunk {
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
                bytes.append(byte)
                continue
            }
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D:
                skipped = true
                continue
            case UInt8(ascii: "\""):
                inString = true
                lastIsWord = false
            case UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: ":"), UInt8(ascii: ","):
                lastIsWord = false
            default:
                if skipped, lastIsWord { bytes.append(0x20) }
                lastIsWord = true
            }
            skipped = false
            bytes.append(byte)
        }
    }
}
