// A request's `id` is echoed exactly as sent (docs/protocol.md). Strings, booleans, null and
// integers that fit int64 come back the same when re-encoded from their parsed value; other
// numbers do not (9223372036854775808 would come back as 9.223372036854776e+18, 1.50 as 1.5), so
// for those the answer carries the number's own bytes from the request line.
enum RequestID {
    /// The bytes of the number that is the value of the top-level member "id" of `line`, a
    /// well-formed JSON object (the parser has accepted it, duplicate names included); nil when
    /// there is no such number.
    static func numberToken(in line: UnsafeRawBufferPointer) -> [UInt8]? {
        var scanner = Scanner(bytes: line)
        scanner.skipWhitespace()
        guard scanner.take(UInt8(ascii: "{")) else { return nil }
        while true {
            scanner.skipWhitespace()
            guard let isID = scanner.memberNameIsID() else { return nil }
            scanner.skipWhitespace()
            guard scanner.take(UInt8(ascii: ":")) else { return nil }
            scanner.skipWhitespace()
            let start = scanner.position
            scanner.skipValue()
            if isID {
                let token = Array(line[start..<scanner.position])
                guard let first = token.first, first == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
                    return nil
                }
                return token
            }
            scanner.skipWhitespace()
            guard scanner.take(UInt8(ascii: ",")) else { return nil }
        }
    }

    /// A cursor over a line already known to be valid JSON: no error handling beyond stopping.
    private struct Scanner {
        let bytes: UnsafeRawBufferPointer
        var position = 0

        mutating func take(_ byte: UInt8) -> Bool {
            guard position < bytes.count, bytes[position] == byte else { return false }
            position += 1
            return true
        }

        mutating func skipWhitespace() {
            while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
        }

        /// Skips a member name; whether it is "id" (escapes decoded), nil if there is none.
        mutating func memberNameIsID() -> Bool? {
            let start = position
            guard take(UInt8(ascii: "\"")) else { return nil }
            skipStringBody()
            let name = UnsafeRawBufferPointer(rebasing: bytes[start..<position])
            if name.elementsEqual("\"id\"".utf8) { return true }
            guard name.contains(UInt8(ascii: "\\")) else { return false }
            return (try? JSONValue.parse(name)) == .string("id")
        }

        /// After an opening quote: to just past the closing one.
        mutating func skipStringBody() {
            while position < bytes.count {
                let byte = bytes[position]
                position += 1
                if byte == UInt8(ascii: "\\") {
                    position += 1
                } else if byte == UInt8(ascii: "\"") {
                    return
                }
            }
        }

        /// Skips one value: a string, a nested object or array, or a scalar token.
        mutating func skipValue() {
            var depth = 0
            while position < bytes.count {
                let byte = bytes[position]
                switch byte {
                case UInt8(ascii: "\""):
                    position += 1
                    skipStringBody()
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    position += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == 0 { return }
                    depth -= 1
                    position += 1
                case UInt8(ascii: ","):
                    if depth == 0 { return }
                    position += 1
                case 0x20, 0x09, 0x0A, 0x0D:
                    if depth == 0 { return }
                    position += 1
                default:
                    position += 1
                }
                if depth == 0, byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") { return }
            }
        }
    }
}
