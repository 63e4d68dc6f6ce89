import ObsCore

/// One successful answer from the daemon: its fields, and the line as it came (for `--json`).
public struct Response: Sendable {
    public let fields: [String: JSONValue]
    public let line: String

    public subscript(name: String) -> JSONValue? { fields[name] }

    public init(fields: [String: JSONValue], line: String) {
        self.fields = fields
        self.line = line
    }
}

/// One event of a watch, as the daemon sent it.
public struct WatchEvent: Sendable {
    /// The event's name as sent: `initial`, `synced`, `change`, `delete`, `error`, `publish`,
    /// `overflow`, `compacted`, `progress`; or `reset`, which `WatchStream` makes itself when a
    /// daemon it reconnects to holds another state (not one of the protocol's: `name` is nil).
    public let kind: String
    /// The event, when it is one of the protocol's (nil for a name this client does not know).
    public var name: EventName? { EventName(rawValue: kind) }
    public let fields: [String: JSONValue]
    /// The line as the daemon wrote it, minus its `watch` field (field order kept).
    public let line: String

    public subscript(name: String) -> JSONValue? { fields[name] }

    /// Whether it is the first event `WatchStream` delivers after reconnecting (`reconnect`): what
    /// came before it on the old connection may have been cut short, a snapshot among it.
    public var followsReconnection = false

    /// The run of obsd on the connection the event came on (`hello`'s `run`): what a program that
    /// keeps the revision itself passes as `WatchOptions.run` beside `since`, to resume later. nil
    /// when the daemon has none (a cluster's host, an older obsd).
    public var run: String?

    /// The value the event carries: `new` for a change, `value` for a snapshot item.
    public var value: JSONValue? { fields["new"] ?? fields["value"] }

    /// The store revision the event belongs to, for resuming (snapshot items carry the key's own).
    var resumeRevision: UInt64? {
        guard name != .initial, let rev = fields["rev"]?.intValue, rev >= 0 else { return nil }
        return UInt64(rev)
    }

    init(fields: [String: JSONValue], line: [UInt8]) {
        self.kind = fields["event"]?.stringValue ?? ""
        self.fields = fields.filter { $0.key != "watch" }
        self.line = WatchEvent.removingWatchField(String(decoding: line, as: UTF8.self))
    }

    /// Builds an event from fields alone (coalesced events, tests); its line is the canonical encoding.
    public init(fields: [String: JSONValue]) {
        self.kind = fields["event"]?.stringValue ?? ""
        self.fields = fields.filter { $0.key != "watch" }
        self.line = JSONValue.object(self.fields).encoded
    }

    /// The daemon writes `{"event":"KIND","watch":N,...}`: the first `,"watch":N` is that field,
    /// since no value comes before it. Cutting it out keeps every other byte as sent.
    static func removingWatchField(_ line: String) -> String {
        guard let range = line.range(of: ",\"watch\":") else { return line }
        let digits = line[range.upperBound...].prefix { $0.isASCII && $0.isNumber }
        return String(line[..<range.lowerBound]) + line[digits.endIndex...]
    }
}
