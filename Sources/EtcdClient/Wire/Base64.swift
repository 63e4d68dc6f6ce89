// Base64 (RFC 4648, with padding), for the gateway's bytes: written here because Foundation's
// goes through Data and String bridging, which cost more than the rest of a request's encoding.

enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The values of the alphabet's bytes; 0xFF for every other byte.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            output += [alphabet[Int(chunk >> 18)], alphabet[Int(chunk >> 12 & 63)], alphabet[Int(chunk >> 6 & 63)],
                       alphabet[Int(chunk & 63)]]
            index += 3
        }
        switch bytes.count - index {
        case 1:
            let chunk = UInt32(bytes[index]) << 16
            output += [alphabet[Int(chunk >> 18)], alphabet[Int(chunk >> 12 & 63)], UInt8(ascii: "="), UInt8(ascii: "=")]
        case 2:
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            output += [alphabet[Int(chunk >> 18)], alphabet[Int(chunk >> 12 & 63)], alphabet[Int(chunk >> 6 & 63)], UInt8(ascii: "=")]
        default:
            break
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes `text` encodes; nil when it is not base64.
    static func decode(_ text: String) -> [UInt8]? {
        var utf8 = Array(text.utf8)
        guard utf8.count % 4 == 0 else { return nil }
        var padding = 0
        while padding < 2, utf8.last == UInt8(ascii: "=") {
            utf8.removeLast()
            padding += 1
        }
        var output: [UInt8] = []
        output.reserveCapacity(utf8.count * 3 / 4)
        var chunk: UInt32 = 0
        var filled = 0
        for byte in utf8 {
            let value = values[Int(byte)]
            guard value != 0xFF else { return nil }
            chunk = chunk << 6 | UInt32(value)
            filled += 1
            if filled == 4 {
                output += [UInt8(chunk >> 16), UInt8(chunk >> 8 & 0xFF), UInt8(chunk & 0xFF)]
                chunk = 0
                filled = 0
            }
        }
        switch filled {
        case 0: break
        case 2: output.append(UInt8(chunk >> 4))
        case 3: output += [UInt8(chunk >> 10), UInt8(chunk >> 2 & 0xFF)]
        default: return nil
        }
        return output
    }
}
