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
    private var byPrefix = PrefixTable<Entry>()

    var count: Int { byText.count }

    /// The entry of `pattern`, made by `make` when there is none yet.
    mutating func entry(for pattern: KeyPattern, make: () -> Entry) -> Entry {
        if let entry = byText[pattern.text] { return entry }
        let entry = make()
        byText[pattern.text] = entry
        byPrefix.add(entry, hash: pattern.prefixHash)
        return entry
    }

    mutating func remove(_ entry: Entry) {
        guard byText[entry.pattern.text] === entry else { return }
        byText[entry.pattern.text] = nil
        byPrefix.remove(entry, hash: entry.pattern.prefixHash)
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

    /// `forEachEntry(matching:)` for each of `items`, named by `name`: the index is read through
    /// one borrow for all of them (a call per name copied the index, three references, each time).
    func forEachEntry<Items: Sequence>(matchingEach items: Items, name: (Items.Element) -> UnsafeRawBufferPointer,
                                       _ body: (Items.Element, Entry) -> Void) {
        guard !byPrefix.isEmpty else { return }
        for item in items { forEachEntry(matching: name(item)) { body(item, $0) } }
    }

    /// `forEachEntry` of a name given as its bytes.
    func forEachEntry(matching name: UnsafeRawBufferPointer, _ body: (Entry) -> Void) {
        guard !byPrefix.isEmpty else { return }
        func visit(_ hash: Int) {
            // Most prefixes index nothing: that costs a probe, and no copy of a bucket.
            guard let index = byPrefix.index(of: hash) else { return }
            for entry in byPrefix.bucket(at: index) where entry.pattern.matches(name) { body(entry) }
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

/// Buckets of entries by prefix hash: open addressing on the hash itself (it is already random),
/// so that a lookup that finds nothing, as most do, costs a load and a compare.
private struct PrefixTable<Entry: AnyObject> {
    /// 0 marks an empty slot (a hash of 0 is kept as 1).
    private var hashes = [Int](repeating: 0, count: 8)
    private var buckets = [[Entry]](repeating: [], count: 8)
    private var count = 0

    var isEmpty: Bool { count == 0 }

    private static func key(_ hash: Int) -> Int { hash == 0 ? 1 : hash }

    private func slot(_ key: Int) -> (index: Int, found: Bool) {
        let mask = hashes.count - 1
        var index = key & mask
        while hashes[index] != 0 {
            if hashes[index] == key { return (index, true) }
            index = (index + 1) & mask
        }
        return (index, false)
    }

    /// The slot of the bucket of `hash`, if there is one.
    @inline(__always)
    func index(of hash: Int) -> Int? {
        let key = Self.key(hash)
        return hashes.withUnsafeBufferPointer { hashes in
            let mask = hashes.count - 1
            var index = key & mask
            while true {
                let found = hashes[index]
                if found == key { return index }
                if found == 0 { return nil }
                index = (index + 1) & mask
            }
        }
    }

    func bucket(at index: Int) -> [Entry] { buckets[index] }

    mutating func add(_ entry: Entry, hash: Int) {
        let key = Self.key(hash)
        let (index, found) = slot(key)
        if found {
            buckets[index].append(entry)
            return
        }
        hashes[index] = key
        buckets[index] = [entry]
        count += 1
        if count * 2 > hashes.count { rehash(hashes.count * 2) }
    }

    mutating func remove(_ entry: Entry, hash: Int) {
        let (index, found) = slot(Self.key(hash))
        guard found else { return }
        buckets[index].removeAll { $0 === entry }
        guard buckets[index].isEmpty else { return }
        // Rebuilt without it: removals are rare (a watch's last pattern going), lookups are not.
        hashes[index] = 0
        count -= 1
        rehash(hashes.count)
    }

    private mutating func rehash(_ size: Int) {
        let oldHashes = hashes, oldBuckets = buckets
        hashes = [Int](repeating: 0, count: size)
        buckets = [[Entry]](repeating: [], count: size)
        for index in oldHashes.indices where oldHashes[index] != 0 {
            let (slot, _) = slot(oldHashes[index])
            hashes[slot] = oldHashes[index]
            buckets[slot] = oldBuckets[index]
        }
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
