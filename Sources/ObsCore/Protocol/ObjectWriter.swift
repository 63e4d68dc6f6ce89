/// Writes a JSON object member by member in a fixed order (protocol lines list their fields in
/// the order docs/protocol.md shows), values in the canonical encoding.
struct ObjectWriter {
    var bytes: [UInt8] = []
    private var needsComma: Bool

    /// A writer of a whole object (`{...}`), or of the members after a head written elsewhere
    /// (`continuing`: every member starts with a comma).
    init(continuing: Bool = false) {
        needsComma = continuing
        bytes.reserveCapacity(96)
        if !continuing { bytes.append(UInt8(ascii: "{")) }
    }

    private mutating func name(_ name: String) {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
        needsComma = true
        JSONValue.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func field(_ key: String, _ value: JSONValue) {
        name(key)
        value.encode(into: &bytes)
    }

    mutating func field(_ key: String, _ value: UInt64) {
        name(key)
        JSONValue.appendInteger(Int64(clamping: value), to: &bytes)
    }

    mutating func field(_ key: String, _ value: String) {
        name(key)
        JSONValue.appendString(value, to: &bytes)
    }

    mutating func field(_ key: String, _ value: Bool) {
        name(key)
        bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
    }

    mutating func field(_ key: String, raw: [UInt8]) {
        name(key)
        bytes.append(contentsOf: raw)
    }

    /// The `id` member of a response: the request's own bytes when given, else its value.
    mutating func id(_ value: JSONValue, _ token: [UInt8]?) {
        if let token { field("id", raw: token) } else { field("id", value) }
    }

    mutating func field(_ key: String, error: ObsError) {
        name(key)
        var inner = ObjectWriter()
        inner.field("code", error.code.rawValue)
        inner.field("message", error.message)
        for detail in error.details.keys.sorted(by: JSONValue.utf8Precedes) {
            inner.field(detail, error.details[detail]!)
        }
        bytes.append(contentsOf: inner.closed(newline: false))
    }

    /// The object closed, with the line's newline.
    func closed(newline: Bool = true) -> [UInt8] {
        var result = bytes
        result.append(UInt8(ascii: "}"))
        if newline { result.append(UInt8(ascii: "\n")) }
        return result
    }
}

/// The lines of the protocol's responses and events (docs/protocol.md).
public enum LineEncoding {
    /// A success response. `idToken`: the request's id as its bytes, when re-encoding its value
    /// would not give them back (RequestID.swift).
    static func response(id: JSONValue, idToken: [UInt8]? = nil, fields: [(String, JSONValue)], raw: [(String, [UInt8])] = [],
                         needsSync: Bool = false) -> EncodedLine {
        var writer = ObjectWriter()
        writer.id(id, idToken)
        writer.field("ok", true)
        for (name, value) in fields { writer.field(name, value) }
        for (name, bytes) in raw { writer.field(name, raw: bytes) }
        return EncodedLine(body: writer.closed(), needsSync: needsSync)
    }

    /// A failure response; `id` null for an error not tied to a request.
    public static func error(id: JSONValue, idToken: [UInt8]? = nil, _ error: ObsError) -> EncodedLine {
        var writer = ObjectWriter()
        writer.id(id, idToken)
        writer.field("ok", false)
        writer.field("error", error: error)
        return EncodedLine(body: writer.closed())
    }

    /// `{"event":NAME,"watch":ID`: the per-watch part of an event line.
    static func head(_ event: EventName, watch: Int) -> [UInt8] {
        var writer = ObjectWriter()
        writer.field("event", event.rawValue)
        writer.field("watch", JSONValue.int(Int64(watch)))
        return writer.bytes
    }

    /// The shared part of a key event: everything after the `watch` member.
    static func body(_ event: KeyEvent) -> [UInt8] {
        if let body = event.encodedBody { return body }
        var writer = ObjectWriter(continuing: true)
        writer.field("key", event.key)
        switch event.kind {
        case .change:
            if let old = event.old { writer.field("old", old) }
            writer.field("new", event.new ?? .null)
            writer.field("rev", event.rev)
            writer.field("created", event.created)
        case .delete:
            writer.field("old", event.old ?? .null)
            writer.field("rev", event.rev)
            if let reason = event.reason { writer.field("reason", reason) }
        case .error:
            writer.field("error", error: event.error ?? ObsError(.evalError, "unknown error"))
            writer.field("rev", event.rev)
        }
        return writer.closed()
    }

    /// An object with its members in the given order, without a newline.
    static func orderedObject(_ fields: [(String, JSONValue)]) -> [UInt8] {
        var writer = ObjectWriter()
        for (name, value) in fields { writer.field(name, value) }
        return writer.closed(newline: false)
    }

    /// The body of any other event: its members in order.
    static func body(_ fields: [(String, JSONValue)]) -> [UInt8] {
        var writer = ObjectWriter(continuing: true)
        for (name, value) in fields { writer.field(name, value) }
        return writer.closed()
    }
}
