#if canImport(Glibc)
import Glibc
#endif

/// A value key that nothing reads through the engine (no computed, binding or `match()`), with no
/// TTL and no owner: the state of nearly every key of a large store, kept in one allocation of its
/// own. Its value is kept as its canonical encoding: what `get` answers, what events carry and what
/// a `set` compares, so a plain key is never decoded and its value never encoded again.
///
/// A key something does read is a `KeyNode` of the engine instead (Store+Records.swift: promotion
/// and demotion); the key table (`KeyTable`) holds either.
///
/// Layout, 8-byte aligned:
///
///     0   u64  rev         8: u64 created_rev    16: u64 version
///     24  u32  the value's length
///     28  u16  room after the value (the allocation's slack, so that a value that grows by a few
///              bytes is written in place)
///     30  u8   the name's length less one (names are 1 to 256 bytes)
///     31  u8   1 when the value has a byte of 0x80 or over (UTF-8 beyond ASCII), else 0: a `set`
///              compares bytes only where both values are ASCII (Store+PlainKeys.swift)
///     32  the name, then the value
struct KeyRecord {
    let address: UnsafeMutableRawPointer

    static let headerSize = 32

    var rev: UInt64 {
        get { address.load(as: UInt64.self) }
        nonmutating set { address.storeBytes(of: newValue, as: UInt64.self) }
    }

    var createdRev: UInt64 {
        get { address.load(fromByteOffset: 8, as: UInt64.self) }
        nonmutating set { address.storeBytes(of: newValue, toByteOffset: 8, as: UInt64.self) }
    }

    var version: UInt64 {
        get { address.load(fromByteOffset: 16, as: UInt64.self) }
        nonmutating set { address.storeBytes(of: newValue, toByteOffset: 16, as: UInt64.self) }
    }

    private var valueCount: Int { Int(address.load(fromByteOffset: 24, as: UInt32.self)) }
    private var slack: Int { Int(address.load(fromByteOffset: 28, as: UInt16.self)) }
    private var nameCount: Int { Int(address.load(fromByteOffset: 30, as: UInt8.self)) + 1 }

    /// Whether the value has non-ASCII bytes (`hasNonASCII`), as the record's writer said.
    var valueHasNonASCII: Bool { address.load(fromByteOffset: 31, as: UInt8.self) != 0 }

    var name: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: address + Self.headerSize, count: nameCount) }
    var value: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: address + Self.headerSize + nameCount, count: valueCount) }

    /// A new record (the name 1 to 256 bytes); `nonASCII` is `hasNonASCII(value)`, which a writer
    /// that knows it passes without scanning the value again.
    static func make(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, nonASCII: Bool, rev: UInt64, createdRev: UInt64,
                     version: UInt64) -> KeyRecord {
        let size = allocationSize(name: name.count, value: value.count)
        guard let address = malloc(size) else { fatalError("out of memory for a key of \(size) bytes") }
        let record = KeyRecord(address: address)
        record.rev = rev
        record.createdRev = createdRev
        record.version = version
        address.storeBytes(of: UInt8(name.count - 1), toByteOffset: 30, as: UInt8.self)
        (address + headerSize).copyMemory(from: name.baseAddress!, byteCount: name.count)
        record.setValue(value, nonASCII: nonASCII, room: size - headerSize - name.count)
        return record
    }

    /// The record holding `value` instead: this one when the value fits its allocation, else a new
    /// one (this one is then freed). A value much smaller than the allocation moves too, so that a
    /// key that once held a large value does not keep its memory.
    func replacingValue(_ value: UnsafeRawBufferPointer, nonASCII: Bool) -> KeyRecord {
        let room = valueCount + slack
        if value.count <= room, room - value.count <= max(64, value.count) {
            setValue(value, nonASCII: nonASCII, room: room)
            return self
        }
        let moved = KeyRecord.make(name: name, value: value, nonASCII: nonASCII, rev: rev, createdRev: createdRev, version: version)
        free()
        return moved
    }

    func free() { Glibc.free(address) }

    private func setValue(_ value: UnsafeRawBufferPointer, nonASCII: Bool, room: Int) {
        assert(nonASCII == Self.hasNonASCII(value), "a record's ASCII flag must say what its value holds")
        if let source = value.baseAddress { (address + Self.headerSize + nameCount).copyMemory(from: source, byteCount: value.count) }
        address.storeBytes(of: nonASCII ? 1 : 0, toByteOffset: 31, as: UInt8.self)
        address.storeBytes(of: UInt32(value.count), toByteOffset: 24, as: UInt32.self)
        address.storeBytes(of: UInt16(min(room - value.count, Int(UInt16.max))), toByteOffset: 28, as: UInt16.self)
    }

    /// Whether any byte is 0x80 or over, eight bytes at a time and without a branch per byte.
    static func hasNonASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var seen: UInt64 = 0
        var index = 0
        while index + 8 <= bytes.count {
            seen |= bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            index += 8
        }
        while index < bytes.count {
            seen |= UInt64(bytes[index])
            index += 1
        }
        return seen & 0x8080_8080_8080_8080 != 0
    }

    /// What to ask malloc for: the header, name and value, rounded up to what glibc hands out
    /// anyway (chunks of 16 bytes less its 8-byte header), so the rounding is room for the value.
    private static func allocationSize(name: Int, value: Int) -> Int {
        let needed = headerSize + name + value
        return (needed + 8 + 15) / 16 * 16 - 8
    }
}
