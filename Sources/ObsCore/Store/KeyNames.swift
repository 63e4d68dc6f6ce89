#if canImport(Glibc)
import Glibc
#endif

/// Key and channel names (docs/protocol.md): segments of `[A-Za-z0-9_-]+` joined by `.`, at most
/// 256 bytes.
enum KeyName {
    static let maxBytes = 256

    static func isValid(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { isValid(UnsafeRawBufferPointer($0)) }
    }

    /// `isValid` of a name given as its bytes.
    static func isValid(_ name: UnsafeRawBufferPointer) -> Bool {
        guard !name.isEmpty, name.count <= maxBytes else { return false }
        var segmentLength = 0
        for byte in name {
            if byte == UInt8(ascii: ".") {
                guard segmentLength > 0 else { return false }
                segmentLength = 0
            } else if isNameByte(byte) {
                segmentLength += 1
            } else {
                return false
            }
        }
        return segmentLength > 0
    }

    static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    /// Throws `bad_key` unless `name` follows the grammar.
    static func validate(_ name: String, _ what: String = "key") throws(ObsError) {
        guard isValid(name) else { throw ObsError(.badKey, "invalid \(what) name '\(name)'") }
    }
}

/// A watch or `match()` pattern: key-name segments where `*` matches exactly one segment and `**`
/// zero or more. A pattern without wildcards matches one name.
struct KeyPattern: Hashable, Sendable {
    enum Segment: Hashable, Sendable {
        /// A segment's name, as bytes (compared with the name's bytes in place).
        case literal([UInt8])
        case one
        case any
    }

    let text: String
    let segments: [Segment]
    /// Whether a segment is `**` (else a name matches segment by segment, with no backtracking).
    private let hasAny: Bool
    /// The literal segments before the first wildcard, joined by `.`: the pattern index's bucket.
    let prefix: String
    /// `prefix` as the pattern index looks it up.
    let prefixHash: Int
    var hasWildcard: Bool { segments.contains { $0 == .one || $0 == .any } }

    /// Parses `text`; throws `bad_key` when a segment is neither a name segment nor `*` / `**`.
    init(_ text: String) throws(ObsError) {
        guard !text.isEmpty, text.utf8.count <= KeyName.maxBytes else {
            throw ObsError(.badKey, "invalid pattern '\(text)'")
        }
        var segments: [Segment] = []
        var prefixParts: [Substring] = []
        var literal = true
        for part in text.split(separator: ".", omittingEmptySubsequences: false) {
            switch part {
            case "*":
                segments.append(.one)
                literal = false
            case "**":
                segments.append(.any)
                literal = false
            default:
                guard !part.isEmpty, part.utf8.allSatisfy(KeyName.isNameByte) else {
                    throw ObsError(.badKey, "invalid pattern '\(text)'")
                }
                segments.append(.literal(Array(part.utf8)))
                if literal { prefixParts.append(part) }
            }
        }
        self.text = text
        self.segments = segments
        hasAny = segments.contains(.any)
        self.prefix = prefixParts.joined(separator: ".")
        prefixHash = PrefixHash.of(prefix)
    }

    /// Whether `name` matches, read in place (this runs for every event and every candidate pattern:
    /// no array of segments is built).
    func matches(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { matches(UnsafeRawBufferPointer($0)) }
    }

    /// `matches` of a name given as its bytes.
    func matches(_ name: UnsafeRawBufferPointer) -> Bool {
        let name = UnsafeBufferPointer(start: name.baseAddress?.assumingMemoryBound(to: UInt8.self), count: name.count)
        return hasAny ? KeyPattern.match(segments[...], name, from: 0) : matchesInOrder(name)
    }

    /// `matches` of a pattern without `**`: each segment against the name's next one.
    private func matchesInOrder(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        var start = 0
        for segment in segments {
            guard start <= name.count else { return false }
            let end = KeyPattern.segmentEnd(name, from: start)
            if case .literal(let literal) = segment, !KeyPattern.equal(literal, name, start, end) { return false }
            start = end + 1
        }
        return start > name.count
    }

    /// Whether `literal` is the bytes of `name` from `start` to `end`.
    private static func equal(_ literal: [UInt8], _ name: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Bool {
        guard literal.count == end - start else { return false }
        return literal.withUnsafeBytes { memcmp($0.baseAddress!, name.baseAddress! + start, end - start) == 0 }
    }

    /// Whether `pattern` matches the segments of `name` from the one starting at `start`
    /// (`start == name.count + 1`: no segment left).
    private static func match(_ pattern: ArraySlice<Segment>, _ name: UnsafeBufferPointer<UInt8>, from start: Int) -> Bool {
        guard let first = pattern.first else { return start > name.count }
        let rest = pattern.dropFirst()
        if case .any = first {
            if rest.isEmpty { return true }
            var next = start
            while true {
                if match(rest, name, from: next) { return true }
                if next > name.count { return false }
                next = segmentEnd(name, from: next) + 1
            }
        }
        guard start <= name.count else { return false }
        let end = segmentEnd(name, from: start)
        if case .literal(let literal) = first, !equal(literal, name, start, end) { return false }
        return match(rest, name, from: end + 1)
    }

    /// The end of the segment starting at `start`: the next dot, or the end of the name.
    private static func segmentEnd(_ name: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var index = start
        while index < name.count, name[index] != UInt8(ascii: ".") { index += 1 }
        return index
    }

}

extension Store {
    /// Whether `name` follows the grammar of key and channel names (docs/protocol.md): for what
    /// reaches a store from elsewhere than a client (cluster mode's records in etcd).
    public static func isValidKeyName(_ name: String) -> Bool { KeyName.isValid(name) }
}
