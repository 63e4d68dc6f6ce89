import Foundation
import XCTest
@testable import ObsCore

/// One test per guarantee of the propagation algorithm (Sources/ObsCore/Reactive/Propagation.swift).
final class PropagationTests: XCTestCase {
    /// ```
    ///     a
    ///    / \
    ///   b   c
    ///    \ /
    ///     d   (observed)
    /// ```
    func test_diamond_recomputesBottomOnceWithFinalValues() {
        let a = Observable(1)
        let b = Computed { a.value + 1 }
        let c = Computed { a.value * 10 }
        let dRuns = Counter()
        let d = Computed { dRuns.bump(); return "\(b.value)/\(c.value)" }
        let seen = Log<String>()
        let token = d.observe { seen.append($0.newValue) }
        defer { token.cancel() }
        XCTAssertEqual(dRuns.count, 1)

        a.value = 2

        XCTAssertEqual(dRuns.count, 2)
        XCTAssertEqual(seen.entries, ["3/20"], "never a glitch such as 3/10")
    }

    /// ```
    ///   a   b
    ///    \ /
    ///    sum     (both written in one batch)
    /// ```
    func test_batch_recomputesOnceAfterAllWrites() {
        let a = Observable(1), b = Observable(2)
        let runs = Counter()
        let sum = Computed { runs.bump(); return a.value + b.value }
        let seen = Log<Int>()
        let token = sum.observe { seen.append($0.newValue) }
        defer { token.cancel() }

        batch {
            a.value = 10
            b.value = 20
            a.value = 100
        }

        XCTAssertEqual(runs.count, 2)
        XCTAssertEqual(seen.entries, [120])
    }

    func test_batch_readsInsideSeeWritesAlready() {
        let a = Observable(1)
        let doubled = Computed { a.value * 2 }
        let inside = batch { () -> Int in
            a.value = 5
            return doubled.value
        }
        XCTAssertEqual(inside, 10)
    }

    /// The dependency switches A -> B -> A and each switch is followed exactly:
    /// ```
    ///   useB   a   b
    ///      \   |  /
    ///       pick      = useB ? b : a
    /// ```
    func test_dynamicDependencies_followSwitchFromAToBAndBack() {
        let useB = Observable(false), a = Observable("a1"), b = Observable("b1")
        let runs = Counter()
        let pick = Computed { runs.bump(); return useB.value ? b.value : a.value }
        let seen = Log<String>()
        let token = pick.observe { seen.append($0.newValue) }
        defer { token.cancel() }
        XCTAssertEqual(runs.count, 1)

        b.value = "b2"                       // not a dependency yet
        XCTAssertEqual(runs.count, 1)
        useB.value = true                    // A -> B
        a.value = "a2"                       // no longer a dependency
        XCTAssertEqual(runs.count, 2)
        useB.value = false                   // B -> A
        b.value = "b3"
        XCTAssertEqual(runs.count, 3)
        a.value = "a3"
        XCTAssertEqual(runs.count, 4)

        XCTAssertEqual(seen.entries, ["b2", "a2", "a3"])
    }

    /// A node read again and again in one run, between other reads, is one dependency: linked
    /// once, whatever was read in between (here `inner`, brought up to date inside the run, which
    /// reads `b` itself), and every one of them is followed.
    /// ```
    ///   a   b
    ///   |\ /|
    ///   | inner = b * 10
    ///    \ |
    ///    outer = a + inner + a + b + a + inner
    /// ```
    func test_repeatedReads_areOneDependencyEach() {
        let a = Observable(1), b = Observable(2)
        let inner = Computed { b.value * 10 }
        let outer = Computed { a.value + inner.value + a.value + b.value + a.value + inner.value }
        let seen = Log<Int>()
        let token = outer.observe(initial: true) { seen.append($0.newValue) }
        defer { token.cancel() }
        func dependencies() -> [ObjectIdentifier] {
            engine.enter()
            defer { engine.exit() }
            var found: [ObjectIdentifier] = []
            outer.forEachDependency { found.append(ObjectIdentifier($0)) }
            return found
        }
        let expected = [ObjectIdentifier(a), ObjectIdentifier(inner), ObjectIdentifier(b)]
        XCTAssertEqual(dependencies(), expected)
        b.value = 3          // inner recomputes inside outer's run
        XCTAssertEqual(dependencies(), expected)
        a.value = 2
        XCTAssertEqual(dependencies(), expected)
        XCTAssertEqual(seen.entries, [45, 66, 69])
        var aSubscribers = 0
        a.forEachSubscriber { _ in aSubscribers += 1 }
        XCTAssertEqual(aSubscribers, 1, "a is linked to outer once")
    }

    /// ```
    ///   flag   expensive (computed, unobserved)
    ///      \   /
    ///      lazy = flag ? expensive : 0
    /// ```
    func test_lazyBranch_isNeverEvaluatedWhileNotRead() {
        let flag = Observable(false), source = Observable(1)
        let expensiveRuns = Counter()
        let expensive = Computed { expensiveRuns.bump(); return source.value * 1000 }
        let lazy = Computed { flag.value ? expensive.value : 0 }
        let token = lazy.observe { _ in }
        defer { token.cancel() }

        source.value = 2
        source.value = 3
        XCTAssertEqual(expensiveRuns.count, 0)
        flag.value = true
        XCTAssertEqual(expensiveRuns.count, 1)
        XCTAssertEqual(lazy.value, 3000)
    }

    func test_unobservedComputed_isLazyAndRecomputesOnlyWhenRead() {
        let a = Observable(1)
        let runs = Counter()
        let c = Computed { runs.bump(); return a.value + 1 }
        XCTAssertEqual(runs.count, 0, "not evaluated when created")
        a.value = 2
        a.value = 3
        XCTAssertEqual(runs.count, 0, "not evaluated on writes while unobserved")
        XCTAssertEqual(c.value, 4)
        XCTAssertEqual(c.value, 4)
        XCTAssertEqual(runs.count, 1, "a second read with no change uses the cached value")
    }

    /// After `flag` turns false, `old` is no longer read: writes to it recompute nothing and it
    /// is no longer linked to the reader.
    func test_dependencyNoLongerRead_isDropped() {
        let flag = Observable(true), old = Observable(1)
        let runs = Counter()
        let reader = Computed { runs.bump(); return flag.value ? old.value : -1 }
        let token = reader.observe { _ in }
        defer { token.cancel() }
        flag.value = false
        XCTAssertEqual(runs.count, 2)

        old.value = 2
        old.value = 3

        XCTAssertEqual(runs.count, 2)
        XCTAssertNil(old.subs, "the dropped dependency has no subscribers left")
    }

    func test_droppedComputed_isReleasedWithItsLinks() {
        let source = Observable(1)
        weak var weakComputed: Computed<Int>?
        do {
            let computed = Computed { source.value + 1 }
            weakComputed = computed
            XCTAssertEqual(computed.value, 2)
            XCTAssertNotNil(source.subs)
        }
        XCTAssertNil(weakComputed)
        XCTAssertNil(source.subs)
    }

    /// A graph's links live in the engine's link pages; dropping the graph gives the pages back
    /// (all but one kept for the next links), and a new graph works on the same memory.
    func test_droppedGraph_returnsItsLinkMemory() {
        func pages() -> Int {
            engine.enter()
            defer { engine.exit() }
            return engine.links.pageCount
        }
        let before = pages()
        let source = Observable(0)
        do {
            var layer: [Computed<Int>] = [Computed { source.value }]
            var tokens: [ObservationToken] = []
            for _ in 0..<2_000 {
                let previous = layer
                layer = (0..<4).map { index in Computed { max(previous[index % previous.count].value, previous[0].value) } }
                tokens.append(contentsOf: layer.map { $0.observe { _ in } })
            }
            XCTAssertGreaterThan(pages(), before + 40, "about 22,000 links fill well over 40 pages of 408")
            source.value = 7
            XCTAssertEqual(layer.map(\.value), [7, 7, 7, 7])
            tokens.removeAll()
        }
        XCTAssertLessThanOrEqual(pages(), before + 1, "the emptied pages went back, but for one spare")
        let again = Computed { source.value * 2 }
        XCTAssertEqual(again.value, 14)
        source.value = 3
        XCTAssertEqual(again.value, 6)
    }

    /// The marking walk prefetches a subscriber and marks it some steps later, through a small ring
    /// (Propagation.swift), in a graph large enough (here made so by 30,000 other links). That must
    /// not change what it queues or in which order: breadth first, each list in subscription
    /// order, here with lists far longer than the ring.
    /// ```
    ///   s -> 300 observers (0...299), then c
    ///   c -> 50 observers (300...349), then d
    ///   d -> 50 observers (350...399)
    /// ```
    func test_marking_queuesWatchersBreadthFirstInSubscriptionOrder() {
        let ballast = Observable(0)
        let fillers = (0..<30_000).map { _ in Computed { ballast.value } }
        for filler in fillers { _ = filler.value }
        engine.enter()
        XCTAssertGreaterThanOrEqual(engine.links.pageCount, Engine.prefetchingPages, "a graph the walk prefetches in")
        engine.exit()
        defer { withExtendedLifetime(fillers) {} }
        let s = Observable(0)
        let c = Computed { s.value + 1 }
        let d = Computed { c.value + 1 }
        let order = Log<Int>()
        var tokens: [ObservationToken] = []
        for id in 0..<300 { tokens.append(s.observe { _ in order.append(id) }) }
        for id in 300..<350 { tokens.append(c.observe { _ in order.append(id) }) }
        for id in 350..<400 { tokens.append(d.observe { _ in order.append(id) }) }
        s.value = 1
        XCTAssertEqual(order.entries, Array(0..<400))
        batch { s.value = 2 }
        XCTAssertEqual(order.entries, Array(0..<400) + Array(0..<400))
        tokens.removeAll()
    }

    /// The marking walk prefetches one cache line per node: the one `nodeHeadOffset` points into,
    /// which must hold the node's flags and subscriber list, whatever the object's alignment.
    func test_nodeHead_holdsFlagsAndSubscribers() {
        let node = Computed { 1 }
        let base = UInt(bitPattern: Unmanaged.passUnretained(node).toOpaque())
        let flags = withUnsafeMutablePointer(to: &node.flags) { UInt(bitPattern: $0) }
        let subs = withUnsafeMutablePointer(to: &node.subs) { UInt(bitPattern: $0) }
        let head = base + UInt(nodeHeadOffset)
        XCTAssertEqual(head % 16, 0, "the head starts 16-byte aligned, so 16 bytes never cross a line")
        XCTAssertTrue((head..<head + 16).contains(flags), "flags at \(flags - base)")
        XCTAssertTrue((head..<head + 16).contains(subs), "subs at \(subs - base)")
        XCTAssertLessThanOrEqual(subs + UInt(MemoryLayout<LinkRef?>.size), head + 16)
    }

    /// Typed nodes keep their value at `ReactiveNode.valueCellOffset`, computed from the node's
    /// address: it must be where the field really is.
    func test_valueCell_isWhereTheOffsetSays() {
        let node = Observable(7)
        let base = UnsafeRawPointer(Unmanaged.passUnretained(node).toOpaque())
        XCTAssertEqual(node.valueCellAddress, base + ReactiveNode.valueCellOffset)
        XCTAssertEqual(base.load(fromByteOffset: ReactiveNode.valueCellOffset, as: Int.self), 7)
    }

    /// A value too large for the node's cell lives in an allocation of its own; both kinds are
    /// released with their node.
    func test_valueCell_holdsLargeAndSmallValues() {
        struct Large: Equatable { var a = 1, b = 2, c = 3, d = 4 }
        XCTAssertFalse(ValueCell<Large>.isInline)
        XCTAssertTrue(ValueCell<String>.isInline)
        let large = Observable(Large())
        let doubled = Computed { Large(a: large.value.a * 2) }
        XCTAssertEqual(doubled.value.a, 2)
        large.value = Large(a: 5)
        XCTAssertEqual(doubled.value, Large(a: 10))

        final class Payload: Sendable {}
        weak var released: Payload?
        do {
            let payload = Payload()
            released = payload
            let source = Observable(payload)
            let copy = Computed { source.value }
            XCTAssertTrue(copy.value === payload)
        }
        XCTAssertNil(released, "the observable's and the computed's cells released their value")
    }

    /// ```
    ///   a -> parity (a % 2) -> label  (observed)
    /// ```
    func test_equalValue_stopsPropagation() {
        let a = Observable(2)
        let parity = Computed { a.value % 2 }
        let labelRuns = Counter()
        let label = Computed { labelRuns.bump(); return parity.value == 0 ? "even" : "odd" }
        let seen = Log<String>()
        let token = label.observe { seen.append($0.newValue) }
        defer { token.cancel() }

        a.value = 4
        a.value = 6
        XCTAssertEqual(labelRuns.count, 1, "parity did not change: label is not recomputed")
        a.value = 7
        XCTAssertEqual(labelRuns.count, 2)
        XCTAssertEqual(seen.entries, ["odd"])
    }

    func test_equalWrite_isNoChange() {
        let a = Observable(1)
        let seen = Log<Int>()
        let token = a.observe { seen.append($0.newValue) }
        defer { token.cancel() }
        a.value = 1
        XCTAssertEqual(seen.entries, [])
    }

    func test_nonEquatableValues_everyWriteIsAChange() {
        struct Opaque: Sendable { let n: Int }
        let a = Observable(Opaque(n: 1))
        let seen = Log<Int>()
        let token = a.observe { seen.append($0.newValue.n) }
        defer { token.cancel() }
        a.value = Opaque(n: 1)
        XCTAssertEqual(seen.entries, [1])
    }

    struct Boom: Error, Equatable {}

    /// ```
    ///   divisor -> ratio (throws on 0) -> shown (observed)
    /// ```
    func test_error_thenRecovery() throws {
        let divisor = Observable(2)
        let ratio = Computed { () throws -> Int in
            guard divisor.value != 0 else { throw Boom() }
            return 10 / divisor.value
        }
        let changes = Log<Int>()
        let errors = Log<String>()
        let token = ratio.observe(onError: { errors.append("\($0)") }) { changes.append($0.newValue) }
        defer { token.cancel() }

        divisor.value = 0
        XCTAssertThrowsError(try ratio.get()) { XCTAssertTrue($0 is Boom) }
        XCTAssertEqual(errors.entries.count, 1)

        divisor.value = 5
        XCTAssertEqual(try ratio.get(), 2)
        XCTAssertEqual(changes.entries, [2])
    }

    func test_error_isCachedUntilADependencyChanges() {
        let input = Observable(0)
        let runs = Counter()
        let failing = Computed { () throws -> Int in
            runs.bump()
            if input.value == 0 { throw Boom() }
            return input.value
        }
        XCTAssertThrowsError(try failing.get())
        XCTAssertThrowsError(try failing.get())
        XCTAssertEqual(runs.count, 1)
        input.value = 3
        XCTAssertEqual(try failing.get(), 3)
        XCTAssertEqual(runs.count, 2)
    }

    func test_error_failsDependentsThatReadIt() {
        let input = Observable(0)
        let failing = Computed { () throws -> Int in
            if input.value == 0 { throw Boom() }
            return input.value
        }
        let dependent = Computed { try failing.get() * 2 }
        XCTAssertThrowsError(try dependent.get()) { XCTAssertTrue($0 is Boom) }
        input.value = 4
        XCTAssertEqual(try dependent.get(), 8)
    }

    func test_error_recoveryToTheLastGoodValue_isStillAChange() {
        let input = Observable(1)
        let value = Computed { () throws -> Int in
            if input.value == 0 { throw Boom() }
            return 7
        }
        let changes = Log<Int>()
        let token = value.observe(onError: { _ in }) { changes.append($0.newValue) }
        defer { token.cancel() }
        input.value = 0
        input.value = 2
        XCTAssertEqual(changes.entries, [7], "leaving the error state is reported even with an equal value")
    }

    /// ```
    ///   toggle
    ///     |
    ///     a <-----+
    ///     |       |   when toggle is true: a reads b, b reads a
    ///     b ------+
    /// ```
    func test_cycle_isDetectedWithoutLooping() {
        let toggle = Observable(false)
        let holder = ComputedHolder()
        let a = Computed { () throws -> Int in
            if toggle.value, let b = holder.b { return try b.get() + 1 }
            return 1
        }
        let b = Computed { try a.get() + 1 }
        holder.b = b
        XCTAssertEqual(try b.get(), 2)

        toggle.value = true

        XCTAssertThrowsError(try b.get()) { error in
            XCTAssertEqual(error as? ReactiveError, .cycle)
        }
        XCTAssertThrowsError(try a.get()) { error in
            XCTAssertEqual(error as? ReactiveError, .cycle)
        }
        toggle.value = false
        XCTAssertEqual(try a.get(), 1)
        XCTAssertEqual(try b.get(), 2)
    }

    func test_cycle_selfReference_isAnError() {
        let holder = ComputedHolder()
        let me = Computed { () throws -> Int in try (holder.b?.get() ?? 0) + 1 }
        holder.b = me
        XCTAssertThrowsError(try me.get()) { XCTAssertEqual($0 as? ReactiveError, .cycle) }
    }

    /// A 10,000-deep chain is marked and checked with explicit stacks: a change at its head
    /// propagates on a thread whose stack is far too small for one frame per node.
    func test_propagation_doesNotRecurse() {
        let head = Observable(0)
        var last: Computed<Int> = Computed { head.value }
        for _ in 0..<10_000 {
            let previous = last
            last = Computed { previous.value + 1 }
            _ = last.value   // evaluated as built, like the suite's layers
        }
        let tail = last
        let seen = Log<Int>()
        let token = tail.observe { seen.append($0.newValue) }
        defer { token.cancel() }

        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            head.value = 1
            done.signal()
        }
        thread.stackSize = 256 * 1024
        thread.start()
        done.wait()

        XCTAssertEqual(seen.entries, [10_001])
    }

    func test_peek_readsWithoutDepending() {
        let a = Observable(1), b = Observable(10)
        let runs = Counter()
        let sum = Computed { runs.bump(); return a.value + b.peek() }
        let token = sum.observe { _ in }
        defer { token.cancel() }
        b.value = 20
        XCTAssertEqual(runs.count, 1)
        XCTAssertEqual(sum.value, 11, "peek gave the value at the last evaluation")
        a.value = 2
        XCTAssertEqual(sum.value, 22)
    }

    func test_writableComputed_setWritesTheSource() {
        let celsius = Observable(20.0)
        let fahrenheit = WritableComputed(get: { celsius.value * 9 / 5 + 32 },
                                          set: { celsius.value = ($0 - 32) * 5 / 9 })
        XCTAssertEqual(fahrenheit.value, 68)
        fahrenheit.value = 212
        XCTAssertEqual(celsius.value, 100)
        XCTAssertEqual(fahrenheit.value, 212)
    }

    func test_modify_appliesReadAndWriteAtomically() {
        let counter = Observable(0)
        counter.modify { $0 += 5 }
        XCTAssertEqual(counter.value, 5)
    }
}

/// Lets two computeds refer to each other in a test.
final class ComputedHolder: @unchecked Sendable {
    var b: Computed<Int>?
}
