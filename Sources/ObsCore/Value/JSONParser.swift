// A strict RFC 8259 decoder working on raw bytes.
//
// How it works:
// 1. The parser walks the bytes once with an index, never building intermediate tokens. Scalars are
//    decoded in place: strings without escapes become a String straight from their byte range,
//    numbers are accumulated digit by digit (JSONParser+Numbers.swift).
// 2. It does not recurse. Open containers are frames on an explicit stack; their finished children
//    wait on a shared value stack (member names on a name stack). So nesting costs heap memory, not
//    call stack, and the depth limit is a plain comparison: 100,000 `[` fail at the limit, they
//    cannot overflow the stack.
// 3. When a container closes, its children move off the value stack into an exactly sized Array or
//    Dictionary. Duplicate member names are found then, while inserting into the Dictionary, and
//    reported at the second occurrence's opening quote.
// 4. The first violation ends parsing with a JSONParseError carrying the byte offset where it was
//    found: the unexpected byte, the start of the bad token (literal, number, escape, UTF-8
//    sequence, duplicate name), or the input length when the input ends too early.
//
// Whitespace is only space, tab, CR and LF. A UTF-8 byte order mark is not whitespace and is
// rejected like any other stray byte (RFC 8259 section 8.1: senders must not add one).
//
// Names are Swift Strings, and Swift compares Strings by canonical equivalence, so two names that
// differ only in Unicode normalization ("\u00e9" and "e\u0301") are duplicates: a Dictionary could not
// hold both.

extension JSONValue {
    /// The default nesting limit: 128 open arrays or objects are accepted, 129 are an error.
    public static let defaultMaxDepth = 128

    /// Decodes one JSON document that fills `bytes` (whitespace around it allowed).
    public static func parse(
        _ bytes: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth
    ) throws(JSONParseError) -> JSONValue {
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw JSONParseError("empty input", offset: 0)
        }
        let parser = JSONParser(
            base.assumingMemoryBound(to: UInt8.self), count: bytes.count, maxDepth: maxDepth)
        return try parser.parseDocument()
    }

    /// Decodes one JSON document from UTF-8 bytes.
    public static func parse(
        _ bytes: [UInt8], maxDepth: Int = defaultMaxDepth
    ) throws(JSONParseError) -> JSONValue {
        // The Result carries the typed error through closures that only rethrow untyped errors.
        try bytes.withUnsafeBytes { raw in
            Result { () throws(JSONParseError) in try parse(raw, maxDepth: maxDepth) }
        }.get()
    }

    /// Decodes one JSON document from a string's UTF-8.
    public static func parse(
        _ text: String, maxDepth: Int = defaultMaxDepth
    ) throws(JSONParseError) -> JSONValue {
        var text = text
        return try text.withUTF8 { utf8 in
            Result { () throws(JSONParseError) in
                try parse(UnsafeRawBufferPointer(utf8), maxDepth: maxDepth)
            }
        }.get()
    }
}

/// One pass over one document; see the comment at the top of this file.
struct JSONParser: ~Copyable {
    /// An array or object that has been opened and not yet closed.
    struct Frame {
        var isObject: Bool
        /// Where this container's children start on the value stack.
        var valueStart: Int
        /// Where this object's member names start on the name stack.
        var nameStart: Int
    }

    /// A member name waiting for its object to close, with the offset of its opening quote.
    struct Name {
        var text: String
        var offset: Int
    }

    let base: UnsafePointer<UInt8>
    let end: Int
    let maxDepth: Int
    var pos = 0
    var frames = MoveStack<Frame>()
    var values = MoveStack<JSONValue>()
    var names = MoveStack<Name>()
    /// Where strings with escapes are assembled; reused for every such string of the document.
    var scratch: [UInt8] = []

    init(_ base: UnsafePointer<UInt8>, count: Int, maxDepth: Int) {
        self.base = base
        self.end = count
        self.maxDepth = maxDepth
    }

    consuming func parseDocument() throws(JSONParseError) -> JSONValue {
        skipWhitespace()
        var value: JSONValue
        parsing: while true {
            // A value starts at `pos`, after any whitespace.
            guard pos < end else { throw unexpectedValue() }
            switch base[pos] {
            case UInt8(ascii: "{"):
                try checkDepth()
                pos += 1
                skipWhitespace()
                if pos < end && base[pos] == UInt8(ascii: "}") {
                    pos += 1
                    value = .object([:])
                } else {
                    frames.push(Frame(isObject: true, valueStart: values.count, nameStart: names.count))
                    try parseMemberName()
                    continue parsing
                }
            case UInt8(ascii: "["):
                try checkDepth()
                pos += 1
                skipWhitespace()
                if pos < end && base[pos] == UInt8(ascii: "]") {
                    pos += 1
                    value = .array([])
                } else {
                    frames.push(Frame(isObject: false, valueStart: values.count, nameStart: names.count))
                    continue parsing
                }
            case UInt8(ascii: "\""):
                value = .string(try parseString())
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = try parseNumber()
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                value = .null
            default:
                throw unexpectedValue()
            }

            // `value` is complete: give it to the innermost open container, and close every
            // container that ends right after it.
            while let frame = frames.top {
                values.push(value)
                skipWhitespace()
                let closer = frame.isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
                guard pos < end else {
                    throw unexpected(expected: frame.isObject ? "',' or '}'" : "',' or ']'")
                }
                if base[pos] == UInt8(ascii: ",") {
                    pos += 1
                    skipWhitespace()
                    if pos < end && base[pos] == closer {
                        throw JSONParseError(
                            frame.isObject ? "trailing comma in object" : "trailing comma in array",
                            offset: pos)
                    }
                    if frame.isObject { try parseMemberName() }
                    continue parsing
                }
                guard base[pos] == closer else {
                    throw unexpected(expected: frame.isObject ? "',' or '}'" : "',' or ']'")
                }
                pos += 1
                frames.removeTop()
                value = frame.isObject
                    ? try closeObject(frame) : .array(values.popArray(from: frame.valueStart))
            }
            break
        }
        skipWhitespace()
        guard pos == end else { throw unexpected(expected: "end of input") }
        return value
    }

    /// Parses `"name"` and the `:` after it, leaving `pos` at the member's value.
    mutating func parseMemberName() throws(JSONParseError) {
        guard pos < end && base[pos] == UInt8(ascii: "\"") else {
            throw unexpected(expected: "a member name in double quotes")
        }
        let offset = pos
        names.push(Name(text: try parseString(), offset: offset))
        skipWhitespace()
        guard pos < end && base[pos] == UInt8(ascii: ":") else {
            throw unexpected(expected: "':' after the member name")
        }
        pos += 1
        skipWhitespace()
    }

    mutating func closeObject(_ frame: Frame) throws(JSONParseError) -> JSONValue {
        let count = values.count - frame.valueStart
        var object = [String: JSONValue](minimumCapacity: count)
        guard let memberNames = names.popUnsafely(from: frame.nameStart),
              let memberValues = values.popUnsafely(from: frame.valueStart)
        else { return .object(object) }
        for i in 0..<count {
            let name = (memberNames + i).move()
            if object.updateValue((memberValues + i).move(), forKey: name.text) != nil {
                (memberNames + i + 1).deinitialize(count: count - i - 1)
                (memberValues + i + 1).deinitialize(count: count - i - 1)
                throw JSONParseError("duplicate member name \(quoted(name.text))", offset: name.offset)
            }
        }
        return .object(object)
    }

    func checkDepth() throws(JSONParseError) {
        guard frames.count < maxDepth else {
            throw JSONParseError("nesting deeper than \(maxDepth)", offset: pos)
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let n = literal.utf8CodeUnitCount
        guard end - pos >= n else { throw invalidLiteral(literal) }
        for i in 0..<n where base[pos + i] != literal.utf8Start[i] {
            throw invalidLiteral(literal)
        }
        pos += n
    }

    func invalidLiteral(_ literal: StaticString) -> JSONParseError {
        JSONParseError("invalid literal, expected '\(literal)'", offset: pos)
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while pos < end {
            switch base[pos] {
            case 0x20, 0x0A, 0x0D, 0x09: pos += 1
            default: return
            }
        }
    }

    /// The error for the byte at `pos` (or the end of input) where `expected` should have been.
    func unexpected(expected: String) -> JSONParseError {
        guard pos < end else {
            return JSONParseError("unexpected end of input, expected \(expected)", offset: pos)
        }
        let byte = base[pos]
        switch byte {
        case UInt8(ascii: "/"):
            return JSONParseError("comments are not allowed", offset: pos)
        case UInt8(ascii: "'"):
            return JSONParseError("single quotes are not allowed, strings use double quotes", offset: pos)
        default:
            return JSONParseError("unexpected \(describe(byte)), expected \(expected)", offset: pos)
        }
    }

    /// The error for a byte at `pos` that cannot start a value.
    func unexpectedValue() -> JSONParseError {
        if pos < end && (base[pos] == UInt8(ascii: "N") || base[pos] == UInt8(ascii: "I")) {
            return JSONParseError("NaN and Infinity are not JSON numbers", offset: pos)
        }
        return unexpected(expected: "a value")
    }

    /// A byte as an error message shows it: printable ASCII quoted, anything else in hex.
    func describe(_ byte: UInt8) -> String {
        if byte >= 0x21 && byte < 0x7F { return "'\(Character(Unicode.Scalar(byte)))'" }
        return "byte \(hex(byte))"
    }

    /// A byte in hex, "0x0A".
    func hex(_ byte: UInt8) -> String {
        (byte < 0x10 ? "0x0" : "0x") + String(byte, radix: 16, uppercase: true)
    }

    /// A member name as an error message shows it, shortened so messages stay one line.
    func quoted(_ name: String) -> String {
        name.utf8.count <= 64 ? "\"\(name)\"" : "\"\(name.prefix(60))...\""
    }
}
