/// Everything interested in one pattern: the watches listing it, and the `match()` source of
/// computeds reading it with the set of its matching keys.
final class PatternEntry {
    let pattern: KeyPattern
    var watches: [Watch] = []
    var matchNode: MatchNode?
    /// The existing keys matching the pattern, kept while a `match()` reads it.
    var members: Set<String>?

    init(pattern: KeyPattern) { self.pattern = pattern }

    var isUnused: Bool { watches.isEmpty && (matchNode == nil || matchNode!.subs == nil) }
}

/// Patterns indexed by their literal prefix (the segments before the first wildcard), so that
/// finding the patterns that match a key looks in one bucket per prefix of the key's name, never at
/// every pattern: a write costs the number of the name's segments plus the patterns that share one
/// of its prefixes.
struct PatternIndex {
    private var byText: [String: PatternEntry] = [:]
    private var byPrefix: [String: [PatternEntry]] = [:]

    var count: Int { byText.count }

    mutating func entry(for pattern: KeyPattern) -> PatternEntry {
        if let entry = byText[pattern.text] { return entry }
        let entry = PatternEntry(pattern: pattern)
        byText[pattern.text] = entry
        byPrefix[pattern.prefix, default: []].append(entry)
        return entry
    }

    mutating func removeIfUnused(_ entry: PatternEntry) {
        guard entry.isUnused, byText[entry.pattern.text] === entry else { return }
        byText[entry.pattern.text] = nil
        byPrefix[entry.pattern.prefix]?.removeAll { $0 === entry }
        if byPrefix[entry.pattern.prefix]?.isEmpty == true { byPrefix[entry.pattern.prefix] = nil }
    }

    /// Calls `body` with every entry whose pattern matches `name`: those indexed under one of the
    /// name's prefixes ("", the first segment, the first two, ..., the whole name), visited without
    /// building a list of them (this runs for every event of every transaction).
    func forEachEntry(matching name: String, _ body: (PatternEntry) -> Void) {
        guard !byPrefix.isEmpty else { return }
        func visit(_ prefix: String) {
            guard let bucket = byPrefix[prefix] else { return }
            for entry in bucket where entry.pattern.matches(name) { body(entry) }
        }
        visit("")
        let utf8 = name.utf8
        var index = utf8.startIndex
        while let dot = utf8[index...].firstIndex(of: UInt8(ascii: ".")) {
            visit(String(name[..<dot]))
            index = utf8.index(after: dot)
        }
        visit(name)
    }
}
