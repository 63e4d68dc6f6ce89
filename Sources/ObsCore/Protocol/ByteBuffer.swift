#if canImport(Glibc)
import Glibc
#endif

/// A growable run of bytes in memory of its own, for the paths that copy every line they carry:
/// a connection's output, the lines a session holds back, the encoder's scratch space. Appending is
/// a `memcpy` into capacity that is kept, so once it has grown no line costs an allocation (an
/// `[UInt8]` appended to through its generic collection code cost several times as much per line).
public struct ByteBuffer: ~Copyable {
    public private(set) var base: UnsafeMutableRawPointer?
    public private(set) var count = 0
    public private(set) var capacity = 0

    public init() {}

    deinit { free(base) }

    /// The bytes, valid until the buffer next changes.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// The bytes from `offset` on.
    public func bytes(from offset: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base.map { $0 + offset }, count: count - offset)
    }

    @inline(__always)
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, bytes.count > 0 else { return }
        if count + bytes.count > capacity { grow(to: count + bytes.count) }
        (base! + count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }

    @inline(__always)
    public mutating func append(_ byte: UInt8) {
        if count == capacity { grow(to: count + 1) }
        base!.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
        count += 1
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Room for `more` bytes after the current end, to be written through `end` and then counted
    /// with `didAppend`.
    public mutating func reserve(_ more: Int) {
        if count + more > capacity { grow(to: count + more) }
    }

    /// Where the next appended byte goes (after `reserve`).
    public var end: UnsafeMutableRawPointer { base! + count }

    public mutating func didAppend(_ bytes: Int) {
        count += bytes
    }

    /// Drops the last bytes from `count` on (a line taken back).
    public mutating func truncate(to count: Int) {
        self.count = count
    }

    /// Drops the first `bytes` bytes, moving the rest to the front.
    public mutating func removeFirst(_ bytes: Int) {
        guard bytes > 0 else { return }
        if bytes < count { base!.copyMemory(from: base! + bytes, byteCount: count - bytes) }
        count -= bytes
    }

    /// Empties the buffer; its memory is kept when it is at most `keeping` bytes.
    public mutating func removeAll(keepingCapacityUpTo keeping: Int = .max) {
        count = 0
        if capacity > keeping {
            free(base)
            base = nil
            capacity = 0
        }
    }

    /// Doubles up to 1 MiB, then grows by half: a buffer bounded at some megabytes (a connection's
    /// output limit) does not hold twice that.
    private mutating func grow(to needed: Int) {
        var size = Swift.max(capacity < 1 << 20 ? capacity * 2 : capacity + capacity / 2, 256)
        while size < needed { size += size < 1 << 20 ? size : size / 2 }
        guard let grown = realloc(base, size) else { fatalError("out of memory growing a buffer to \(size) bytes") }
        base = grown
        capacity = size
    }
}
