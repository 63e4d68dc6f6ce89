#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One edge of the graph: `sub` read `dep`. It sits in two lists at once: `sub`'s dependencies and
/// `dep`'s subscribers. A link holds a retain on its `dep` (a node is kept alive by whatever reads
/// it) but not on its `sub` (a node unlinks itself when it goes away). The dependency list is
/// singly linked: it is only walked forward and cut after `depsTail` (Tracking.swift); the
/// subscriber list is doubly linked, so that one link can leave it from anywhere.
///
/// Links are plain records in pages the engine manages (`LinkPages`), not objects: 40 bytes with no
/// object header or allocator overhead (an object was 80), made one after the other in the order
/// the graph reads them, so a walk of a large graph reads them roughly in sequence.
@usableFromInline
struct LinkRecord {
    @usableFromInline var dep: Unmanaged<ReactiveNode>
    @usableFromInline var sub: Unmanaged<ReactiveNode>
    @usableFromInline var nextDep: LinkRef?
    @usableFromInline var prevSub: LinkRef?
    @usableFromInline var nextSub: LinkRef?

    @inlinable
    init(dep: Unmanaged<ReactiveNode>, sub: Unmanaged<ReactiveNode>, nextDep: LinkRef?, prevSub: LinkRef?, nextSub: LinkRef?) {
        self.dep = dep
        self.sub = sub
        self.nextDep = nextDep
        self.prevSub = prevSub
        self.nextSub = nextSub
    }
}

/// A reference to a link record. All access happens under the engine lock.
@usableFromInline
struct LinkRef {
    @usableFromInline let record: UnsafeMutablePointer<LinkRecord>

    @inlinable init(record: UnsafeMutablePointer<LinkRecord>) { self.record = record }

    @inlinable var dep: Unmanaged<ReactiveNode> { record.pointee.dep }
    @inlinable var sub: Unmanaged<ReactiveNode> { record.pointee.sub }
    @inlinable var nextDep: LinkRef? {
        get { record.pointee.nextDep }
        nonmutating set { record.pointee.nextDep = newValue }
    }
    @inlinable var prevSub: LinkRef? {
        get { record.pointee.prevSub }
        nonmutating set { record.pointee.prevSub = newValue }
    }
    @inlinable var nextSub: LinkRef? {
        get { record.pointee.nextSub }
        nonmutating set { record.pointee.nextSub = newValue }
    }

    @inlinable static func === (a: LinkRef, b: LinkRef) -> Bool { a.record == b.record }

    /// Prefetches ahead of a walk through memory laid out in the order the graph was built: the
    /// record `runAheadFar` records further on in this page, and the subscriber named by the record
    /// `runAheadNear` records on (prefetched by an earlier call, so it has arrived). Where records
    /// sit in build order, as a layered graph's do, the walk reaches those nodes a few layers
    /// later and finds them loaded; elsewhere it costs a few wasted prefetches. A record read this
    /// way may be free or never handed out: pages are zeroed when made, and a prefetch of a stale
    /// or null address is only a hint, never a fault.
    @inline(__always) func runAhead() {
        let here = UInt(bitPattern: record)
        let stride = UInt(MemoryLayout<LinkRecord>.stride)
        let pageBytes = UInt(LinkPages.pageBytes)
        let far = here &+ UInt(LinkRef.runAheadFar) &* stride
        if (far &+ stride &- 1) ^ here < pageBytes {
            ObsCore.prefetch(UnsafeRawPointer(bitPattern: far)!)
        }
        let near = here &+ UInt(LinkRef.runAheadNear) &* stride
        if (near &+ stride &- 1) ^ here < pageBytes {
            let sub = UnsafeRawPointer(bitPattern: near)!
                .load(fromByteOffset: MemoryLayout<LinkRecord>.offset(of: \.sub)!, as: UInt.self)
            if let node = UnsafeRawPointer(bitPattern: sub) { prefetchLine(node + nodeHeadOffset) }
        }
    }

    /// How far `runAhead` reads and prefetches, in records (a cellx layer makes 10: about three
    /// layers and five layers ahead). Measured on cellx5000's marking walk against 8-48 and 16-96:
    /// near 24-32 with far 48-56 did best.
    static var runAheadNear: Int { 32 }
    static var runAheadFar: Int { 56 }

    /// Asks the CPU to start loading the record (Prefetch.swift).
    @inline(__always) func prefetch() { ObsCore.prefetch(UnsafeRawPointer(record)) }
}

/// The memory of the links: pages of `pageBytes`, aligned to their size, each with a header at
/// its start (so a record finds its page by masking its address), its records after it. A page
/// hands out its never-used records in address order, then the ones freed since (its own free
/// list). Pages with room are kept in a list, the newest first; a page whose last record is freed
/// goes back to the system, except one kept for the next links: a graph torn down returns its
/// memory, and the next one is laid out afresh, in the order it is built.
struct LinkPages {
    private struct Header {
        var live: Int
        var used: Int
        var free: UnsafeMutablePointer<LinkRecord>?
        var prev: UnsafeMutablePointer<Header>?
        var next: UnsafeMutablePointer<Header>?
        var hasRoom: Bool
    }

    static var pageBytes: Int { 1 << 14 }
    private static var firstOffset: Int { 64 }
    private static var capacity: Int { (pageBytes - firstOffset) / MemoryLayout<LinkRecord>.stride }

    /// Pages with a free record, the one to take from first.
    private var withRoom: UnsafeMutablePointer<Header>?
    /// An empty page kept instead of returned, so that one link made and dropped over and over
    /// does not map and unmap a page each time.
    private var spare: UnsafeMutablePointer<Header>?
    /// Pages in use (for tests and statistics).
    private(set) var pageCount = 0

    /// Memory for one record, uninitialised.
    mutating func allocate() -> UnsafeMutablePointer<LinkRecord> {
        let page = withRoom ?? newPage()
        let record: UnsafeMutablePointer<LinkRecord>
        if let free = page.pointee.free {
            record = free
            page.pointee.free = Self.nextFree(of: free)
        } else {
            record = (UnsafeMutableRawPointer(page) + Self.firstOffset)
                .assumingMemoryBound(to: LinkRecord.self) + page.pointee.used
            page.pointee.used += 1
        }
        page.pointee.live += 1
        if page.pointee.free == nil, page.pointee.used == Self.capacity { removeFromRoom(page) }
        return record
    }

    /// Gives back a record (already deinitialised: its fields are trivial).
    mutating func deallocate(_ record: UnsafeMutablePointer<LinkRecord>) {
        let page = Self.page(of: record)
        Self.setNextFree(of: record, page.pointee.free)
        page.pointee.free = record
        page.pointee.live -= 1
        if !page.pointee.hasRoom { addToRoom(page) }
        if page.pointee.live == 0 { release(page) }
    }

    private mutating func newPage() -> UnsafeMutablePointer<Header> {
        if let spare {
            self.spare = nil
            addToRoom(spare)
            return spare
        }
        var memory: UnsafeMutableRawPointer?
        guard posix_memalign(&memory, Self.pageBytes, Self.pageBytes) == 0, let memory else {
            fatalError("ObsCore: out of memory for the graph's links")
        }
        // Zeroed, so that every byte `LinkRef.runAhead` may read has been written.
        memory.initializeMemory(as: UInt8.self, repeating: 0, count: Self.pageBytes)
        let page = memory.bindMemory(to: Header.self, capacity: 1)
        (memory + Self.firstOffset).bindMemory(to: LinkRecord.self, capacity: Self.capacity)
        page.initialize(to: Header(live: 0, used: 0, free: nil, prev: nil, next: nil, hasRoom: false))
        pageCount += 1
        addToRoom(page)
        return page
    }

    /// An empty page: kept as the spare if there is none, otherwise returned to the system.
    private mutating func release(_ page: UnsafeMutablePointer<Header>) {
        removeFromRoom(page)
        page.pointee.used = 0
        page.pointee.free = nil
        if spare == nil {
            spare = page
        } else {
            pageCount -= 1
            free(UnsafeMutableRawPointer(page))
        }
    }

    private mutating func addToRoom(_ page: UnsafeMutablePointer<Header>) {
        page.pointee.hasRoom = true
        page.pointee.prev = nil
        page.pointee.next = withRoom
        withRoom?.pointee.prev = page
        withRoom = page
    }

    private mutating func removeFromRoom(_ page: UnsafeMutablePointer<Header>) {
        guard page.pointee.hasRoom else { return }
        page.pointee.hasRoom = false
        if let prev = page.pointee.prev { prev.pointee.next = page.pointee.next } else { withRoom = page.pointee.next }
        page.pointee.next?.pointee.prev = page.pointee.prev
        page.pointee.prev = nil
        page.pointee.next = nil
    }

    @inline(__always)
    private static func page(of record: UnsafeMutablePointer<LinkRecord>) -> UnsafeMutablePointer<Header> {
        UnsafeMutablePointer(bitPattern: UInt(bitPattern: record) & ~UInt(pageBytes - 1))!
    }

    // A free record's first word chains it to the next free one.
    @inline(__always)
    private static func nextFree(of record: UnsafeMutablePointer<LinkRecord>) -> UnsafeMutablePointer<LinkRecord>? {
        UnsafeMutableRawPointer(record).load(as: UnsafeMutablePointer<LinkRecord>?.self)
    }

    @inline(__always)
    private static func setNextFree(of record: UnsafeMutablePointer<LinkRecord>, _ next: UnsafeMutablePointer<LinkRecord>?) {
        UnsafeMutableRawPointer(record).storeBytes(of: next, as: UnsafeMutablePointer<LinkRecord>?.self)
    }
}
