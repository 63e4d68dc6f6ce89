#if canImport(Glibc)
import Glibc
#endif

/// One key event of a committed transaction as the watch unit keeps it: encoded once, as the body
/// that every watch is sent (everything after `{"event":"change","watch":N`), with its kind and key
/// in front and where its values are within the body (for the watches that merge held events).
/// The events of one transaction are records back to back in a byte buffer, and the history keeps
/// that run as it is.
///
/// A record, at an 8-byte-aligned offset:
///
///     0   u32  the record's length, padded to 8
///     4   u8   kind (0 change, 1 delete, 2 error), 5: u8 created, 6: u16 the key's length
///     8   u32  the body's length
///     12  u32  where `old`'s value starts in the body (0: no `old`), 16: u32 its length
///     20  u32  where `new`'s value starts in the body (0: no `new`), 24: u32 its length
///     28  u32  the length of the delete's reason, which follows the body
///     32  the key, the body, the reason
struct EventRecord {
    let base: UnsafeRawPointer

    static let headerSize = 32

    var length: Int { Int(base.loadUnaligned(as: UInt32.self)) }
    var kind: KeyEvent.Kind { KeyEvent.Kind(code: base.load(fromByteOffset: 4, as: UInt8.self)) }
    var created: Bool { base.load(fromByteOffset: 5, as: UInt8.self) != 0 }
    private var keyLength: Int { Int(base.loadUnaligned(fromByteOffset: 6, as: UInt16.self)) }
    private var bodyLength: Int { Int(base.loadUnaligned(fromByteOffset: 8, as: UInt32.self)) }

    var key: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base + Self.headerSize, count: keyLength) }
    var body: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base + Self.headerSize + keyLength, count: bodyLength) }

    /// The encoded value at header offset `at` (start, then length), nil when absent.
    private func value(at offset: Int) -> UnsafeRawBufferPointer? {
        let start = Int(base.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
        guard start > 0 else { return nil }
        let count = Int(base.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
        return UnsafeRawBufferPointer(rebasing: body[start..<start + count])
    }

    var old: UnsafeRawBufferPointer? { value(at: 12) }
    var new: UnsafeRawBufferPointer? { value(at: 20) }

    var reason: UnsafeRawBufferPointer? {
        let count = Int(base.loadUnaligned(fromByteOffset: 28, as: UInt32.self))
        guard count > 0 else { return nil }
        return UnsafeRawBufferPointer(start: base + Self.headerSize + keyLength + bodyLength, count: count)
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
    /// Appends one `EventRecord`: the event of `kind` for `key` at revision `rev`, its body encoded
    /// as docs/protocol.md shows it (a change: `key`, `old` when there was one, `new`, `rev`,
    /// `created`; a delete: `key`, `old`, `rev`, `reason` when not a client's; an error: `key`,
    /// `error`, `rev`).
    mutating func appendEvent(_ kind: KeyEvent.Kind, key: UnsafeRawBufferPointer, rev: UInt64, created: Bool,
                              old: EventValue? = nil, new: EventValue? = nil, error: ObsError? = nil, reason: String? = nil) {
        var field = ByteBuffer()
        field.appendRevisionField(rev)
        appendEvent(kind, key: key, revField: field.bytes, created: created, old: old, new: new, error: error, reason: reason)
    }

    /// `appendEvent` with the revision given as its encoded field (`,"rev":N`), which every event
    /// of a transaction shares: encoded once per transaction, not once per event.
    mutating func appendEvent(_ kind: KeyEvent.Kind, key: UnsafeRawBufferPointer, revField: UnsafeRawBufferPointer, created: Bool,
                              old: EventValue? = nil, new: EventValue? = nil, error: ObsError? = nil, reason: String? = nil) {
        let start = count
        reserve(EventRecord.headerSize)
        (end).initializeMemory(as: UInt8.self, repeating: 0, count: EventRecord.headerSize)
        didAppend(EventRecord.headerSize)
        append(key)
        let bodyStart = count
        append(#","key":"#)
        JSONValue.appendString(key, to: &self)
        var oldRange = (0, 0), newRange = (0, 0)
        switch kind {
        case .change:
            if let old {
                append(#","old":"#)
                oldRange = appendValue(old, bodyStart: bodyStart)
            }
            append(#","new":"#)
            newRange = appendValue(new ?? .value(.null), bodyStart: bodyStart)
            append(revField)
            append(created ? #","created":true}"# : #","created":false}"#)
        case .delete:
            append(#","old":"#)
            oldRange = appendValue(old ?? .value(.null), bodyStart: bodyStart)
            append(revField)
            if let reason {
                append(#","reason":"#)
                JSONValue.appendString(reason, to: &self)
            }
            append(UInt8(ascii: "}"))
        case .error:
            var writer = ObjectWriter(continuing: true)
            writer.field("error", error: error ?? ObsError(.evalError, "unknown error"))
            append(writer.bytes)
            append(revField)
            append(UInt8(ascii: "}"))
        }
        append(UInt8(ascii: "\n"))
        let bodyLength = count - bodyStart
        var reasonLength = 0
        if kind == .delete, var reason {
            reason.withUTF8 { append(UnsafeRawBufferPointer($0)) }
            reasonLength = reason.utf8.count
        }
        while count % 8 != 0 { append(UInt8(0)) }
        let header = base! + start
        header.storeBytes(of: UInt32(count - start), as: UInt32.self)
        header.storeBytes(of: kind.code, toByteOffset: 4, as: UInt8.self)
        header.storeBytes(of: created ? 1 : 0, toByteOffset: 5, as: UInt8.self)
        header.storeBytes(of: UInt16(key.count), toByteOffset: 6, as: UInt16.self)
        header.storeBytes(of: UInt32(bodyLength), toByteOffset: 8, as: UInt32.self)
        header.storeBytes(of: UInt32(oldRange.0), toByteOffset: 12, as: UInt32.self)
        header.storeBytes(of: UInt32(oldRange.1), toByteOffset: 16, as: UInt32.self)
        header.storeBytes(of: UInt32(newRange.0), toByteOffset: 20, as: UInt32.self)
        header.storeBytes(of: UInt32(newRange.1), toByteOffset: 24, as: UInt32.self)
        header.storeBytes(of: UInt32(reasonLength), toByteOffset: 28, as: UInt32.self)
    }

    /// Appends `,"rev":N`, the field every event of the transaction at `rev` shares.
    mutating func appendRevisionField(_ rev: UInt64) {
        append(#","rev":"#)
        JSONValue.appendDigits(rev, to: &self)
    }

    /// Appends a value; where it is in the body and its length.
    private mutating func appendValue(_ value: EventValue, bodyStart: Int) -> (Int, Int) {
        let start = count
        switch value {
        case .encoded(let bytes): append(bytes)
        case .value(let value): value.encode(into: &self)
        }
        return (start - bodyStart, count - start)
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
                  new: decode(record.new), rev: rev, created: record.created,
                  reason: record.reason.map { String(decoding: $0, as: UTF8.self) })
        if kind == .error { encodedBody = Array(record.body) }
    }
}
