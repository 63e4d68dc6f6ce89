/// Something kept per pattern in a `PatternIndex`.
protocol PatternKeyed: AnyObject {
    var pattern: KeyPattern { get }
}

/// Entries indexed by their pattern's literal prefix (the segments before the first wildcard), so
/// that finding the entries whose pattern matches a key looks in one bucket per prefix of the key's
/// name, never at every pattern: a lookup costs the number of the name's segments plus the
/// patterns that share one of its prefixes. The watch unit keeps its watched patterns in one; the
/// store keeps the patterns that `match()` reads in another.
struct PatternIndex<Entry: PatternKeyed> {
    private var byText: [String: Entry] = [:]
    private var byPrefix: [String: [Entry]] = [:]

    var count: Int { byText.count }

    /// The entry of `pattern`, made by `make` when there is none yet.
    mutating func entry(for pattern: KeyPattern, make: () -> Entry) -> Entry {
        if let entry = byText[pattern.text] { return entry }
        let entry = make()
        byText[pattern.text] = entry
        byPrefix[pattern.prefix, default: []].append(entry)
        return entry
    }

    mutating func remove(_ entry: Entry) {
        guard byText[entry.pattern.text] === entry else { return }
        byText[entry.pattern.text] = nil
        byPrefix[entry.pattern.prefix]?.removeAll { $0 === entry }
        if byPrefix[entry.pattern.prefix]?.isEmpty == true { byPrefix[entry.pattern.prefix] = nil }
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
