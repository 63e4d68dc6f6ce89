// Splits a byte stream into the protocol's lines, for both ends: the session frames the requests
// it receives, ObsClient the responses and events. Framing only: it says "here is a line" or
// "need more data", and knows nothing of JSON. Bytes of a line not yet ended by "\n" wait in
// `partial`; at disconnect they are simply dropped, so a partial request is never applied.
#if canImport(Glibc)
import Glibc
#endif

/// A line grew past the limit before its newline arrived.
public struct LineTooLong: Error, Sendable, Equatable {}

public struct LineFramer: Sendable {
    /// Longest line accepted, not counting its "\n" (or "\r\n").
    public let maxLineBytes: Int
    private var partial: [UInt8] = []

    /// How many bytes may wait for their newline: the limit and a "\r" (an unlimited framer: any).
    private let maxBuffered: Int

    public init(maxLineBytes: Int) {
        self.maxLineBytes = maxLineBytes
        maxBuffered = maxLineBytes == .max ? .max : maxLineBytes + 1
    }

    /// Bytes of an unfinished line held so far.
    public var bufferedBytes: Int { partial.count }

    /// Feeds `bytes` and calls `line` with each complete non-blank line (without "\n" and a "\r"
    /// before it). Throws when a line is over the limit; the lines before it have been delivered.
    public mutating func append(
        _ bytes: UnsafeRawBufferPointer, line: (UnsafeRawBufferPointer) -> Void
    ) throws(LineTooLong) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        var start = 0
        while start < bytes.count {
            guard let found = memchr(base + start, 0x0A, bytes.count - start) else {
                let rest = UnsafeRawBufferPointer(start: base + start, count: bytes.count - start)
                guard rest.count <= maxBuffered - partial.count else { throw LineTooLong() }
                partial.append(contentsOf: rest)
                return
            }
            let end = base.distance(to: UnsafeRawPointer(found))
            let piece = UnsafeRawBufferPointer(start: base + start, count: end - start)
            start = end + 1
            let fits: Bool
            if partial.isEmpty {
                fits = deliver(piece, line)
            } else {
                partial.append(contentsOf: piece)
                let whole = partial
                partial.removeAll(keepingCapacity: partial.capacity <= 65536)
                fits = whole.withUnsafeBytes { deliver($0, line) }
            }
            guard fits else { throw LineTooLong() }
        }
    }

    /// Hands one line to `line`; false when it is over the limit.
    private func deliver(_ raw: UnsafeRawBufferPointer, _ line: (UnsafeRawBufferPointer) -> Void) -> Bool {
        var count = raw.count
        if count > 0, raw[count - 1] == 0x0D { count -= 1 }
        guard count <= maxLineBytes else { return false }
        let trimmed = UnsafeRawBufferPointer(rebasing: raw[..<count])
        // Blank lines (only spaces and tabs) are ignored by the protocol; skipping them here saves
        // the session a parse.
        if trimmed.contains(where: { $0 != 0x20 && $0 != 0x09 }) { line(trimmed) }
        return true
    }
}
