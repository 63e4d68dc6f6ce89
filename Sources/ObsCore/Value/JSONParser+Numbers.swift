// Numbers: one pass checks the RFC 8259 grammar and accumulates the decimal significand and
// exponent.
// - An integer (no fraction, no exponent) that fits Int64 becomes `.int`. "-0" is the integer 0:
//   Int64 has no negative zero, and JSONValue equality already treats -0.0 and 0 as equal.
// - Everything else becomes a correctly rounded `.double`. When the significand has at most 53 bits
//   and the decimal exponent is within ±22, both are exact doubles and one IEEE multiplication or
//   division rounds correctly (Clinger's fast path). Other numbers go to the standard library's
//   `Double(String)`, which is strtod in the C locale (so a process locale with a decimal comma
//   cannot change the result), given a copy of just the number's bytes.
// - A result beyond the double range ("1e400") is an error; underflow ("1e-400") rounds to 0 or a
//   subnormal, as IEEE rounding does.

extension JSONParser {
    /// Parses the number starting at `pos` (a '-' or a digit), leaving `pos` after it.
    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = pos
        var i = pos
        let negative = base[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard i < end, isDigit(base[i]) else {
            pos = i
            throw pos < end && (base[pos] == UInt8(ascii: "I") || base[pos] == UInt8(ascii: "N"))
                ? JSONParseError("NaN and Infinity are not JSON numbers", offset: pos)
                : JSONParseError("expected a digit after '-'", offset: pos)
        }

        var significand: UInt64 = 0
        // Set when the digits no longer fit `significand`; the slow path then reads the text.
        var inexact = false
        var exponent = 0
        if base[i] == UInt8(ascii: "0") {
            i += 1
            if i < end && isDigit(base[i]) {
                throw JSONParseError("leading zero in number", offset: start)
            }
        } else {
            repeat {
                accumulate(base[i], into: &significand, inexact: &inexact)
                i += 1
            } while i < end && isDigit(base[i])
        }

        var isInteger = true
        if i < end && base[i] == UInt8(ascii: ".") {
            isInteger = false
            i += 1
            guard i < end, isDigit(base[i]) else {
                throw JSONParseError("expected a digit after '.'", offset: i)
            }
            repeat {
                accumulate(base[i], into: &significand, inexact: &inexact)
                exponent -= 1
                i += 1
            } while i < end && isDigit(base[i])
        }

        if i < end && (base[i] == UInt8(ascii: "e") || base[i] == UInt8(ascii: "E")) {
            isInteger = false
            i += 1
            var negativeExponent = false
            if i < end && (base[i] == UInt8(ascii: "+") || base[i] == UInt8(ascii: "-")) {
                negativeExponent = base[i] == UInt8(ascii: "-")
                i += 1
            }
            guard i < end, isDigit(base[i]) else {
                throw JSONParseError("expected a digit in the exponent", offset: i)
            }
            var value = 0
            repeat {
                // Saturating: any exponent this large over- or underflows, which the slow path
                // decides from the text.
                if value < 1_000_000 { value = value * 10 + Int(base[i] &- UInt8(ascii: "0")) }
                i += 1
            } while i < end && isDigit(base[i])
            exponent += negativeExponent ? -value : value
        }
        pos = i

        if isInteger && !inexact {
            if negative {
                if significand <= UInt64(1) << 63 { return .int(Int64(bitPattern: 0 &- significand)) }
            } else if significand <= UInt64(Int64.max) {
                return .int(Int64(significand))
            }
        }
        if !inexact && significand <= UInt64(1) << 53 && exponent >= -22 && exponent <= 22 {
            var value = Double(significand)
            value = exponent < 0 ? value / exactPowersOfTen[-exponent] : value * exactPowersOfTen[exponent]
            return .double(negative ? -value : value)
        }
        let text = String(
            decoding: UnsafeBufferPointer(start: base + start, count: i - start), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw JSONParseError("number out of range", offset: start)
        }
        return .double(value)
    }

    @inline(__always)
    func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10
    }

    @inline(__always)
    func accumulate(_ digit: UInt8, into significand: inout UInt64, inexact: inout Bool) {
        if significand <= (UInt64.max - 9) / 10 {
            significand = significand * 10 + UInt64(digit &- UInt8(ascii: "0"))
        } else {
            inexact = true
        }
    }
}

/// 10^0 ... 10^22, the powers of ten a Double holds exactly.
private let exactPowersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
]
