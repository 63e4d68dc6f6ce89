// The event lines of one loop turn that several connections get, each kept once for all of them.
//
// An event that a thousand connections watch used to be copied into a thousand output buffers:
// 11 MiB per turn at the 1,000-watcher fan-out's 64 updates of 180 bytes, written by obsd once
// and read once more by the kernel when it copied them into the sockets, most of it from outside
// the caches. Now the line (its watch's head, then the event's body) is copied here once, and each
// connection queues only where it is (`Connection`, an iovec); its write(2) becomes a writev(2)
// whose bytes the kernel reads from a few kilobytes that stay in cache.
//
// Lines are found again by the number the watch unit gives each body (`sharing`: one number, one
// body) and by their head, which differs between watches (`{"event":"change","watch":N`): a
// small table keyed by both, so that watches with different ids, or the several events of one
// transaction, each find their copy. A line not found is copied in; when the turn's room is used
// up (`maxChunks`), or a line is longer than a chunk, the connection copies the line itself, as
// before.
//
// The lines live until the end of the turn's flush (`reset`): every connection that queued one is
// listed for that flush (it is dirty), and a flush that cannot write everything copies what is
// left into the connection's own buffer. While the flush runs the table is closed, so that lines
// queued by then (a drained connection's resync) are copied too.
import Glibc

final class SharedLines {
    /// Whether lines are taken now (false while the turn's flush runs).
    @exclusivity(unchecked) private(set) var isOpen = true
    /// Memory for the lines: chunks that never move, kept from one turn to the next.
    @exclusivity(unchecked) private var chunks: [UnsafeMutableRawPointer] = []
    @exclusivity(unchecked) private var chunk = 0
    @exclusivity(unchecked) private var used = 0
    /// Whether some line was copied in since the last reset.
    @exclusivity(unchecked) private var isEmpty = true
    private let slots: UnsafeMutablePointer<Slot>

    private struct Slot {
        var sharing: UInt64 = 0
        var headCount = 0
        var line: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)
    }

    /// Bytes per chunk; a longer line is not shared.
    static let chunkBytes = 1 << 16
    /// At most 1 MiB of lines per turn.
    static let maxChunks = 16
    private static let slotCount = 64

    init() {
        slots = .allocate(capacity: Self.slotCount)
        slots.initialize(repeating: Slot(), count: Self.slotCount)
    }

    deinit {
        slots.deallocate()
        chunks.forEach { free($0) }
    }

    /// The line made of `head` then `body` (whose bytes `sharing` stands for), kept until the end
    /// of the turn: found, or copied in. Nil when it cannot be kept (closed, too long, no room).
    @inline(__always)
    func line(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, sharing: UInt64) -> UnsafeRawBufferPointer? {
        guard isOpen else { return nil }
        // The head's last eight bytes hold the watch id, which tells heads apart.
        let tail = head.count >= 8 ? head.loadUnaligned(fromByteOffset: head.count - 8, as: UInt64.self) : UInt64(head.count)
        let index = Int(truncatingIfNeeded: ((sharing ^ tail) &* 0x9E37_79B9_7F4A_7C15) >> 58)
        let slot = slots + index
        if slot.pointee.sharing == sharing, slot.pointee.headCount == head.count,
           Self.equal(head, slot.pointee.line.baseAddress!) {
            return slot.pointee.line
        }
        guard let line = copy(head, body) else { return nil }
        slot.pointee = Slot(sharing: sharing, headCount: head.count, line: line)
        return line
    }

    /// Whether `kept` starts with `head`'s bytes: eight at a time (a head is some 27 bytes; a call
    /// to memcmp cost a fifth of the lookup).
    @inline(__always)
    private static func equal(_ head: UnsafeRawBufferPointer, _ kept: UnsafeRawPointer) -> Bool {
        let count = head.count
        guard count >= 8 else { return count == 0 || memcmp(kept, head.baseAddress!, count) == 0 }
        var offset = 0
        while offset < count - 8 {
            guard head.loadUnaligned(fromByteOffset: offset, as: UInt64.self) == kept.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            else { return false }
            offset += 8
        }
        return head.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self) == kept.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
    }

    private func copy(_ head: UnsafeRawBufferPointer, _ body: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let count = head.count + body.count
        guard count <= Self.chunkBytes else { return nil }
        if chunks.isEmpty || used + count > Self.chunkBytes {
            guard chunks.isEmpty || chunk + 1 < Self.maxChunks else { return nil }
            if !chunks.isEmpty { chunk += 1 }
            used = 0
            if chunk == chunks.count {
                guard let memory = malloc(Self.chunkBytes) else { return nil }
                chunks.append(memory)
            }
        }
        let start = chunks[chunk] + used
        if let source = head.baseAddress { start.copyMemory(from: source, byteCount: head.count) }
        if let source = body.baseAddress { (start + head.count).copyMemory(from: source, byteCount: body.count) }
        used += count
        isEmpty = false
        return UnsafeRawBufferPointer(start: start, count: count)
    }

    /// The turn's flush starts: no more lines are taken until `reset`.
    func close() {
        isOpen = false
    }

    /// The turn's flush is over, and no connection refers to a line any more: the memory is
    /// taken again from its start.
    func reset() {
        isOpen = true
        guard !isEmpty else { return }
        isEmpty = true
        chunk = 0
        used = 0
        for index in 0..<Self.slotCount { slots[index] = Slot() }
    }
}
