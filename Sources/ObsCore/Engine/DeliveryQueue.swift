#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What an observer's delivery is. (Outside the generic observer, so that the queue is of a
/// concrete type: a type nested in a generic class is generic too, and costs run-time lookups.)
enum DeliveryKind: UInt32 {
    case change, initial, failure
}

/// Changes waiting to be delivered, in commit order, with their values: each entry names its
/// observer (without a retain: Engine.retireAfterDelivery) and the kind of delivery, and carries the payload (the old
/// and new values, or the error), which the observer's typed code moves in under the engine lock
/// and moves out on the delivering thread. So a change costs no allocation, no ring of its own in
/// the observer, and no taking of the lock to fetch it: the delivering thread takes a whole batch
/// by swapping queues (Engine.swift).
///
/// Memory is a chain of segments, filled in order and never moved (values are only ever moved by
/// their type's own code); a delivered queue's segments go back to a pool (`DeliverySegments`), so
/// that a warmed-up engine allocates none.
struct DeliveryQueue {
    private var first: UnsafeMutablePointer<SegmentHeader>?
    private var last: UnsafeMutablePointer<SegmentHeader>?

    struct SegmentHeader {
        var next: UnsafeMutablePointer<SegmentHeader>?
        /// Bytes used, counted from the segment's start (the header included).
        var used: Int
        var capacity: Int
    }

    /// An entry's fixed part; its payload follows, at the first multiple of its alignment.
    struct EntryHeader {
        var observer: Unmanaged<DeliveringObserver>
        var kind: DeliveryKind
        /// Bytes from this entry's start to the next one's.
        var size: UInt32
    }

    /// Entries start at multiples of this (the header's alignment, and what most payloads need).
    static var entryAlignment: Int { 16 }
    static var headerBytes: Int { MemoryLayout<SegmentHeader>.stride.roundedUp(to: entryAlignment) }

    var isEmpty: Bool { first == nil }

    /// Where the payload of an entry starting at `entry` is, for a payload of `alignment`.
    @inline(__always)
    static func payload(of entry: UnsafeMutableRawPointer, alignment: Int) -> UnsafeMutableRawPointer {
        let start = UInt(bitPattern: entry) + UInt(MemoryLayout<EntryHeader>.stride)
        let mask = UInt(max(alignment, 1) - 1)
        return UnsafeMutableRawPointer(bitPattern: (start + mask) & ~mask)!
    }

    /// Appends an entry for `observer` and returns where its payload of `bytes`
    /// bytes and `alignment` goes: the caller initialises it at once.
    @inline(__always)
    mutating func append(_ observer: DeliveringObserver, _ kind: DeliveryKind, bytes: Int, alignment: Int,
                         pool: inout DeliverySegments) -> UnsafeMutableRawPointer {
        let room = Self.entryBytes(payload: bytes, alignment: alignment)
        var segment = last
        if segment == nil || segment!.pointee.used + room > segment!.pointee.capacity {
            segment = pool.take(room: room + Self.headerBytes)
            if let last { last.pointee.next = segment } else { first = segment }
            last = segment
        }
        let entry = UnsafeMutableRawPointer(segment!) + segment!.pointee.used
        segment!.pointee.used += room
        entry.initializeMemory(as: EntryHeader.self, repeating: EntryHeader(
            observer: Unmanaged.passUnretained(observer), kind: kind, size: UInt32(room)), count: 1)
        return Self.payload(of: entry, alignment: alignment)
    }

    /// Bytes an entry takes with its payload: the header, padding to the payload's alignment (at
    /// most that much, whatever the entry's address), the payload, rounded up to `entryAlignment`.
    @inline(__always)
    static func entryBytes(payload bytes: Int, alignment: Int) -> Int {
        let padding = alignment > entryAlignment ? alignment : 0
        return (MemoryLayout<EntryHeader>.stride + padding + bytes).roundedUp(to: entryAlignment)
    }

    /// Calls `body` with every entry in order (its header and its address), then empties the queue
    /// into `pool`'s keeping. `ahead` calls are given, before each entry, the entry `lookahead`
    /// places further on, if any (for prefetching).
    mutating func drain(lookahead: Int, _ ahead: (Unmanaged<DeliveringObserver>) -> Void,
                        _ body: (EntryHeader, UnsafeMutableRawPointer) -> Void) {
        var lead = Cursor(first)
        if lookahead > 0 { for _ in 0..<lookahead { lead.advance() } }
        var cursor = Cursor(first)
        while let entry = cursor.entry {
            if lookahead > 0, let leading = lead.entry {
                ahead(leading.load(as: EntryHeader.self).observer)
                lead.advance()
            }
            let header = entry.load(as: EntryHeader.self)
            cursor.advance()
            body(header, entry)
        }
    }

    /// Gives the queue's segments to `pool` and empties it (after `drain`).
    mutating func recycle(into pool: inout DeliverySegments) {
        var segment = first
        while let current = segment {
            segment = current.pointee.next
            pool.give(current)
        }
        first = nil
        last = nil
    }

    /// A position in the chain of segments.
    private struct Cursor {
        var segment: UnsafeMutablePointer<SegmentHeader>?
        var offset: Int

        init(_ first: UnsafeMutablePointer<SegmentHeader>?) {
            segment = first
            offset = DeliveryQueue.headerBytes
        }

        var entry: UnsafeMutableRawPointer? {
            guard let segment else { return nil }
            return UnsafeMutableRawPointer(segment) + offset
        }

        mutating func advance() {
            guard let current = segment else { return }
            offset += Int((UnsafeMutableRawPointer(current) + offset).load(as: EntryHeader.self).size)
            if offset >= current.pointee.used {
                segment = current.pointee.next
                offset = DeliveryQueue.headerBytes
            }
        }
    }
}

/// The spare segments of the delivery queues (guarded by the engine lock).
struct DeliverySegments {
    private var spare: UnsafeMutablePointer<DeliveryQueue.SegmentHeader>?

    /// The size of a segment; an entry larger than one gets a segment of its own, freed after use.
    static var segmentBytes: Int { 1 << 14 }

    /// An empty segment with room for at least `room` bytes (its header included).
    mutating func take(room: Int) -> UnsafeMutablePointer<DeliveryQueue.SegmentHeader> {
        let segment: UnsafeMutablePointer<DeliveryQueue.SegmentHeader>
        if room <= Self.segmentBytes, let reused = spare {
            spare = reused.pointee.next
            segment = reused
        } else {
            let capacity = max(room, Self.segmentBytes)
            segment = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64)
                .bindMemory(to: DeliveryQueue.SegmentHeader.self, capacity: 1)
            segment.pointee.capacity = capacity
        }
        segment.pointee.next = nil
        segment.pointee.used = DeliveryQueue.headerBytes
        return segment
    }

    /// Takes back a segment whose entries have been delivered.
    mutating func give(_ segment: UnsafeMutablePointer<DeliveryQueue.SegmentHeader>) {
        if segment.pointee.capacity > Self.segmentBytes {
            UnsafeMutableRawPointer(segment).deallocate()
            return
        }
        segment.pointee.next = spare
        spare = segment
    }
}

extension Int {
    @inline(__always)
    func roundedUp(to alignment: Int) -> Int { (self + alignment - 1) & ~(alignment - 1) }
}
