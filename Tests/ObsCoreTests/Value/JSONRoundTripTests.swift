import XCTest
import ObsCore
import TestSupport

/// Seeded property tests: random values (unicode and control characters, nesting, edge numbers)
/// survive encode -> decode, and the encoding is canonical.
final class JSONRoundTripTests: XCTestCase {
    func test_roundTrip_decodingTheEncodingGivesAnEqualValueAndTheSameBytes() throws {
        var random = SplitMix64(seed: 0x0B5D_0001)
        for iteration in 0..<3_000 {
            let value = random.value(depth: 4)
            let encoded = value.encoded
            let decoded: JSONValue
            do {
                decoded = try JSONValue.parse(encoded)
            } catch {
                return XCTFail("iteration \(iteration): \(error) decoding \(encoded)")
            }
            XCTAssertEqual(decoded, value, "iteration \(iteration): \(encoded)")
            XCTAssertEqual(decoded.encoded, encoded, "iteration \(iteration)")
        }
    }

    func test_roundTrip_everyFiniteDoubleSurvivesItsShortestForm() throws {
        var random = SplitMix64(seed: 0x0B5D_0002)
        for _ in 0..<20_000 {
            let d = Double(bitPattern: random.next())
            guard d.isFinite else { continue }
            let decoded = try JSONValue.parse(d.description)
            XCTAssertEqual(decoded.doubleValue?.bitPattern, d.bitPattern, d.description)
            let viaEncoding = try JSONValue.parse(JSONValue.double(d).encoded)
            XCTAssertEqual(viaEncoding, .double(d), d.description)
        }
    }

    func test_roundTrip_bytesFromTheEncoderAreValidUTF8() {
        var random = SplitMix64(seed: 0x0B5D_0003)
        for _ in 0..<500 {
            var buffer: [UInt8] = []
            random.value(depth: 3).encode(into: &buffer)
            XCTAssertNotNil(String(validating: buffer, as: UTF8.self))
            XCTAssertFalse(buffer.contains { $0 < 0x20 }, "raw control character in output")
        }
    }
}

extension SplitMix64 {
    /// A random value; containers only while `depth` lasts.
    mutating func value(depth: Int) -> JSONValue {
        switch below(depth > 0 ? 9 : 6) {
        case 0: return .null
        case 1: return .bool(below(2) == 0)
        case 2: return .int(integer())
        case 3: return .double(double())
        case 4, 5: return .string(string())
        case 6, 7:
            return .array((0..<below(6)).map { _ in value(depth: depth - 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<below(6) { members[string()] = value(depth: depth - 1) }
            return .object(members)
        }
    }

    mutating func integer() -> Int64 {
        switch below(4) {
        case 0: return pick([0, 1, -1, .max, .min, .max - 1, .min + 1, 1 << 53, -(1 << 53) - 1])
        case 1: return Int64(below(2000)) - 1000
        default: return Int64(bitPattern: next())
        }
    }

    mutating func double() -> Double {
        switch below(4) {
        case 0:
            return pick([0.0, -0.0, 0.1, -2.5, 1e-7, 1e21, 1e22, 1e23, 9007199254740993.0,
                         9223372036854775808.0, -9223372036854775808.0, 1.7976931348623157e308,
                         .leastNonzeroMagnitude, .leastNormalMagnitude, 123456789.125, 1.0])
        case 1: return Double(Int64(below(2_000_000)) - 1_000_000) / 64
        default:
            while true {
                let d = Double(bitPattern: next())
                if d.isFinite { return d }
            }
        }
    }

    /// Strings mixing ASCII, JSON's special characters, control characters, and scalars from every
    /// UTF-8 length (including combining marks, noncharacters and the edges around surrogates).
    mutating func string() -> String {
        var scalars = String.UnicodeScalarView()
        for _ in 0..<below(12) {
            let v: UInt32
            switch below(8) {
            case 0: v = UInt32(below(0x20))
            case 1: v = pick([0x22, 0x5C, 0x2F, 0x7F, 0x301, 0xD7FF, 0xE000, 0xFEFF, 0xFFFD, 0xFFFF, 0x10FFFF])
            case 2: v = 0x80 + UInt32(below(0x800 - 0x80))
            case 3: v = 0x800 + UInt32(below(0xD800 - 0x800))
            case 4: v = 0x10000 + UInt32(below(0x110000 - 0x10000))
            default: v = 0x20 + UInt32(below(0x5F))
            }
            scalars.append(Unicode.Scalar(v)!)
        }
        return String(scalars)
    }
}
