// The two wire protocols the comparison speaks, reduced to what it needs: encoding the commands it
// sends, and telling where one incoming item ends and whether it is a reply or a pushed message
// (obsd's `change` event, Redis's pub/sub `message`).
import Foundation

/// One incoming item: a reply to a command, a pushed message counted as a delivery, or something
/// else pushed (obsd's `synced`, Redis's subscribe confirmation is a reply).
enum WireItem { case reply, delivery, other }

enum Wire: String, CaseIterable {
    case obsd, redis

    /// Finds the first complete item in `bytes[start...]`: its kind and the index after it.
    func scan(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> (WireItem, Int)? {
        switch self {
        case .obsd: return Self.scanLine(bytes, from: start)
        case .redis: return RESP.scan(bytes, from: start)
        }
    }

    /// obsd writes compact JSON, one object a line; events begin with `{"event":`, responses with
    /// `{"id":` or `{"ok":`.
    private static func scanLine(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> (WireItem, Int)? {
        guard let base = bytes.baseAddress, start < bytes.count,
              let found = memchr(base + start, 0x0A, bytes.count - start) else { return nil }
        let end = UnsafePointer<UInt8>(found.assumingMemoryBound(to: UInt8.self)) - base + 1
        let line = UnsafeBufferPointer(rebasing: bytes[start..<end])
        if line.starts(with: changePrefix) { return (.delivery, end) }
        if line.starts(with: eventPrefix) { return (.other, end) }
        return (.reply, end)
    }

    private static let eventPrefix = Array(#"{"event":"#.utf8)
    private static let changePrefix = Array(#"{"event":"change""#.utf8)

    func set(_ key: String, _ value: WireValue) -> [UInt8] {
        switch self {
        case .obsd: Array(#"{"op":"set","key":"\#(key)","value":\#(value.json)}"#.utf8) + [0x0A]
        case .redis: RESP.command("SET", key, value.text)
        }
    }

    func get(_ key: String) -> [UInt8] {
        switch self {
        case .obsd: Array(#"{"op":"get","key":"\#(key)"}"#.utf8) + [0x0A]
        case .redis: RESP.command("GET", key)
        }
    }
}

/// A value written by both servers: obsd stores it as JSON (a string or a number), Redis as the
/// same text.
enum WireValue {
    case string(String)
    case number(Int)

    var json: String {
        switch self {
        case .string(let text): "\"\(text)\""
        case .number(let number): String(number)
        }
    }

    var text: String {
        switch self {
        case .string(let text): text
        case .number(let number): String(number)
        }
    }

    /// A 64-byte string value that differs for each `seed`, so no write is a no-op.
    static func payload(_ seed: Int) -> WireValue {
        let digits = String(seed)
        return .string(String(repeating: "0", count: 16 - min(16, digits.count)) + digits + fill)
    }

    private static let fill = String(repeating: "x", count: 48)
}
