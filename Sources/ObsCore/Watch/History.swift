#if canImport(Glibc)
import Glibc
#endif

/// The changes of the last revisions, oldest first, for `since`: each kept transaction's events as
/// the watch unit encoded them (`EventRecord`), back to back in a ring of bytes. Appending copies a
/// transaction's events into the ring and evicts the oldest transactions beyond `capacity`
/// revisions (or `maxBytes` of events); once the ring has grown to what that many revisions take,
/// it is reused in place, so recording a change costs no allocation.
///
/// Each transaction's events are one contiguous block of the ring (a block that does not fit
/// before the ring's end starts again at its front). When neither place has room, the ring doubles,
/// its live blocks copied in order; when a burst has passed and the live blocks fill less than an
/// eighth of a large ring, it halves.
struct History: ~Copyable {
    /// One kept transaction: its revision and where its events are in the ring.
    private struct Block {
        var rev: UInt64
        var offset: Int
        var length: Int
    }

    private var blocks: [Block] = []
    /// `blocks[..<head]` are evicted (compacted away once they are half the array).
    private var head = 0
    private var ring: UnsafeMutableRawPointer?
    private var ringCapacity = 0
    /// Every revision after this one is in the history.
    private(set) var start: UInt64
    let capacity: Int
    let maxBytes: Int
    /// The bytes of the events kept.
    private(set) var bytes = 0

    init(capacity: Int, maxBytes: Int = .max, start: UInt64) {
        self.capacity = capacity
        self.maxBytes = maxBytes
        self.start = start
    }

    deinit { free(ring) }

    var count: Int { blocks.count - head }

    /// Keeps the events of the transaction that committed `rev` (an encoded run of `EventRecord`s,
    /// possibly empty).
    mutating func append(rev: UInt64, events: UnsafeRawBufferPointer) {
        let length = events.count
        while count > 0 && (count >= capacity || bytes + length > maxBytes) { evictOldest() }
        guard capacity > 0, length <= maxBytes else {
            // Too large to keep even alone: the history starts after it.
            start = rev
            return
        }
        let offset = place(length)
        if length > 0 { (ring! + offset).copyMemory(from: events.baseAddress!, byteCount: length) }
        blocks.append(Block(rev: rev, offset: offset, length: length))
        bytes += length
        if ringCapacity > 1 << 20, bytes * 8 < ringCapacity { resize(to: bytes) }
    }

    /// Calls `body` with the events of every transaction after `rev`, oldest first, each with its
    /// revision; false (and no call) when some of them are no longer kept.
    func forEachTransaction(after rev: UInt64, _ body: (UInt64, EventRecords) -> Void) -> Bool {
        guard rev >= start else { return false }
        var low = head
        var high = blocks.count
        while low < high {
            let mid = (low + high) / 2
            if blocks[mid].rev <= rev { low = mid + 1 } else { high = mid }
        }
        for block in blocks[low...] {
            body(block.rev, EventRecords(UnsafeRawBufferPointer(start: ring.map { $0 + block.offset }, count: block.length)))
        }
        return true
    }

    private mutating func evictOldest() {
        start = blocks[head].rev
        bytes -= blocks[head].length
        head += 1
        if head == blocks.count {
            blocks.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024, head * 2 > blocks.count {
            blocks.removeFirst(head)
            head = 0
        }
    }

    /// Where a block of `length` bytes goes: after the newest block, or at the ring's front when
    /// that is free and the end is not; the ring grows when neither fits.
    private mutating func place(_ length: Int) -> Int {
        guard count > 0 else {
            if length > ringCapacity { resize(to: length) }
            return 0
        }
        let oldest = blocks[head].offset
        let newest = blocks[blocks.count - 1]
        let end = newest.offset + newest.length
        if end >= oldest {
            if ringCapacity - end >= length { return end }
            if oldest >= length { return 0 }
        } else if oldest - end >= length {
            return end
        }
        resize(to: bytes + length)
        let last = blocks[blocks.count - 1]
        return last.offset + last.length
    }

    /// Moves the live blocks, in order, to the front of a ring of twice `needed` bytes or more (a
    /// power of two, at least 4 KiB).
    private mutating func resize(to needed: Int) {
        var size = 4096
        while size < needed * 2 { size *= 2 }
        guard let grown = malloc(size) else { fatalError("out of memory growing the history to \(size) bytes") }
        var offset = 0
        for index in head..<blocks.count {
            let block = blocks[index]
            if block.length > 0 { (grown + offset).copyMemory(from: ring! + block.offset, byteCount: block.length) }
            blocks[index].offset = offset
            offset += block.length
        }
        free(ring)
        ring = grown
        ringCapacity = size
    }
}
