#if canImport(Glibc)
import Glibc
#endif

/// One key event of a committed transaction as the watch unit keeps it: its kind, key and values,
/// the values already encoded as JSON, but not the line's body (everything after
/// `{"event":"change","watch":N`): that is written only for an event some watch gets, once per
/// transaction for all its watches (`WatchHub.body(of:)`), or when `since` replays it. In a
/// transaction of many events that few watches match, such as a 50-deep chain of computeds
/// watched at its end, most events never need one. The events of one transaction are records back
/// to back in a byte buffer, and the history keeps that run as it is.
///
/// A record, at an 8-byte-aligned offset:
///
///     0   u32  the record's length, padded to 8
///     4   u8   kind (0 change, 1 delete, 2 error), 5: u8 created, 6: u16 the key's length
///     8   u32  `old`'s length (0xFFFF_FFFF: no `old`), 12: u32 `new`'s length (an error: its field)
///     16  u32  the length of the delete's reason
///     20  u32  the body's length, 24: u64 its offset in the transaction's bodies, plus one (0: not
///              written yet; only in the open transaction: the bodies of a transaction that
///              deletes a large store can pass 4 GiB, one body cannot)
///     32  the key, `old`, `new` (an error: `,"error":{...}`), the reason
struct EventRecord {
    let base: UnsafeRawPointer

    static let headerSize = 32
    private static let absent = UInt32.max

    var length: Int { Int(base.loadUnaligned(as: UInt32.self)) }
    var kind: KeyEvent.Kind { KeyEvent.Kind(code: base.load(fromByteOffset: 4, as: UInt8.self)) }
    var created: Bool { base.load(fromByteOffset: 5, as: UInt8.self) != 0 }
    private var keyLength: Int { Int(base.loadUnaligned(fromByteOffset: 6, as: UInt16.self)) }
    private var oldLength: UInt32 { base.loadUnaligned(fromByteOffset: 8, as: UInt32.self) }
    private var newLength: Int { Int(base.loadUnaligned(fromByteOffset: 12, as: UInt32.self)) }
    private var reasonLength: Int { Int(base.loadUnaligned(fromByteOffset: 16, as: UInt32.self)) }

    var key: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base + Self.headerSize, count: keyLength) }

    /// `old`'s encoded value, nil when the event has none.
    var old: UnsafeRawBufferPointer? {
        let length = oldLength
        guard length != Self.absent else { return nil }
        return UnsafeRawBufferPointer(start: base + Self.headerSize + keyLength, count: Int(length))
    }

    private var oldBytes: Int { oldLength == Self.absent ? 0 : Int(oldLength) }

    /// `new`'s encoded value (a change), or the error's encoded field (`,"error":{...}`).
    var new: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + Self.headerSize + keyLength + oldBytes, count: newLength)
    }

    var reason: UnsafeRawBufferPointer? {
        let count = reasonLength
        guard count > 0 else { return nil }
        return UnsafeRawBufferPointer(start: base + Self.headerSize + keyLength + oldBytes + newLength, count: count)
    }

    /// Where this record's body is among the open transaction's bodies: (offset, length), nil
    /// while not written.
    var writtenBody: (offset: Int, length: Int)? {
        let offset = base.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
        guard offset > 0 else { return nil }
        return (Int(offset) - 1, Int(base.loadUnaligned(fromByteOffset: 20, as: UInt32.self)))
    }

    /// Notes where this record's body was written (a record of the open transaction only).
    func noteBody(offset: Int, length: Int) {
        let header = UnsafeMutableRawPointer(mutating: base)
        header.storeBytes(of: UInt32(length), toByteOffset: 20, as: UInt32.self)
        header.storeBytes(of: UInt64(offset + 1), toByteOffset: 24, as: UInt64.self)
    }

    /// The body as a line carries it, for the transaction at `rev` (tests, and the paths that
    /// need it as an array).
    func body(rev: UInt64) -> [UInt8] {
        var field = ByteBuffer()
        field.appendRevisionField(rev)
        var body = ByteBuffer()
        body.appendEventBody(self, revField: field.bytes)
        return Array(body.bytes)
    }

    /// The key's first 8 bytes as a big-endian number (zeros after a shorter key): a key whose
    /// prefix is smaller sorts first; equal prefixes need `keyPrecedes`.
    var keyPrefix: UInt64 {
        let key = key
        var prefix: UInt64 = 0
        for index in 0..<min(8, key.count) { prefix |= UInt64(key[index]) << (56 - 8 * index) }
        return prefix
    }

    /// Whether this record's key sorts before `other`'s (by UTF-8 bytes, as names are sorted).
    func keyPrecedes(_ other: EventRecord) -> Bool {
        let a = key, b = other.key
        let common = min(a.count, b.count)
        let order = memcmp(a.baseAddress!, b.baseAddress!, common)
        return order != 0 ? order < 0 : a.count < b.count
    }
}

/// The records of one transaction, in the order they were written.
struct EventRecords: Sequence {
    let bytes: UnsafeRawBufferPointer

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    struct Iterator: IteratorProtocol {
        let bytes: UnsafeRawBufferPointer
        var offset = 0

        mutating func next() -> EventRecord? {
            guard offset < bytes.count else { return nil }
            let record = EventRecord(base: bytes.baseAddress! + offset)
            offset += record.length
            return record
        }
    }

    func makeIterator() -> Iterator { Iterator(bytes: bytes) }
}

/// A value an event carries: already encoded (a value key keeps its value so), or to be encoded.
enum EventValue {
    case encoded(UnsafeRawBufferPointer)
    case value(JSONValue)
}

extension ByteBuffer {
    /// Appends one `EventRecord`: the event of `kind` for `key` (a change: `old` when there was
    /// one, `new`; a delete: `old`, and `reason` when not a client's; an error: `error`).
    mutating func appendEvent(_ kind: KeyEvent.Kind, key: UnsafeRawBufferPointer, created: Bool,
                              old: EventValue? = nil, new: EventValue? = nil, error: ObsError? = nil, reason: String? = nil) {
        let start = beginEventRecord(key: key)
        var oldLength = UInt32.max
        var newLength = 0
        switch kind {
        case .change:
            if let old { oldLength = UInt32(appendValue(old)) }
            newLength = appendValue(new ?? .value(.null))
        case .delete:
            oldLength = UInt32(appendValue(old ?? .value(.null)))
        case .error:
            var writer = ObjectWriter(continuing: true)
            writer.field("error", error: error ?? ObsError(.evalError, "unknown error"))
            newLength = writer.bytes.count
            append(writer.bytes)
        }
        var reasonLength = 0
        if kind == .delete, var reason {
            reason.withUTF8 { append(UnsafeRawBufferPointer($0)) }
            reasonLength = reason.utf8.count
        }
        endEventRecord(start: start, kind, created: created, keyLength: key.count, oldLength: oldLength, newLength: newLength,
                       reasonLength: reasonLength)
    }

    /// Starts an `EventRecord`: its header (zeros, filled by `endEventRecord`) and its key; where
    /// it starts. Its values follow, appended by the caller.
    @inline(__always)
    mutating func beginEventRecord(key: UnsafeRawBufferPointer) -> Int {
        let start = count
        reserve(EventRecord.headerSize + key.count)
        end.initializeMemory(as: UInt8.self, repeating: 0, count: EventRecord.headerSize)
        didAppend(EventRecord.headerSize)
        append(key)
        return start
    }

    /// Ends the record begun at `start`: pads it to 8 bytes and fills its header.
    @inline(__always)
    mutating func endEventRecord(start: Int, _ kind: KeyEvent.Kind, created: Bool, keyLength: Int, oldLength: UInt32,
                                 newLength: Int, reasonLength: Int) {
        let padding = (8 - count % 8) % 8
        reserve(padding)
        end.initializeMemory(as: UInt8.self, repeating: 0, count: padding)
        didAppend(padding)
        let header = base! + start
        header.storeBytes(of: UInt32(count - start), as: UInt32.self)
        header.storeBytes(of: kind.code, toByteOffset: 4, as: UInt8.self)
        header.storeBytes(of: created ? 1 : 0, toByteOffset: 5, as: UInt8.self)
        header.storeBytes(of: UInt16(keyLength), toByteOffset: 6, as: UInt16.self)
        header.storeBytes(of: oldLength, toByteOffset: 8, as: UInt32.self)
        header.storeBytes(of: UInt32(newLength), toByteOffset: 12, as: UInt32.self)
        header.storeBytes(of: UInt32(reasonLength), toByteOffset: 16, as: UInt32.self)
    }

    /// Appends the body of `record`'s event as docs/protocol.md shows it (a change: `key`, `old`
    /// when there was one, `new`, `rev`, `created`; a delete: `key`, `old`, `rev`, `reason` when not
    /// a client's; an error: `key`, `error`, `rev`), `revField` being its transaction's
    /// `,"rev":N`, and the line's newline.
    mutating func appendEventBody(_ record: EventRecord, revField: UnsafeRawBufferPointer) {
        append(#","key":"#)
        JSONValue.appendString(record.key, to: &self)
        switch record.kind {
        case .change:
            // The usual event, written after one reservation.
            let old = record.old, new = record.new
            let created: StaticString = record.created ? ",\"created\":true}\n" : ",\"created\":false}\n"
            reserve((old.map { $0.count + 7 } ?? 0) + 7 + new.count + revField.count + created.utf8CodeUnitCount)
            var cursor = end
            func put(_ bytes: UnsafeRawBufferPointer) {
                cursor.copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
                cursor += bytes.count
            }
            func put(_ text: StaticString) { put(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)) }
            if let old {
                put(#","old":"#)
                put(old)
            }
            put(#","new":"#)
            put(new)
            put(revField)
            put(created)
            didAppend(cursor - end)
            return
        case .delete:
            append(#","old":"#)
            if let old = record.old { append(old) }
            append(revField)
            if let reason = record.reason {
                append(#","reason":"#)
                JSONValue.appendString(reason, to: &self)
            }
            append(UInt8(ascii: "}"))
        case .error:
            append(record.new)
            append(revField)
            append(UInt8(ascii: "}"))
        }
        append(UInt8(ascii: "\n"))
    }

    /// Appends `,"rev":N`, the field every event of the transaction at `rev` shares.
    mutating func appendRevisionField(_ rev: UInt64) {
        append(#","rev":"#)
        JSONValue.appendDigits(rev, to: &self)
    }

    /// Appends a value; its encoded length.
    private mutating func appendValue(_ value: EventValue) -> Int {
        let start = count
        switch value {
        case .encoded(let bytes): append(bytes)
        case .value(let value): value.encode(into: &self)
        }
        return count - start
    }
}

extension KeyEvent.Kind {
    var code: UInt8 {
        switch self {
        case .change: 0
        case .delete: 1
        case .error: 2
        }
    }

    init(code: UInt8) {
        switch code {
        case 0: self = .change
        case 1: self = .delete
        default: self = .error
        }
    }
}

extension KeyEvent {
    /// The event a record holds, for the watches that keep events back and merge them (their
    /// values decoded again; an error keeps its encoded body).
    init(_ record: EventRecord, rev: UInt64) {
        func decode(_ bytes: UnsafeRawBufferPointer?) -> JSONValue? { bytes.flatMap { try? JSONValue.parse($0) } }
        self.init(kind: record.kind, key: String(decoding: record.key, as: UTF8.self), old: decode(record.old),
                  new: record.kind == .change ? decode(record.new) : nil, rev: rev, created: record.created,
                  reason: record.reason.map { String(decoding: $0, as: UTF8.self) })
        if kind == .error { encodedBody = record.body(rev: rev) }
    }
}
