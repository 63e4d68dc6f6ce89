// Cuts a stream of JSON objects into whole objects. The gateway streams a watch as one object per
// message, usually each on its own line, but not always (an error that ends a stream may follow
// another object on the same line, padded with spaces): so objects are found by their braces,
// outside strings, not by newlines. Framing only: the objects are parsed by whoever takes them.

struct JSONObjectFramer {
    enum FramingError: Error, Equatable {
        /// One object is longer than the bound.
        case tooLarge
        /// Something other than whitespace between objects.
        case notAnObject(UInt8)
    }

    /// The longest object accepted, in bytes.
    let maxBytes: Int
    private var buffer: [UInt8] = []
    private var depth = 0
    private var inString = false
    private var escaped = false

    init(maxBytes: Int) { self.maxBytes = maxBytes }

    /// Bytes held of an object not yet complete.
    var pendingBytes: Int { buffer.count }

    /// Adds `bytes` and returns every object they complete, in order.
    mutating func append(_ bytes: UnsafeRawBufferPointer) throws(FramingError) -> [[UInt8]] {
        var objects: [[UInt8]] = []
        var start = 0
        for (index, byte) in bytes.enumerated() {
            if depth == 0 {
                switch byte {
                case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                    start = index + 1
                    continue
                case UInt8(ascii: "{"):
                    start = index
                default:
                    throw .notAnObject(byte)
                }
            }
            if inString {
                if escaped {
                    escaped = false
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                }
            } else if byte == UInt8(ascii: "\"") {
                inString = true
            } else if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") {
                depth += 1
            } else if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") {
                depth -= 1
                if depth == 0 {
                    guard buffer.count + index + 1 - start <= maxBytes else { throw .tooLarge }
                    buffer.append(contentsOf: bytes[start...index])
                    objects.append(buffer)
                    buffer.removeAll(keepingCapacity: true)
                    start = index + 1
                }
            }
        }
        if depth > 0 {
            guard buffer.count + bytes.count - start <= maxBytes else { throw .tooLarge }
            buffer.append(contentsOf: bytes[start...])
        }
        return objects
    }
}
