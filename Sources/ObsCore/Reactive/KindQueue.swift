/// What an observer's next delivery is. (Outside the generic observer, so that its queue is a
/// concrete type: a type nested in a generic class is generic too, and costs run-time lookups.)
enum DeliveryKind: UInt8 {
    case change, initial, failure
}

/// A FIFO of delivery kinds that lives inside the observer: up to 32 kinds packed in one word (an
/// observer nearly always has one pending), more in an array behind them. No allocation, and no
/// extra cache line to touch per change.
struct KindQueue {
    // 21 bytes, so that the observer's small fields pack behind it.
    /// Kinds queued while the packed word was full, oldest at `overflowHead`.
    private var overflow: [DeliveryKind] = []
    /// Two bits a kind, the oldest in the lowest bits.
    private var packed: UInt64 = 0
    private var overflowHead: Int32 = 0
    private var packedCount: UInt8 = 0

    private static var packedCapacity: UInt8 { 32 }

    @inline(__always) var isEmpty: Bool { packedCount == 0 }

    @inline(__always)
    mutating func append(_ kind: DeliveryKind) {
        if packedCount < Self.packedCapacity, Int(overflowHead) == overflow.count {
            packed |= UInt64(kind.rawValue) << UInt64(2 * packedCount)
            packedCount += 1
        } else {
            overflow.append(kind)
        }
    }

    /// Removes and returns the oldest kind (the queue must not be empty).
    @inline(__always)
    mutating func removeFirst() -> DeliveryKind {
        let kind = DeliveryKind(rawValue: UInt8(packed & 3))!
        packed >>= 2
        packedCount -= 1
        if Int(overflowHead) < overflow.count { refill() }
        return kind
    }

    mutating func removeAll() {
        packed = 0
        packedCount = 0
        overflow.removeAll()
        overflowHead = 0
    }

    @inline(never)
    private mutating func refill() {
        packed |= UInt64(overflow[Int(overflowHead)].rawValue) << UInt64(2 * packedCount)
        packedCount += 1
        overflowHead += 1
        if Int(overflowHead) == overflow.count {
            overflow.removeAll(keepingCapacity: true)
            overflowHead = 0
        }
    }
}
