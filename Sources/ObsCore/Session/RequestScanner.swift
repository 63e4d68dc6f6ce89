/// The request scanner of the hot operations (`get`, `set`, `incr`, `ping`, `publish`): one pass over
/// the line's bytes that finds the fields those operations take, building nothing (no
/// `JSONValue`, no dictionary, no string). It accepts only what it can vouch for, and for that it
/// must give the answer the general path (`JSONValue.parse`, the operation table) would give:
///
/// - one JSON object, members separated by whitespace as JSON allows, with no other member than
///   `op`, `id`, `key`, `value`, `by`, `channel` and `payload`, none twice;
/// - names and string values without escapes and with bytes from 0x20 to 0x7F only (so their
///   bytes are their canonical encoding: JSON would escape nothing, and there is no UTF-8 to check);
/// - numbers that are integers of at most 18 digits, without leading zeros, not `-0` (so they
///   are canonical as written, and within `Int64`);
/// - `true`, `false` and `null`.
///
/// Anything else (an escape, a fraction, an array, another member, a syntax error) is not scanned:
/// the general path takes the line and gives whatever answer it gives. So the hot path never
/// decides anything the general path would decide differently; it only gets there sooner.
struct RequestScanner {
    enum Operation {
        case get, set, incr, ping, publish
    }

    /// A value's bytes in the line, and what kind of JSON token it is.
    struct Token {
        enum Kind { case string, integer, literal }
        var start: Int
        var end: Int
        var kind: Kind
    }

    /// What a scanned request holds: the operation and the tokens of its fields (strings without
    /// their quotes, except the id's and the values', which are kept as they are echoed or stored).
    struct Request {
        var operation: Operation
        var id: Token?
        var key: Token?
        var value: Token?
        var by: Token?
        var channel: Token?
        var payload: Token?
    }

    private let bytes: UnsafeRawBufferPointer
    private var position = 0

    private init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// The hot request `line` holds, or nil when the general path must read it.
    static func scan(_ line: UnsafeRawBufferPointer) -> Request? {
        var scanner = RequestScanner(line)
        return scanner.request()
    }

    private mutating func request() -> Request? {
        skipWhitespace()
        guard take(UInt8(ascii: "{")) else { return nil }
        var operation: Operation?
        var fields = Request(operation: .ping)
        var seen: UInt8 = 0
        skipWhitespace()
        if take(UInt8(ascii: "}")) { return nil }
        while true {
            guard let name = string() else { return nil }
            skipWhitespace()
            guard take(UInt8(ascii: ":")) else { return nil }
            skipWhitespace()
            guard let value = token() else { return nil }
            let bit: UInt8
            switch name.count {
            case 2 where matches(name, "op"):
                bit = 1
                guard value.kind == .string else { return nil }
                operation = Self.operation(UnsafeRawBufferPointer(rebasing: bytes[value.start + 1..<value.end - 1]))
                guard operation != nil else { return nil }
            case 2 where matches(name, "id"):
                bit = 2
                fields.id = value
            case 3 where matches(name, "key"):
                bit = 4
                fields.key = value
            case 5 where matches(name, "value"):
                bit = 8
                fields.value = value
            case 2 where matches(name, "by"):
                bit = 16
                fields.by = value
            case 7 where matches(name, "channel"):
                bit = 32
                fields.channel = value
            case 7 where matches(name, "payload"):
                bit = 64
                fields.payload = value
            default:
                return nil
            }
            guard seen & bit == 0 else { return nil }
            seen |= bit
            skipWhitespace()
            if take(UInt8(ascii: "}")) { break }
            guard take(UInt8(ascii: ",")) else { return nil }
            skipWhitespace()
        }
        skipWhitespace()
        guard position == bytes.count, let operation else { return nil }
        fields.operation = operation
        return fields
    }

    private static func operation(_ name: UnsafeRawBufferPointer) -> Operation? {
        if name.equals("get") { return .get }
        if name.equals("set") { return .set }
        if name.equals("incr") { return .incr }
        if name.equals("ping") { return .ping }
        if name.equals("publish") { return .publish }
        return nil
    }

    /// Whether the member name `name` (a range of the line, without quotes) is `expected`.
    private func matches(_ name: Range<Int>, _ expected: StaticString) -> Bool {
        UnsafeRawBufferPointer(rebasing: bytes[name]).equals(expected)
    }

    @inline(__always)
    private mutating func take(_ byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    @inline(__always)
    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    /// A string as this scanner accepts it; the range of its contents, without the quotes.
    private mutating func string() -> Range<Int>? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = position
        // Eight bytes at a time up to the first that ends the string or is refused (a quote, a
        // backslash, a byte under 0x20 or over 0x7F), which the loop below then takes: values are
        // most of a request's bytes, and a byte at a time cost seven instructions each.
        while position + 8 <= bytes.count {
            let special = Self.specialBytes(bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
            if special == 0 {
                position += 8
                continue
            }
            position += special.trailingZeroBitCount >> 3
            break
        }
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                return start..<position - 1
            }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { return nil }
            position += 1
        }
        return nil
    }

    /// The bytes of `word` (little endian: the first in the lowest bits) that are a quote, a
    /// backslash, under 0x20 or over 0x7F, as a mask whose lowest set bit is the high bit of the
    /// first such byte; 0 when there is none. (The zero-byte test `(x - 0x01..) & ~x & 0x80..` sets
    /// the high bit of every zero byte of x, and may set others only above the first: a byte of
    /// x ^ 0x22.. is zero where the byte is a quote; subtracting 0x20.. instead flags the bytes under
    /// 0x20.)
    @inline(__always)
    static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        func zeros(_ x: UInt64) -> UInt64 { (x &- ones) & ~x & highs }
        let quotes = zeros(word ^ (ones &* 0x22)), backslashes = zeros(word ^ (ones &* 0x5C))
        let controls = (word &- ones &* 0x20) & ~word & highs
        return (word & highs) | quotes | backslashes | controls
    }

    /// A value as this scanner accepts it (strings keep their quotes).
    private mutating func token() -> Token? {
        guard position < bytes.count else { return nil }
        let start = position
        switch bytes[position] {
        case UInt8(ascii: "\""):
            guard string() != nil else { return nil }
            return Token(start: start, end: position, kind: .string)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            _ = take(UInt8(ascii: "-"))
            let digits = position
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
            let count = position - digits
            guard count > 0, count <= 18, count == 1 || bytes[digits] != UInt8(ascii: "0") else { return nil }
            guard !(count == 1 && bytes[digits] == UInt8(ascii: "0") && digits > start) else { return nil }
            if position < bytes.count {
                switch bytes[position] {
                case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return nil
                default: break
                }
            }
            return Token(start: start, end: position, kind: .integer)
        case UInt8(ascii: "t"):
            return literal("true")
        case UInt8(ascii: "f"):
            return literal("false")
        case UInt8(ascii: "n"):
            return literal("null")
        default:
            return nil
        }
    }

    private mutating func literal(_ word: StaticString) -> Token? {
        let count = word.utf8CodeUnitCount
        guard bytes.count - position >= count, UnsafeRawBufferPointer(rebasing: bytes[position..<position + count]).equals(word) else {
            return nil
        }
        let start = position
        position += count
        return Token(start: start, end: position, kind: .literal)
    }
}

extension UnsafeRawBufferPointer {
    /// Whether these bytes are `text`'s.
    func equals(_ text: StaticString) -> Bool {
        elementsEqualBytes(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }
}

extension RequestScanner.Token {
    /// The token's bytes in `line` (a string with its quotes).
    func bytes(in line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: line[start..<end])
    }

    /// A string token's contents, without its quotes.
    func contents(in line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: line[start + 1..<end - 1])
    }

    /// The token's value: what `JSONValue.parse` makes of it (a scanned string has no escapes and
    /// ASCII bytes only, so its bytes are its text).
    func json(in line: UnsafeRawBufferPointer) -> JSONValue {
        switch kind {
        case .string: .string(String(decoding: contents(in: line), as: UTF8.self))
        case .integer: .int(integer(in: line))
        case .literal:
            switch line[start] {
            case UInt8(ascii: "t"): .bool(true)
            case UInt8(ascii: "f"): .bool(false)
            default: .null
            }
        }
    }

    /// An integer token's value (it has at most 18 digits: it fits).
    func integer(in line: UnsafeRawBufferPointer) -> Int64 {
        var value: Int64 = 0
        var index = start
        let negative = line[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        while index < end {
            value = value * 10 + Int64(line[index] - UInt8(ascii: "0"))
            index += 1
        }
        return negative ? -value : value
    }
}
