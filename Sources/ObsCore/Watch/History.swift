#if canImport(Glibc)
import Glibc
#endif

/// The changes of the last revisions, oldest first, for `since`: each kept transaction's events as
/// the watch unit encoded them (`EventRecord`), back to back in a ring of bytes. Appending copies a
/// transaction's events into the ring and evicts the oldest transactions beyond `capacity`
/// revisions or `maxBytes` of events (the bytes they are kept in: so that a client overwriting a
/// key with 1 MiB values cannot make obsd keep gigabytes of old values; a `since` older than what
/// is kept gets `compacted` and a snapshot). Once the ring has grown to what that takes, it is
/// reused in place, so recording a change costs no allocation.
///
/// Each transaction's events are one contiguous block of the ring (a block that does not fit
/// before the ring's end starts again at its front). When neither place has room, the ring grows
/// by a quarter more than it needs, its live blocks copied in order; when a burst has passed and
/// the live blocks fill less than an eighth of a large ring, it shrinks. With `maxBytes`, the ring
/// never grows past `maxBytes` and twice the largest block: one of the two places then has room
/// once the oldest blocks are evicted down to the bound (what is live plus the block is at most
/// `maxBytes`, and a wrapped ring leaves less than the largest block unused at its end, so the free
/// bytes are at least the block, or, not wrapped, at least twice the block, shared by the two
/// places); should it not (a larger block than before), the oldest go until it does.
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
    private(set) var ringCapacity = 0
    /// Every revision after this one is in the history.
    private(set) var start: UInt64
    let capacity: Int
    let maxBytes: Int
    /// The bytes of the events kept.
    private(set) var bytes = 0
    /// The largest block appended so far.
    private var largestBlock = 0

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
        largestBlock = max(largestBlock, length)
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
    /// that is free and the end is not; the ring grows when neither fits, unless it is at its bound:
    /// then the oldest blocks go until one fits (the room a wrapped ring leaves unused at its end
    /// can be missing from the free bytes the note at the top counts).
    private mutating func place(_ length: Int) -> Int {
        guard length > 0 else { return 0 }
        while let (oldest, newest) = liveEnds() {
            let end = newest.offset + newest.length
            // Blocks lie in order from the oldest; the ring is wrapped when the newest starts
            // before it.
            if newest.offset >= oldest.offset {
                if ringCapacity - end >= length { return end }
                if oldest.offset >= length { return 0 }
            } else if oldest.offset - end >= length {
                return end
            }
            guard maxBytes < .max, ringCapacity >= maxBytes &+ 2 &* largestBlock else {
                resize(to: bytes + length)
                return liveEnds().map { $0.newest.offset + $0.newest.length } ?? 0
            }
            evictOldest()
        }
        if length > ringCapacity { resize(to: length) }
        return 0
    }

    /// The oldest and the newest block holding bytes, if any (a transaction without events holds
    /// none, and has no place in the ring).
    private func liveEnds() -> (oldest: Block, newest: Block)? {
        var first = head
        while first < blocks.count, blocks[first].length == 0 { first += 1 }
        guard first < blocks.count else { return nil }
        var last = blocks.count - 1
        while blocks[last].length == 0 { last -= 1 }
        return (blocks[first], blocks[last])
    }

    /// Moves the live blocks, in order, to the front of a ring of `needed` bytes and a quarter more
    /// (at least 4 KiB, in pages, at most `maxBytes` and what is being added).
    private mutating func resize(to needed: Int) {
        var size = max(4096, (needed + needed / 4 + 4095) / 4096 * 4096)
        if maxBytes < .max { size = max(needed, min(size, maxBytes &+ 2 &* largestBlock)) }
        guard let grown = malloc(size) else { fatalError("out of memory growing the history to \(size) bytes") }
        var offset = 0
        for index in head..<blocks.count where blocks[index].length > 0 {
            let block = blocks[index]
            (grown + offset).copyMemory(from: ring! + block.offset, byteCount: block.length)
            blocks[index].offset = offset
            offset += block.length
        }
        free(ring)
        ring = grown
        ringCapacity = size
    }
}
