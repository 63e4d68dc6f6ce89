// The Redis serialization protocol (RESP2), as much as SET, GET, PUBLISH, SUBSCRIBE and CONFIG
// replies need.
import Foundation

enum RESP {
    /// A command as an array of bulk strings.
    static func command(_ parts: String...) -> [UInt8] {
        var bytes = Array("*\(parts.count)\r\n".utf8)
        for part in parts {
            bytes += Array("$\(part.utf8.count)\r\n".utf8)
            bytes += Array(part.utf8)
            bytes += [0x0D, 0x0A]
        }
        return bytes
    }

    /// One complete reply starting at `start`: pub/sub pushes (`*3 message`, `*4 pmessage`) are
    /// deliveries, everything else a reply.
    static func scan(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> (WireItem, Int)? {
        guard let end = skip(bytes, start) else { return nil }
        guard bytes[start] == UInt8(ascii: "*"), let (_, headerEnd) = line(bytes, start),
              bytes[headerEnd] == UInt8(ascii: "$"), let (length, bodyStart) = line(bytes, headerEnd) else {
            return (.reply, end)
        }
        let kind = String(decoding: UnsafeBufferPointer(rebasing: bytes[bodyStart..<bodyStart + length]), as: UTF8.self)
        return (kind == "message" || kind == "pmessage" ? .delivery : .reply, end)
    }

    /// The index after the reply at `start`, or nil when it is not complete yet.
    private static func skip(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int) -> Int? {
        guard start < bytes.count, let (number, next) = line(bytes, start) else { return nil }
        switch bytes[start] {
        case UInt8(ascii: "$"):
            if number < 0 { return next }
            return next + number + 2 <= bytes.count ? next + number + 2 : nil
        case UInt8(ascii: "*"):
            var index = next
            for _ in 0..<max(0, number) {
                guard let after = skip(bytes, index) else { return nil }
                index = after
            }
            return index
        default:
            return next
        }
    }

    /// The integer after the type byte of the line at `start` (0 when it is not a number), and the
    /// index after its CRLF.
    private static func line(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int) -> (Int, Int)? {
        var index = start + 1
        var number = 0
        var negative = false
        while index < bytes.count, bytes[index] != 0x0D {
            let byte = bytes[index]
            if byte == UInt8(ascii: "-") { negative = true }
            else if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { number = number &* 10 &+ Int(byte - 48) }
            index += 1
        }
        guard index + 1 < bytes.count else { return nil }
        return (negative ? -number : number, index + 2)
    }
}
