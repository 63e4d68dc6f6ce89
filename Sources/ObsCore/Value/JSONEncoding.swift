// The canonical compact encoding: the same value always encodes to the same bytes, and values that
// compare equal (JSONValue's structural equality) encode identically.
// - No whitespace. Object members are sorted by the UTF-8 bytes of their names (that is, by code
//   point), which depends on neither locale nor Unicode normalization.
// - Strings: `"` `\` and control characters are escaped (\b \f \n \r \t, others as \u00XX with
//   lowercase hex); everything else, '/' and non-ASCII included, is written as raw UTF-8.
// - Integral doubles within Int64 range print as integers ("1", not "1.0"), because `.double(1)`
//   equals `.int(1)`; -0.0 prints as "0" for the same reason. Decoding such output gives `.int`,
//   which is an equal value, and re-encoding it gives the same bytes.
// - Other doubles print in Swift's shortest round-trip form (`Double.description`, e.g. "21.5",
//   "1e-07", "1.5e+300"), which is valid JSON and decodes to the same double.
// - Encoding recurses once per nesting level. Values from the decoder are at most maxDepth deep;
//   deeper ones can only be built in code, and JSONValue's own ==, hash and deinit recurse as well.
// - Non-finite doubles never come from the decoder, and the store refuses to create them; should
//   one be encoded anyway it becomes `null`, so the output stays valid JSON.

/// Where the canonical encoder writes: a byte array, or a `ByteBuffer` (the paths that write a line
/// per request or per event, into memory they keep).
public protocol JSONOutput: ~Copyable {
    mutating func append(_ byte: UInt8)
    mutating func append(_ bytes: UnsafeRawBufferPointer)
    /// The decimal digits of `value` (an output that can write in place does it faster).
    mutating func appendDigits(_ value: UInt64)
    /// `utf8` as a JSON string (likewise).
    mutating func appendQuoted(_ utf8: UnsafeRawBufferPointer)
}

extension JSONOutput where Self: ~Copyable {
    public mutating func appendDigits(_ value: UInt64) { JSONValue.appendDigitsAppending(value, to: &self) }
    public mutating func appendQuoted(_ utf8: UnsafeRawBufferPointer) { JSONValue.appendStringEscaping(utf8, to: &self) }
}

extension JSONOutput where Self: ~Copyable {
    @inline(__always)
    public mutating func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }
}

extension Array: JSONOutput where Element == UInt8 {
    @inline(__always)
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        append(contentsOf: bytes)
    }
}

extension ByteBuffer: JSONOutput {
    /// Written in place from the end, two digits at a time, after counting them (every event and
    /// answer carries revisions and, mostly, numbers).
    public mutating func appendDigits(_ value: UInt64) {
        var length = 1
        var bound: UInt64 = 10
        while length < 20, value >= bound {
            length += 1
            bound = bound &* 10
        }
        reserve(length)
        let pairs = JSONValue.digitPairs.baseAddress!
        var cursor = end + length
        var rest = value
        while rest >= 100 {
            let next = rest / 100
            let pair = Int(truncatingIfNeeded: rest &- next &* 100) &* 2
            cursor -= 2
            cursor.storeBytes(of: pairs.loadUnaligned(fromByteOffset: pair, as: UInt16.self), as: UInt16.self)
            rest = next
        }
        if rest >= 10 {
            cursor -= 2
            cursor.storeBytes(of: pairs.loadUnaligned(fromByteOffset: Int(truncatingIfNeeded: rest) &* 2, as: UInt16.self), as: UInt16.self)
        } else {
            cursor -= 1
            cursor.storeBytes(of: UInt8(truncatingIfNeeded: rest) &+ UInt8(ascii: "0"), as: UInt8.self)
        }
        didAppend(length)
    }

    /// A string that needs no escaping (names, mostly) is copied at once between its quotes.
    public mutating func appendQuoted(_ utf8: UnsafeRawBufferPointer) {
        for byte in utf8 where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            return JSONValue.appendStringEscaping(utf8, to: &self)
        }
        reserve(utf8.count + 2)
        let start = end
        start.storeBytes(of: UInt8(ascii: "\""), as: UInt8.self)
        if let source = utf8.baseAddress { (start + 1).copyMemory(from: source, byteCount: utf8.count) }
        (start + 1 + utf8.count).storeBytes(of: UInt8(ascii: "\""), as: UInt8.self)
        didAppend(utf8.count + 2)
    }
}

extension JSONValue: CustomStringConvertible {
    /// The canonical compact JSON encoding, appended to `buffer` as UTF-8.
    public func encode<Output: JSONOutput & ~Copyable>(into buffer: inout Output) {
        switch self {
        case .null:
            buffer.append("null")
        case .bool(let value):
            buffer.append(value ? "true" : "false")
        case .int(let value):
            JSONValue.appendInteger(value, to: &buffer)
        case .double(let value):
            JSONValue.appendDouble(value, to: &buffer)
        case .string(let value):
            JSONValue.appendString(value, to: &buffer)
        case .array(let elements):
            buffer.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { buffer.append(UInt8(ascii: ",")) }
                element.encode(into: &buffer)
            }
            buffer.append(UInt8(ascii: "]"))
        case .object(let members):
            buffer.append(UInt8(ascii: "{"))
            if members.count == 1, let (name, value) = members.first {
                JSONValue.appendMember(name, value, to: &buffer)
            } else {
                let sorted = members.sorted { JSONValue.utf8Precedes($0.key, $1.key) }
                for (i, (name, value)) in sorted.enumerated() {
                    if i > 0 { buffer.append(UInt8(ascii: ",")) }
                    JSONValue.appendMember(name, value, to: &buffer)
                }
            }
            buffer.append(UInt8(ascii: "}"))
        }
    }

    /// The canonical compact JSON encoding.
    public var encoded: String {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(64)
        encode(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// The canonical compact JSON encoding.
    public var description: String { encoded }

    static func appendMember<Output: JSONOutput & ~Copyable>(_ name: String, _ value: JSONValue, to buffer: inout Output) {
        appendString(name, to: &buffer)
        buffer.append(UInt8(ascii: ":"))
        value.encode(into: &buffer)
    }

    /// Whether `a` sorts before `b` by UTF-8 bytes. Native and small strings are contiguous UTF-8,
    /// so this is a plain byte comparison; the fallback covers other string storage.
    static func utf8Precedes(_ a: String, _ b: String) -> Bool {
        let bytewise = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in
                for i in 0..<Swift.min(x.count, y.count) where x[i] != y[i] { return x[i] < y[i] }
                return x.count < y.count
            }
        }
        if let bytewise, let result = bytewise { return result }
        return a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    static func appendInteger<Output: JSONOutput & ~Copyable>(_ value: Int64, to buffer: inout Output) {
        if value < 0 { buffer.append(UInt8(ascii: "-")) }
        appendDigits(value.magnitude, to: &buffer)
    }

    /// The decimal digits of `value`, two at a time (revisions, versions and counts go out with
    /// every answer and event).
    static func appendDigits<Output: JSONOutput & ~Copyable>(_ value: UInt64, to buffer: inout Output) {
        buffer.appendDigits(value)
    }

    /// `appendDigits` through `append` alone.
    static func appendDigitsAppending<Output: JSONOutput & ~Copyable>(_ value: UInt64, to buffer: inout Output) {
        if value < 10 {
            buffer.append(UInt8(truncatingIfNeeded: value) &+ UInt8(ascii: "0"))
            return
        }
        var magnitude = value
        // 20 digits at most, written from the end of a 24-byte scratch on the stack.
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &scratch) { digits in
            var i = digits.count
            while magnitude >= 100 {
                let pair = Int(magnitude % 100) &* 2
                magnitude /= 100
                i -= 2
                digits[i] = digitPairs[pair]
                digits[i + 1] = digitPairs[pair + 1]
            }
            if magnitude >= 10 {
                let pair = Int(magnitude) &* 2
                i -= 2
                digits[i] = digitPairs[pair]
                digits[i + 1] = digitPairs[pair + 1]
            } else {
                i -= 1
                digits[i] = UInt8(truncatingIfNeeded: magnitude) &+ UInt8(ascii: "0")
            }
            buffer.append(UnsafeRawBufferPointer(rebasing: digits[i...]))
        }
    }

    /// "00", "01", ... "99".
    static var digitPairs: UnsafeRawBufferPointer {
        let table: StaticString = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"
        return UnsafeRawBufferPointer(start: table.utf8Start, count: table.utf8CodeUnitCount)
    }

    static func appendDouble<Output: JSONOutput & ~Copyable>(_ value: Double, to buffer: inout Output) {
        if let integer = Int64(exactly: value) {
            appendInteger(integer, to: &buffer)
        } else if value.isFinite {
            var text = value.description
            text.withUTF8 { buffer.append(UnsafeRawBufferPointer($0)) }
        } else {
            buffer.append("null")
        }
    }

    static func appendString<Output: JSONOutput & ~Copyable>(_ string: String, to buffer: inout Output) {
        var string = string
        string.withUTF8 { appendString(UnsafeRawBufferPointer($0), to: &buffer) }
    }

    /// A string given as its UTF-8 bytes.
    static func appendString<Output: JSONOutput & ~Copyable>(_ utf8: UnsafeRawBufferPointer, to buffer: inout Output) {
        buffer.appendQuoted(utf8)
    }

    /// `appendString` through `append` alone.
    static func appendStringEscaping<Output: JSONOutput & ~Copyable>(_ utf8: UnsafeRawBufferPointer, to buffer: inout Output) {
        buffer.append(UInt8(ascii: "\""))
        // Bytes from `runStart` to the current index need no escaping and are copied at once.
        var runStart = 0
        for i in utf8.indices {
            let byte = utf8[i]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else {
                continue
            }
            buffer.append(UnsafeRawBufferPointer(rebasing: utf8[runStart..<i]))
            appendEscaped(byte, to: &buffer)
            runStart = i + 1
        }
        buffer.append(UnsafeRawBufferPointer(rebasing: utf8[runStart...]))
        buffer.append(UInt8(ascii: "\""))
    }

    static func appendEscaped<Output: JSONOutput & ~Copyable>(_ byte: UInt8, to buffer: inout Output) {
        let short: UInt8
        switch byte {
        case UInt8(ascii: "\""): short = UInt8(ascii: "\"")
        case UInt8(ascii: "\\"): short = UInt8(ascii: "\\")
        case 0x08: short = UInt8(ascii: "b")
        case 0x0C: short = UInt8(ascii: "f")
        case 0x0A: short = UInt8(ascii: "n")
        case 0x0D: short = UInt8(ascii: "r")
        case 0x09: short = UInt8(ascii: "t")
        default:
            let hexDigits: StaticString = "0123456789abcdef"
            buffer.append("\\u00")
            buffer.append(hexDigits.utf8Start[Int(byte >> 4)])
            buffer.append(hexDigits.utf8Start[Int(byte & 0x0F)])
            return
        }
        buffer.append(UInt8(ascii: "\\"))
        buffer.append(short)
    }
}
