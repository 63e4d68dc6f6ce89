import ObsCore

/// A definitions file (docs/cli.md): one write command per line in obsctl's syntax without the
/// `obsctl` word, shell-like quoting, blank lines and # comments. `obsctl apply` and obsd's
/// `definitions` setting both read it with this type and apply it with `apply`.
public struct DefinitionsFile: Sendable {
    /// The largest definitions file read, by obsctl apply and by obsd (a file of definitions, not
    /// of data: `obsctl restore` takes that).
    public static let maxBytes = 64 << 20

    /// One request, and the line it came from (1-based).
    public struct Entry: Sendable {
        public let line: Int
        public let op: String
        public let fields: [String: JSONValue]
    }

    /// A line obsctl rejects itself (syntax), or a line the daemon refused.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let line: Int
        public let usage: UsageError?
        public let server: ObsError?
        public var description: String {
            "line \(line): " + (usage?.message ?? server.map(ClientError.describe) ?? "")
        }
    }

    public let entries: [Entry]
    /// Lines applied as written but probably not as meant (a `set` VALUE that looks like JSON and
    /// is not), with their line numbers.
    public let warnings: [(line: Int, message: String)]

    public init(parsing text: String) throws(Failure) {
        var entries: [Entry] = []
        var warnings: [(line: Int, message: String)] = []
        for (index, line) in Self.lines(text).enumerated() {
            do throws(UsageError) {
                let words = try ShellWords.split(line)
                guard let name = words.first else { continue }
                guard let spec = WriteCommands.all.first(where: { $0.name == name }) else {
                    throw UsageError("unknown command '\(name)' (a definitions file holds set, define, bind, unbind and del)")
                }
                let parsed = try spec.parse(Array(words.dropFirst()))
                for option in ["--ephemeral", "--hold"] where parsed.has(option) {
                    throw UsageError("\(option) has no meaning in a definitions file")
                }
                if name == "set", let warning = WriteCommands.stringWarning(parsed.positionals[1], mode: try WriteCommands.valueMode(parsed)) {
                    warnings.append((index + 1, warning))
                }
                for request in try WriteCommands.requests(name, parsed) {
                    entries.append(Entry(line: index + 1, op: request.op, fields: request.fields))
                }
            } catch {
                throw Failure(line: index + 1, usage: error, server: nil)
            }
        }
        self.entries = entries
        self.warnings = warnings
    }

    /// The lines of `text`: each ends at "\n", and loses a "\r" before it (a file saved with CRLF
    /// line ends). Split by scalars, not Characters: Swift takes "\r\n" as one Character, which
    /// is not "\n", so a CRLF file would be one line.
    static func lines(_ text: String) -> [String] {
        text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map { scalars in
            String(Substring(scalars.last == "\r" ? scalars.dropLast() : scalars))
        }
    }

    /// What applying did: the revision committed, or nil when the state already matched the file.
    public struct Outcome: Sendable {
        public let rev: UInt64?
        public let operations: Int
    }

    /// Applies every entry in one `batch`. Definitions and bindings the state already holds exactly
    /// (seen in a `dump` first) are left out, since redefining or rebinding commits a revision even
    /// when nothing differs; `unbind` of a binding that is not there is left out, as it would fail.
    /// So applying a file twice changes nothing the second time. `request` sends one request.
    public func apply(_ request: (String, [String: JSONValue]) throws(ClientError) -> Response) throws(ClientError) -> Outcome {
        let state = try request("dump", [:])
        guard let batch = batch(for: state) else { return Outcome(rev: nil, operations: 0) }
        return try outcome(of: batch, Result { () throws(ClientError) in try request("batch", ["ops": batch.fields["ops"]!]) })
    }

    /// The `batch` that brings a state to what the file says: what `apply` sends after its `dump`.
    public struct Batch: Sendable {
        /// The entries the state did not hold, in the file's order.
        public let needed: [Entry]
        /// The request's fields but `op` (`ops`).
        public let fields: [String: JSONValue]
        /// The revision of the state it was made from.
        let stateRev: Int64?
    }

    /// The batch for `state` (a `dump`'s answer); nil when the state holds the file already.
    public func batch(for state: Response) -> Batch? {
        let needed = entries.filter { !Self.alreadyHolds(state, $0, entries: entries) }
        guard !needed.isEmpty else { return nil }
        var ops: [JSONValue] = []
        for entry in needed {
            var fields = entry.fields
            fields["op"] = .string(entry.op)
            ops.append(.object(fields))
        }
        return Batch(needed: needed, fields: ["ops": .array(ops)], stateRev: state["rev"]?.intValue)
    }

    /// What the batch's answer means: its revision, or the failure with the line of the entry
    /// that failed.
    public func outcome(of batch: Batch, _ answer: Result<Response, ClientError>) throws(ClientError) -> Outcome {
        do throws(ClientError) {
            let response = try answer.get()
            if response["results"] != nil, response["rev"]?.intValue == batch.stateRev {
                return Outcome(rev: nil, operations: batch.needed.count)
            }
            return Outcome(rev: response["rev"]?.intValue.map { UInt64($0) }, operations: batch.needed.count)
        } catch .server(let error) {
            guard let index = error.details["index"]?.intValue, index >= 0, Int(index) < batch.needed.count else {
                throw .server(error)
            }
            var details = error.details
            details["line"] = .int(Int64(batch.needed[Int(index)].line))
            throw .server(ObsError(error.code, error.message, details: details))
        }
    }

    private static func alreadyHolds(_ state: Response, _ entry: Entry, entries: [Entry]) -> Bool {
        let target = entry.fields[entry.op == "define" ? "key" : "to"]
        // A key that another line also touches may pass through other states within the file.
        guard entries.filter({ ($0.fields["key"] ?? $0.fields["to"]) == target }).count == 1 else { return false }
        let keys = state["keys"]?.arrayValue ?? []
        let bindings = state["bindings"]?.arrayValue ?? []
        switch entry.op {
        case "define":
            return keys.contains { $0["key"] == target && $0["kind"] == "computed" && $0["expr"] == entry.fields["expr"] }
        case "bind":
            return bindings.contains { binding in
                binding["to"] == target && binding["from"] == entry.fields["from"] && binding["map"] == entry.fields["map"]
                    && binding["unmap"] == entry.fields["unmap"]
                    && (binding["two_way"]?.boolValue ?? false) == (entry.fields["two_way"]?.boolValue ?? false)
            }
        case "unbind":
            return !bindings.contains { $0["to"] == target }
        default:
            return false
        }
    }
}
