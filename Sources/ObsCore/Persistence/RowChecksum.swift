// A 64-bit checksum of one database row, stored in the row and verified when it is loaded, so that
// a row changed outside obsd (a flipped bit on the disk, a hand edit) is reported with its key
// instead of served. SQLite's own integrity check covers the file's structure, not what the rows say.
//
// Each field is mixed in with its type and length, 8 bytes at a time: the state is XORed with the
// word, multiplied by an odd constant and xorshifted. Each of those steps is a bijection of the
// state, so any change confined to one word of the input always changes the result; other damage
// goes unnoticed with a probability of about 2^-64.
struct RowChecksum {
    private var state: UInt64 = 0x243F_6A88_85A3_08D3

    private mutating func mix(_ word: UInt64) {
        state = (state ^ word) &* 0x9E37_79B9_7F4A_7C15
        state ^= state >> 29
    }

    mutating func add(_ text: String) {
        var text = text
        text.withUTF8 { add(bytes: UnsafeRawBufferPointer($0), tag: 1) }
    }

    mutating func add(_ text: String?) {
        if let text { add(text) } else { mix(2) }
    }

    mutating func add(_ value: UInt64) {
        mix(3)
        mix(value)
    }

    mutating func add(_ value: Double?) {
        mix(4)
        mix(value?.bitPattern ?? 0x7FF8_DEAD_0000_0000)
    }

    mutating func add(_ value: Bool) {
        mix(value ? 5 : 6)
    }

    mutating func add(bytes: UnsafeRawBufferPointer, tag: UInt64) {
        mix(tag)
        mix(UInt64(bytes.count))
        var offset = 0
        while offset + 8 <= bytes.count {
            mix(UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
            offset += 8
        }
        var tail: UInt64 = 0
        for index in offset..<bytes.count { tail |= UInt64(bytes[index]) << (8 * UInt64(index - offset)) }
        mix(tail)
    }

    /// The checksum as SQLite stores it (an INTEGER column is a signed 64-bit number).
    var value: Int64 { Int64(bitPattern: state) }
}

extension RowChecksum {
    /// A `keys` row, with its value as the JSON text stored.
    static func keyRow(_ key: String, json: String, rev: UInt64, createdRev: UInt64, version: UInt64,
                       expiresAt: Double?) -> Int64 {
        var sum = RowChecksum()
        sum.add(key)
        sum.add(json)
        sum.add(rev)
        sum.add(createdRev)
        sum.add(version)
        sum.add(expiresAt)
        return sum.value
    }

    /// A `definitions` row.
    static func definitionRow(_ definition: StoredDefinition) -> Int64 {
        var sum = RowChecksum()
        sum.add(definition.key)
        sum.add(definition.expr)
        sum.add(definition.createdRev)
        return sum.value
    }

    /// A `bindings` row.
    static func bindingRow(_ binding: StoredBinding) -> Int64 {
        var sum = RowChecksum()
        sum.add(binding.to)
        sum.add(binding.from)
        sum.add(binding.map)
        sum.add(binding.twoWay)
        sum.add(binding.unmap)
        return sum.value
    }

    /// A `log` row: its revision and its records.
    static func logRow(_ rev: UInt64, _ data: UnsafeRawBufferPointer) -> Int64 {
        var sum = RowChecksum()
        sum.add(rev)
        sum.add(bytes: data, tag: 7)
        return sum.value
    }

    /// The row in `meta` naming the run that left the state at a clean stop (`StateStorage.beginRun`).
    static func runRow(_ run: UInt64) -> Int64 {
        var sum = RowChecksum()
        sum.add("run")
        sum.add(run)
        return sum.value
    }

    /// The revision counter's row in `meta`.
    static func revisionRow(_ rev: UInt64) -> Int64 {
        var sum = RowChecksum()
        sum.add("rev")
        sum.add(rev)
        return sum.value
    }
}
