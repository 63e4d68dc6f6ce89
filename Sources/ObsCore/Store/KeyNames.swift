/// Key and channel names (model.md, Keys): segments of `[A-Za-z0-9_-]+` joined by `.`, at most
/// 256 bytes.
enum KeyName {
    static let maxBytes = 256

    static func isValid(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= maxBytes else { return false }
        var segmentLength = 0
        for byte in name.utf8 {
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
        case literal(Substring)
        case one
        case any
    }

    let text: String
    let segments: [Segment]
    /// The literal segments before the first wildcard, joined by `.`: the pattern index's bucket.
    let prefix: String
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
                segments.append(.literal(part))
                if literal { prefixParts.append(part) }
            }
        }
        self.text = text
        self.segments = segments
        self.prefix = prefixParts.joined(separator: ".")
    }

    func matches(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return KeyPattern.match(segments[...], parts[...])
    }

    private static func match(_ pattern: ArraySlice<Segment>, _ name: ArraySlice<Substring>) -> Bool {
        guard let first = pattern.first else { return name.isEmpty }
        switch first {
        case .literal(let literal):
            guard let head = name.first, head == literal else { return false }
            return match(pattern.dropFirst(), name.dropFirst())
        case .one:
            guard !name.isEmpty else { return false }
            return match(pattern.dropFirst(), name.dropFirst())
        case .any:
            let rest = pattern.dropFirst()
            if rest.isEmpty { return true }
            var tail = name
            while true {
                if match(rest, tail) { return true }
                if tail.isEmpty { return false }
                tail = tail.dropFirst()
            }
        }
    }

}
