/// Something kept per pattern in a `PatternIndex`.
protocol PatternKeyed: AnyObject {
    var pattern: KeyPattern { get }
}

/// Entries indexed by their pattern's literal prefix (the segments before the first wildcard), so
/// that finding the entries whose pattern matches a key looks in one bucket per prefix of the key's
/// name, never at every pattern: a lookup costs the number of the name's segments plus the
/// patterns that share one of its prefixes. The watch unit keeps its watched patterns in one; the
/// store keeps the patterns that `match()` reads in another.
///
/// Buckets are keyed by a hash of the prefix's bytes (`PrefixHash`), which a lookup computes for
/// every prefix of the name in one pass over its bytes, building no string; a bucket can hold
/// entries of another prefix with the same hash, which their own match then rules out.
struct PatternIndex<Entry: PatternKeyed> {
    private var byText: [String: Entry] = [:]
    private var byPrefix: [Int: [Entry]] = [:]

    var count: Int { byText.count }

    /// The entry of `pattern`, made by `make` when there is none yet.
    mutating func entry(for pattern: KeyPattern, make: () -> Entry) -> Entry {
        if let entry = byText[pattern.text] { return entry }
        let entry = make()
        byText[pattern.text] = entry
        byPrefix[pattern.prefixHash, default: []].append(entry)
        return entry
    }

    mutating func remove(_ entry: Entry) {
        guard byText[entry.pattern.text] === entry else { return }
        byText[entry.pattern.text] = nil
        let prefix = entry.pattern.prefixHash
        byPrefix[prefix]?.removeAll { $0 === entry }
        if byPrefix[prefix]?.isEmpty == true { byPrefix[prefix] = nil }
    }

    /// Removes every entry for which `isUnused` holds.
    mutating func removeAll(where isUnused: (Entry) -> Bool) {
        for entry in Array(byText.values) where isUnused(entry) { remove(entry) }
    }

    /// Calls `body` with every entry whose pattern matches `name`: those indexed under one of the
    /// name's prefixes ("", the first segment, the first two, ..., the whole name), visited without
    /// building a list of them (this runs for every event of every transaction).
    func forEachEntry(matching name: String, _ body: (Entry) -> Void) {
        guard !byPrefix.isEmpty else { return }
        var name = name
        name.withUTF8 { forEachEntry(matching: UnsafeRawBufferPointer($0), body) }
    }

    /// Whether some entry's pattern matches `name`.
    func anyEntry(matching name: UnsafeRawBufferPointer) -> Bool {
        var found = false
        forEachEntry(matching: name) { _ in found = true }
        return found
    }

    /// `forEachEntry` of a name given as its bytes.
    func forEachEntry(matching name: UnsafeRawBufferPointer, _ body: (Entry) -> Void) {
        guard !byPrefix.isEmpty else { return }
        func visit(_ hash: Int) {
            guard let bucket = byPrefix[hash] else { return }
            for entry in bucket where entry.pattern.matches(name) { body(entry) }
        }
        var hash = PrefixHash()
        visit(hash.value)
        for byte in name {
            if byte == UInt8(ascii: ".") { visit(hash.value) }
            hash.add(byte)
        }
        visit(hash.value)
    }
}

/// The hash of a name's prefix, byte by byte (FNV-1a from a start chosen at random per process, so
/// that clients cannot choose names that all land in one bucket).
struct PrefixHash {
    private static let start = Int.random(in: .min ... .max)
    private(set) var value = PrefixHash.start

    @inline(__always)
    mutating func add(_ byte: UInt8) {
        value = (value ^ Int(byte)) &* 0x100_0000_01b3
    }

    static func of(_ text: String) -> Int {
        var hash = PrefixHash()
        for byte in text.utf8 { hash.add(byte) }
        return hash.value
    }
}
