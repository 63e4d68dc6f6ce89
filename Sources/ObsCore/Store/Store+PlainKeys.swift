/// The hot writes of plain keys, straight from bytes: `set` and `incr` of a key that is a record
/// (or missing), committed as a transaction of one change without a `Transaction`, a snapshot or a
/// node, its event recorded from the bytes the key keeps. A write is prepared first, changing
/// nothing, and is nil when it is one the general path must make (and answer): a key that is a
/// node, an invalid name, a value over the limit, a new key that a `match()` would see, an `incr`
/// of anything but an integer or one that overflows, a value whose bytes differ from the key's
/// where either has non-ASCII bytes (`mayBeEquivalent`; a record keeps whether its value has).
/// Called outside any transaction. In cluster mode (`sharedLog` set) the session proposes a
/// prepared `set` (`submitPlainSet`) rather than committing it, and a revision of the shared log
/// that puts one plain key is applied this way (`applyPlain`), with the log's revisions.
extension Store {
    /// A write of a plain key, checked and ready to commit (valid until the store next changes).
    struct PlainWrite {
        let name: UnsafeRawBufferPointer
        /// The new value's canonical encoding.
        let value: UnsafeRawBufferPointer
        /// Whether `value` has non-ASCII bytes (`KeyRecord.hasNonASCII`), for its record.
        let nonASCII: Bool
        /// The key's slot and record; nil when the key is missing.
        let existing: (slot: Int, record: KeyRecord)?
        let hash: Int
        /// The value is the key's already: nothing to commit.
        let unchanged: Bool
    }

    /// The record of a plain key, for `get`.
    func plainRecord(_ name: UnsafeRawBufferPointer) -> KeyRecord? {
        guard let slot = keys.find(name, hash: KeyTable.hash(name)), case .record(let record) = keys.entry(at: slot) else { return nil }
        return record
    }

    /// `set` of a plain key to an encoded value. `asciiOnly`: the caller knows the value's bytes are
    /// all ASCII (a scanned request's value: RequestScanner.swift), so they are not looked at again.
    func prepareSet(_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer, asciiOnly: Bool) -> PlainWrite? {
        guard value.count <= configuration.maxValueBytes, let (existing, hash) = plainSlot(name) else { return nil }
        let unchanged = existing?.record.value.elementsEqualBytes(value) ?? false
        let nonASCII = asciiOnly ? false : KeyRecord.hasNonASCII(value)
        if let (_, record) = existing, !unchanged, Self.mayBeEquivalent(record, nonASCII) { return nil }
        return PlainWrite(name: name, value: value, nonASCII: nonASCII, existing: existing, hash: hash, unchanged: unchanged)
    }

    /// Whether a value other in its bytes than `held`'s may still be the same value: JSON values
    /// compare strings (and object member names) by Unicode canonical equivalence, so encodings
    /// with non-ASCII bytes may be equal values ("é" composed or not, the Kelvin sign and "K").
    /// Canonical encodings in ASCII are equal values only when they are the same bytes. A write
    /// where this holds takes the general path, which compares values: on every host alike,
    /// whether the key is a record or a node there.
    private static func mayBeEquivalent(_ held: KeyRecord, _ newHasNonASCII: Bool) -> Bool {
        held.valueHasNonASCII || newHasNonASCII
    }

    /// `incr` of a plain key holding an integer (a missing key counts as 0); the new value's
    /// encoding is in `scratch`.
    func prepareIncr(_ name: UnsafeRawBufferPointer, by: Int64) -> PlainWrite? {
        guard let (existing, hash) = plainSlot(name) else { return nil }
        var current: Int64 = 0
        if let (_, record) = existing {
            guard let integer = Self.integer(record.value) else { return nil }
            current = integer
        }
        let (sum, overflow) = current.addingReportingOverflow(by)
        guard !overflow else { return nil }
        scratch.removeAll(keepingCapacityUpTo: 1 << 16)
        JSONValue.appendInteger(sum, to: &scratch)
        return PlainWrite(name: name, value: scratch.bytes, nonASCII: false, existing: existing, hash: hash,
                          unchanged: existing != nil && sum == current)
    }

    /// Commits a prepared write: stored (when the storage keeps commits), a revision, its event.
    /// The revision the key has after it (the current one when nothing changed).
    func commit(_ write: PlainWrite) throws(ObsError) -> UInt64 {
        precondition(current == nil && sharedLog == nil, "a plain write runs alone, on one host")
        guard !write.unchanged else { return rev }
        let newRev = rev + 1
        let existing = write.existing
        let createdRev = existing?.record.createdRev ?? newRev, version = (existing?.record.version ?? 0) + 1
        if keepsCommits {
            do {
                try storage.commitKey(name: write.name, value: write.value, rev: newRev, createdRev: createdRev, version: version)
            } catch {
                throw ObsError(.internal, "storage: \(error.message)")
            }
        }
        commitPlain(write, rev: newRev, createdRev: createdRev, version: version)
        return newRev
    }

    /// Applies a revision of the shared log (cluster mode) that puts one value key, with no TTL
    /// and no owner, changed at that revision, to a value it does not hold: as `commit(_:)`
    /// commits a local write, with the log's revision, creation revision and version, when the key
    /// is a record or missing (and no `match()` would see it created). Whether it did; the general
    /// path (`apply`) takes every other case: a key something reads, the same value again (a
    /// revision with no event), a value that may be the same (`mayBeEquivalent`), a snapshot's
    /// key, whose revision is older than the snapshot's.
    func applyPlain(_ key: StoredKey, rev newRev: UInt64) -> Bool {
        guard answersHotRequests, current == nil, newRev > rev, key.rev == newRev, key.owner == nil, key.expiresAt == nil else { return false }
        scratch.removeAll(keepingCapacityUpTo: 1 << 16)
        key.value.encode(into: &scratch)
        var name = key.key
        return name.withUTF8 { name in
            let name = UnsafeRawBufferPointer(name)
            let value = scratch.bytes
            guard let (existing, hash) = plainSlot(name) else { return false }
            let nonASCII = KeyRecord.hasNonASCII(value)
            if let (_, record) = existing, record.value.elementsEqualBytes(value) || Self.mayBeEquivalent(record, nonASCII) {
                return false
            }
            commitPlain(PlainWrite(name: name, value: value, nonASCII: nonASCII, existing: existing, hash: hash, unchanged: false),
                        rev: newRev, createdRev: key.createdRev, version: key.version)
            return true
        }
    }

    /// A plain write's revision, event and record.
    private func commitPlain(_ write: PlainWrite, rev newRev: UInt64, createdRev: UInt64, version: UInt64) {
        let existing = write.existing
        rev = newRev
        watches.beginEvents(rev: newRev)
        watches.appendEvent(.change, key: write.name, created: existing == nil, old: existing.map { .encoded($0.record.value) },
                            new: .encoded(write.value))
        if let (slot, record) = existing {
            let updated = record.replacingValue(write.value, nonASCII: write.nonASCII)
            updated.rev = newRev
            updated.createdRev = createdRev
            updated.version = version
            if updated.address != record.address { keys.replace(at: slot, with: .record(updated), hash: write.hash) }
        } else {
            keys.insert(.record(KeyRecord.make(name: write.name, value: write.value, nonASCII: write.nonASCII, rev: newRev,
                                               createdRev: createdRev, version: version)), hash: write.hash)
            keyCount += 1
        }
        watches.commitEvents()
    }

    /// Where a plain key is: its slot and record, or (missing) nothing, with the name's hash; nil
    /// when the key is a node, or its name is invalid, or it is missing and creating it would
    /// change what a `match()` reads.
    private func plainSlot(_ name: UnsafeRawBufferPointer) -> (existing: (slot: Int, record: KeyRecord)?, hash: Int)? {
        guard KeyName.isValid(name) else { return nil }
        let hash = KeyTable.hash(name)
        guard let slot = keys.find(name, hash: hash) else {
            if matchSources.count > 0, matchSources.anyEntry(matching: name) { return nil }
            return (nil, hash)
        }
        guard case .record(let record) = keys.entry(at: slot) else { return nil }
        return ((slot, record), hash)
    }

    /// The integer a canonical encoding holds, if it is one within `Int64`.
    private static func integer(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
        var index = 0
        let negative = bytes[0] == UInt8(ascii: "-")
        if negative { index = 1 }
        guard index < bytes.count else { return nil }
        var value: Int64 = 0
        while index < bytes.count {
            let byte = bytes[index]
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let (product, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = product.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
            guard !overflow, !overflow2 else { return nil }
            value = sum
            index += 1
        }
        return negative ? -value : value
    }
}
