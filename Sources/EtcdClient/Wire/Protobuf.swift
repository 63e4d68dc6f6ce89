// Protocol Buffers' wire format, as much of it as etcd's messages use: varints (integers,
// booleans, enums), length-delimited fields (bytes, strings, embedded messages), and fields of
// other wire types skipped when read. proto3 leaves a field at its default out, so a writer
// writes only what differs from it and a reader takes what is missing as the default.
// See https://protobuf.dev/programming-guides/encoding/.

/// Builds one message, field by field, in field order.
struct ProtoWriter {
    private(set) var bytes: [UInt8] = []

    init(reservingCapacity capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private mutating func tag(_ field: Int, _ wireType: UInt64) { varint(UInt64(field) << 3 | wireType) }

    /// An int64 or uint64 field (a negative int64 takes ten bytes, as protobuf writes it).
    mutating func int64(_ field: Int, _ value: Int64) {
        guard value != 0 else { return }
        tag(field, 0)
        varint(UInt64(bitPattern: value))
    }

    mutating func bool(_ field: Int, _ value: Bool) {
        guard value else { return }
        tag(field, 0)
        varint(1)
    }

    mutating func bytes(_ field: Int, _ value: [UInt8]) {
        guard !value.isEmpty else { return }
        tag(field, 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// A bytes field written even when empty: a oneof member (an empty compared value), or a key.
    mutating func bytesAlways(_ field: Int, _ value: [UInt8]) {
        tag(field, 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    mutating func string(_ field: Int, _ value: String) { bytes(field, Array(value.utf8)) }

    /// An embedded message, written even when empty (a oneof member is present though empty).
    mutating func message(_ field: Int, _ build: (inout ProtoWriter) -> Void) {
        var inner = ProtoWriter()
        build(&inner)
        bytesAlways(field, inner.bytes)
    }
}

/// Reads one message's fields in order. Every read is bounded by the message; a field that runs
/// past it, or a varint longer than ten bytes, is a `malformedResponse`.
struct ProtoReader {
    enum Value {
        case varint(UInt64)
        case bytes(ArraySlice<UInt8>)
        /// A fixed 32- or 64-bit field: etcd's messages have none, so it is skipped.
        case fixed
    }

    private let buffer: ArraySlice<UInt8>
    private var index: Int

    init(_ buffer: ArraySlice<UInt8>) {
        self.buffer = buffer
        index = buffer.startIndex
    }

    init(_ buffer: [UInt8]) { self.init(buffer[...]) }

    /// The next field's number and value; nil at the end of the message.
    mutating func next() throws(EtcdError) -> (field: Int, value: Value)? {
        guard index < buffer.endIndex else { return nil }
        let key = try varint()
        let field = Int(truncatingIfNeeded: key >> 3)
        guard field > 0 else { throw .malformedResponse("a protobuf field numbered 0") }
        switch key & 7 {
        case 0:
            return (field, .varint(try varint()))
        case 1:
            try skip(8)
            return (field, .fixed)
        case 2:
            let length = try varint()
            guard length <= UInt64(buffer.endIndex - index) else {
                throw .malformedResponse("a protobuf field longer than its message")
            }
            let start = index
            index += Int(length)
            return (field, .bytes(buffer[start..<index]))
        case 5:
            try skip(4)
            return (field, .fixed)
        default:
            throw .malformedResponse("a protobuf field of wire type \(key & 7)")
        }
    }

    private mutating func varint() throws(EtcdError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while index < buffer.endIndex {
            let byte = buffer[index]
            index += 1
            result |= UInt64(byte & 0x7f) << shift
            if byte < 0x80 { return result }
            shift += 7
            guard shift < 70 else { break }
        }
        throw .malformedResponse("a protobuf varint cut short or too long")
    }

    private mutating func skip(_ count: Int) throws(EtcdError) {
        guard buffer.endIndex - index >= count else { throw .malformedResponse("a protobuf field cut short") }
        index += count
    }
}

extension ProtoReader.Value {
    func int64(_ name: String) throws(EtcdError) -> Int64 {
        guard case .varint(let value) = self else { throw .malformedResponse("\(name) is not an integer") }
        return Int64(bitPattern: value)
    }

    /// A revision, version or count, which etcd never sends negative (obsd takes them as
    /// unsigned): a negative one is a malformed response.
    func nonNegative(_ name: String) throws(EtcdError) -> Int64 {
        let value = try int64(name)
        guard value >= 0 else { throw .malformedResponse("\(name) is negative (\(value))") }
        return value
    }

    func uint64(_ name: String) throws(EtcdError) -> UInt64 {
        guard case .varint(let value) = self else { throw .malformedResponse("\(name) is not an integer") }
        return value
    }

    func bool(_ name: String) throws(EtcdError) -> Bool {
        guard case .varint(let value) = self else { throw .malformedResponse("\(name) is not a boolean") }
        return value != 0
    }

    func bytes(_ name: String) throws(EtcdError) -> ArraySlice<UInt8> {
        guard case .bytes(let value) = self else { throw .malformedResponse("\(name) is not bytes") }
        return value
    }

    func string(_ name: String) throws(EtcdError) -> String {
        String(decoding: try bytes(name), as: UTF8.self)
    }
}
