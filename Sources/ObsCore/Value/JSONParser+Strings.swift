// Strings: the common case (ASCII, no escapes) is one scan and one String built from the byte
// range. Non-ASCII bytes are validated here as strict UTF-8 (Unicode's table 3-7: no overlongs, no
// UTF-8-encoded surrogates, nothing above U+10FFFF, no truncated sequences), so that a bad byte is
// reported with its offset instead of being silently replaced by U+FFFD. Only strings with escapes
// are assembled in the scratch buffer.

extension JSONParser {
    /// Parses the string whose opening quote is at `pos`, leaving `pos` after its closing quote.
    @inline(__always)
    mutating func parseString() throws(JSONParseError) -> String {
        let start = pos + 1
        var i = start
        while i < end {
            let byte = base[i]
            if byte == UInt8(ascii: "\"") {
                pos = i + 1
                return makeString(from: start, to: i)
            }
            if byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { break }
            i += 1
        }
        return try parseStringWithEscapesOrUnicode(start: start, from: i)
    }

    /// Continues `parseString` from `i`, the first byte that is not plain ASCII.
    mutating func parseStringWithEscapesOrUnicode(
        start: Int, from first: Int
    ) throws(JSONParseError) -> String {
        var i = first
        var usesScratch = false
        // Bytes from `runStart` to `i` are literal string content not yet copied to `scratch`.
        var runStart = start
        while true {
            guard i < end else { throw JSONParseError("unterminated string", offset: end) }
            let byte = base[i]
            switch byte {
            case UInt8(ascii: "\""):
                pos = i + 1
                guard usesScratch else { return makeString(from: start, to: i) }
                appendToScratch(from: runStart, to: i)
                return String(decoding: scratch, as: UTF8.self)
            case UInt8(ascii: "\\"):
                if !usesScratch {
                    usesScratch = true
                    scratch.removeAll(keepingCapacity: true)
                }
                appendToScratch(from: runStart, to: i)
                i = try appendEscape(at: i)
                runStart = i
            case 0..<0x20:
                throw JSONParseError(
                    "unescaped control character \(hex(byte)) in string", offset: i)
            case 0x80...:
                i = try endOfUTF8Sequence(at: i)
            default:
                i += 1
            }
        }
    }

    @inline(__always)
    func makeString(from start: Int, to stop: Int) -> String {
        String(decoding: UnsafeBufferPointer(start: base + start, count: stop - start), as: UTF8.self)
    }

    mutating func appendToScratch(from start: Int, to stop: Int) {
        scratch.append(contentsOf: UnsafeBufferPointer(start: base + start, count: stop - start))
    }

    /// Decodes the escape whose backslash is at `i` into `scratch`; returns the index after it.
    mutating func appendEscape(at i: Int) throws(JSONParseError) -> Int {
        guard i + 1 < end else { throw JSONParseError("unterminated string", offset: end) }
        let decoded: UInt8
        switch base[i + 1] {
        case UInt8(ascii: "\""): decoded = 0x22
        case UInt8(ascii: "\\"): decoded = 0x5C
        case UInt8(ascii: "/"): decoded = 0x2F
        case UInt8(ascii: "b"): decoded = 0x08
        case UInt8(ascii: "f"): decoded = 0x0C
        case UInt8(ascii: "n"): decoded = 0x0A
        case UInt8(ascii: "r"): decoded = 0x0D
        case UInt8(ascii: "t"): decoded = 0x09
        case UInt8(ascii: "u"): return try appendUnicodeEscape(at: i)
        default: throw JSONParseError("invalid escape in string", offset: i)
        }
        scratch.append(decoded)
        return i + 2
    }

    /// Decodes `\uXXXX` at `i`, or a surrogate pair `\uD8XX\uDCXX`: a lone surrogate is an error
    /// because it is not a Unicode scalar and a Swift String cannot hold it.
    mutating func appendUnicodeEscape(at i: Int) throws(JSONParseError) -> Int {
        let unit = try hexEscape(at: i)
        var scalar = unit
        var next = i + 6
        switch unit {
        case 0xD800...0xDBFF:
            guard next + 1 < end, base[next] == UInt8(ascii: "\\"), base[next + 1] == UInt8(ascii: "u")
            else { throw JSONParseError("lone high surrogate in \\u escape", offset: i) }
            let low = try hexEscape(at: next)
            guard (0xDC00...0xDFFF).contains(low) else {
                throw JSONParseError("high surrogate not followed by a low surrogate", offset: i)
            }
            scalar = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
            next += 6
        case 0xDC00...0xDFFF:
            throw JSONParseError("lone low surrogate in \\u escape", offset: i)
        default:
            break
        }
        appendUTF8(scalar)
        return next
    }

    /// The 16-bit value of the `\uXXXX` escape whose backslash is at `i`.
    func hexEscape(at i: Int) throws(JSONParseError) -> UInt32 {
        guard end - i >= 6 else { throw JSONParseError("invalid \\u escape", offset: i) }
        var value: UInt32 = 0
        for k in 2..<6 {
            let byte = base[i + k]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte &- UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte &- UInt8(ascii: "a") &+ 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte &- UInt8(ascii: "A") &+ 10
            default: throw JSONParseError("invalid \\u escape", offset: i)
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | scalar >> 6))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | scalar >> 12))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        default:
            scratch.append(UInt8(0xF0 | scalar >> 18))
            scratch.append(UInt8(0x80 | scalar >> 12 & 0x3F))
            scratch.append(UInt8(0x80 | scalar >> 6 & 0x3F))
            scratch.append(UInt8(0x80 | scalar & 0x3F))
        }
    }

    /// Checks the multi-byte UTF-8 sequence starting at `i`; returns the index after it.
    func endOfUTF8Sequence(at i: Int) throws(JSONParseError) -> Int {
        let lead = base[i]
        let continuations: Int
        // The allowed range of the second byte; later bytes are always 80...BF.
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: continuations = 1
        case 0xE0: continuations = 2; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: continuations = 2
        case 0xED: continuations = 2; high = 0x9F
        case 0xF0: continuations = 3; low = 0x90
        case 0xF1...0xF3: continuations = 3
        case 0xF4: continuations = 3; high = 0x8F
        default: throw JSONParseError("invalid UTF-8 byte \(hex(lead))", offset: i)
        }
        guard i + continuations < end else {
            throw JSONParseError("truncated UTF-8 sequence", offset: i)
        }
        let second = base[i + 1]
        guard second >= low && second <= high else {
            throw JSONParseError("invalid UTF-8 sequence", offset: i)
        }
        var k = 2
        while k <= continuations {
            guard base[i + k] & 0xC0 == 0x80 else {
                throw JSONParseError("invalid UTF-8 sequence", offset: i)
            }
            k += 1
        }
        return i + continuations + 1
    }
}
