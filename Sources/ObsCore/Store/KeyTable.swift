#if canImport(Glibc)
import Glibc
#endif

/// The store's keys by name: for each, its `KeyRecord` (a plain value key) or its `KeyNode` (a key
/// of the engine: a computed, a key something reads, a missing key something reads, a key with a
/// TTL or an owner).
///
/// Open addressing with linear probing, in one array of 8-byte slots: a slot holds the address of
/// a record, or of a node with bit 0 set, and in its top 16 bits a tag from the name's hash, so
/// that a probe reads another key's memory only when the tags agree. No slot is a tombstone: a
/// removal moves the slots after it back (and so costs a hash per moved slot). The table doubles
/// past 7/8 full. 8 bytes a key at most load, 16 just after growing (a `[String: KeyNode]` takes 24
/// a bucket, with twice as many buckets).
///
/// Names are hashed with the standard library's `Hasher` over their bytes: seeded per process, so
/// that clients cannot pick names that collide.
struct KeyTable: ~Copyable {
    /// A key as the table holds it.
    enum Entry {
        case record(KeyRecord)
        case node(KeyNode)
    }

    private var slots: UnsafeMutablePointer<UInt64>
    private var mask: Int
    private(set) var count = 0

    init() {
        mask = 15
        slots = .allocate(capacity: mask + 1)
        slots.initialize(repeating: 0, count: mask + 1)
    }

    deinit {
        for index in 0...mask where slots[index] != 0 {
            switch Self.entry(slots[index]) {
            case .record(let record): record.free()
            case .node(let node): Unmanaged.passUnretained(node).release()
            }
        }
        slots.deallocate()
    }

    static func hash(_ name: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: name)
        return hasher.finalize()
    }

    static func hash(_ name: String) -> Int {
        var name = name
        return name.withUTF8 { hash(UnsafeRawBufferPointer($0)) }
    }

    /// Where `name` is (its slot), or nil.
    func find(_ name: UnsafeRawBufferPointer, hash: Int) -> Int? {
        let tag = UInt64(truncatingIfNeeded: hash) >> 48
        var index = hash & mask
        while true {
            let slot = slots[index]
            if slot == 0 { return nil }
            if slot >> 48 == tag, Self.hasName(slot, name) { return index }
            index = (index + 1) & mask
        }
    }

    func entry(at slot: Int) -> Entry { Self.entry(slots[slot]) }

    /// Puts `entry` in place of the entry at `slot` (same name). A node put in is retained, a node
    /// taken out released; a record taken out is the caller's.
    mutating func replace(at slot: Int, with entry: Entry, hash: Int) {
        release(slots[slot])
        slots[slot] = Self.slot(entry, hash: hash)
    }

    /// Adds `entry`, whose name is not in the table; its slot.
    @discardableResult
    mutating func insert(_ entry: Entry, hash: Int) -> Int {
        if (count + 1) * 8 > (mask + 1) * 7 { grow() }
        var index = hash & mask
        while slots[index] != 0 { index = (index + 1) & mask }
        slots[index] = Self.slot(entry, hash: hash)
        count += 1
        return index
    }

    /// Removes the entry at `slot`: a node is released, a record is the caller's.
    mutating func remove(at slot: Int) {
        release(slots[slot])
        slots[slot] = 0
        count -= 1
        // Backward shift: each following slot that could not be in its home slot because of this
        // one moves up, so that no probe stops early at the hole.
        var hole = slot
        var index = (slot + 1) & mask
        while slots[index] != 0 {
            let home = Self.hashOfName(slots[index]) & mask
            // Whether `home` lies cyclically in (hole, index]: then the entry stays.
            let stays = hole <= index ? (home > hole && home <= index) : (home > hole || home <= index)
            if !stays {
                slots[hole] = slots[index]
                slots[index] = 0
                hole = index
            }
            index = (index + 1) & mask
        }
    }

    /// Calls `body` with every entry, in no particular order.
    func forEach(_ body: (Entry) -> Void) {
        for index in 0...mask where slots[index] != 0 { body(Self.entry(slots[index])) }
    }

    // MARK: Slots

    private static func slot(_ entry: Entry, hash: Int) -> UInt64 {
        let address: UInt64
        switch entry {
        case .record(let record): address = UInt64(UInt(bitPattern: record.address))
        case .node(let node): address = UInt64(UInt(bitPattern: Unmanaged.passRetained(node).toOpaque())) | 1
        }
        precondition(address >> 48 == 0, "an address beyond 48 bits")
        return address | (UInt64(truncatingIfNeeded: hash) >> 48) << 48
    }

    private static func address(_ slot: UInt64) -> UnsafeMutableRawPointer {
        UnsafeMutableRawPointer(bitPattern: UInt(slot & 0xFFFF_FFFF_FFFE))!
    }

    private static func entry(_ slot: UInt64) -> Entry {
        if slot & 1 == 0 { return .record(KeyRecord(address: address(slot))) }
        return .node(Unmanaged<KeyNode>.fromOpaque(address(slot)).takeUnretainedValue())
    }

    private static func hasName(_ slot: UInt64, _ name: UnsafeRawBufferPointer) -> Bool {
        if slot & 1 == 0 { return KeyRecord(address: address(slot)).name.elementsEqualBytes(name) }
        return Unmanaged<KeyNode>.fromOpaque(address(slot))._withUnsafeGuaranteedRef { node in
            node.name.utf8.withContiguousStorageIfAvailable { UnsafeRawBufferPointer($0).elementsEqualBytes(name) }
                ?? node.name.utf8.elementsEqual(name)
        }
    }

    private static func hashOfName(_ slot: UInt64) -> Int {
        if slot & 1 == 0 { return hash(KeyRecord(address: address(slot)).name) }
        return Unmanaged<KeyNode>.fromOpaque(address(slot))._withUnsafeGuaranteedRef { hash($0.name) }
    }

    private func release(_ slot: UInt64) {
        if slot & 1 == 1 { Unmanaged<KeyNode>.fromOpaque(Self.address(slot)).release() }
    }

    private mutating func grow() {
        let old = slots
        let oldMask = mask
        mask = (mask + 1) * 2 - 1
        slots = .allocate(capacity: mask + 1)
        slots.initialize(repeating: 0, count: mask + 1)
        for index in 0...oldMask where old[index] != 0 {
            var target = Self.hashOfName(old[index]) & mask
            while slots[target] != 0 { target = (target + 1) & mask }
            slots[target] = old[index]
        }
        old.deallocate()
    }
}

extension UnsafeRawBufferPointer {
    /// Whether the two runs of bytes are equal.
    @inline(__always)
    func elementsEqualBytes(_ other: UnsafeRawBufferPointer) -> Bool {
        count == other.count && (count == 0 || memcmp(baseAddress!, other.baseAddress!, count) == 0)
    }
}
