// Watches against a real 3-member etcd cluster: every change in revision order, from a past
// revision on, compaction, cancellation, and a watch held back rather than read into memory.
import EtcdClient
import TestSupport
import XCTest

class EtcdWatchTests: SharedClusterTestCase {
    func test_watchFromARevision_seesEveryChangeInOrder_withRevisions() throws {
        let prefix = uniquePrefix()
        let start = try driver.put(prefix + "k0", "0").header.revision
        var expected: [(kind: WatchEvent.Kind, key: String, value: String, revision: Int64)] = [
            (.put, prefix + "k0", "0", start),
        ]
        // Half the changes before the watch exists (history), half after (live).
        for index in 1..<100 {
            let key = prefix + "k\(index % 7)"
            if index % 10 == 0 {
                guard case .deleteRange(let deleted) = try driver.succeed(.deleteRange(DeleteRangeRequest(key: bytes(key)))) else {
                    return XCTFail("not a delete answer")
                }
                if deleted.deleted == 1 { expected.append((.delete, key, "", deleted.header.revision)) }
            } else {
                expected.append((.put, key, "\(index)", try driver.put(key, "\(index)").header.revision))
            }
            if index == 50 {
                let watch = driver.client.watch(.prefix(bytes(prefix), startRevision: start))
                watchID = watch
            }
        }
        let watch = try XCTUnwrap(watchID)
        let updates = driver.watchUpdates(watch) { $0.events.count >= expected.count || $0.end != nil }
        XCTAssertNil(updates.end)
        guard case .created? = updates.first else { return XCTFail("the first update is not created: \(updates)") }
        let events = updates.events
        XCTAssertEqual(events.count, expected.count)
        for (event, want) in zip(events, expected) {
            XCTAssertEqual(event.kind, want.kind)
            XCTAssertEqual(text(event.kv.key), want.key)
            XCTAssertEqual(text(event.kv.value), want.value)
            XCTAssertEqual(event.revision, want.revision)
        }
        // Each message's header revision is at least that of its events.
        for case .events(let revision, let batch) in updates {
            XCTAssertGreaterThanOrEqual(revision, batch.map(\.revision).max() ?? 0)
        }
    }

    private var watchID: EtcdRequestID?

    func test_watchWithPrevKV_carriesTheKeyBefore() throws {
        let prefix = uniquePrefix()
        _ = try driver.put(prefix + "a", "before")
        let watch = driver.client.watch(.prefix(bytes(prefix), prevKV: true))
        XCTAssertTrue(driver.created(watch))
        _ = try driver.put(prefix + "a", "after")
        _ = try driver.succeed(.deleteRange(DeleteRangeRequest(key: bytes(prefix + "a"))))
        let events = driver.watchUpdates(watch) { $0.events.count >= 2 }.events
        XCTAssertEqual(events.map(\.kind), [.put, .delete])
        XCTAssertEqual(events.map { $0.prevKV.map { text($0.value) } }, ["before", "after"])
    }

    func test_progressNotify_reportsTheRevisionWhileNothingChanges() throws {
        let prefix = uniquePrefix()
        var request = WatchRequest.prefix(bytes(prefix))
        request.progressNotify = true
        let watch = driver.client.watch(request)
        XCTAssertTrue(driver.created(watch))
        let elsewhere = try driver.put(uniquePrefix() + "k", "v").header.revision
        let updates = driver.watchUpdates(watch) { updates in
            updates.contains { if case .progress(let revision) = $0 { revision >= elsewhere } else { false } }
        }
        XCTAssertTrue(updates.events.isEmpty)
    }

    func test_oneTransaction_isOneRevisionOfEvents() throws {
        let prefix = uniquePrefix()
        let watch = driver.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(driver.created(watch))
        let txn = try driver.txn(Txn(success: ["a", "b", "c"].map {
            .put(PutRequest(key: bytes(prefix + $0), value: bytes($0)))
        }))
        let events = driver.watchUpdates(watch) { $0.events.count >= 3 }.events
        XCTAssertEqual(events.map { text($0.kv.key) }, ["a", "b", "c"].map { prefix + $0 })
        XCTAssertEqual(Set(events.map(\.revision)), [txn.header.revision])
    }

    func test_watchFromACompactedRevision_reportsCompacted() throws {
        let prefix = uniquePrefix()
        let old = try driver.put(prefix + "k", "1").header.revision
        let newer = try driver.put(prefix + "k", "2").header.revision
        _ = try driver.succeed(.compact(revision: newer, physical: true))
        let watch = driver.client.watch(.prefix(bytes(prefix), startRevision: old))
        let updates = driver.watchUpdates(watch) { $0.end != nil }
        guard case .compacted(let compactRevision)? = updates.end else { return XCTFail("not compacted: \(updates)") }
        XCTAssertGreaterThanOrEqual(compactRevision, newer)
        XCTAssertTrue(updates.events.isEmpty)
    }

    /// A watch canceled right after a change it covers was acknowledged: its event is then
    /// queued, or on its way, or not yet sent; whichever, none reaches the caller after the cancel.
    func test_canceledWatch_reportsNothingMore() throws {
        let prefix = uniquePrefix()
        let writer = try ClientDriver(cluster)
        let kept = driver.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(driver.created(kept))
        for round in 1...20 {
            let canceled = driver.client.watch(.prefix(bytes(prefix)))
            XCTAssertTrue(driver.created(canceled))
            let before = driver.updates[canceled]?.count
            _ = try writer.put(prefix + "a", "\(round)")
            driver.client.cancelWatch(canceled)
            // The other watch of the same range sees the change: by then the canceled one would have.
            driver.watchUpdates(kept) { $0.events.count == round }
            driver.pump(timeout: 0.05)
            XCTAssertEqual(driver.updates[canceled]?.count, before, "round \(round)")
        }
    }

    /// A bound far below the events pending. The client reads only inside `takeCompletions`, so
    /// while the loop does not call, etcd and TCP hold the events and the client holds nothing;
    /// each call then returns at most about the bound (plus what one read of the socket completes),
    /// the descriptor stays readable until everything is taken, and every event arrives, in order.
    func test_boundedCompletions_holdTheWatchBack_losingNothing() throws {
        let prefix = uniquePrefix()
        let bound = 4096
        let slow = try ClientDriver(cluster) { $0.maxBytesPerTake = bound }
        let watch = slow.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(slow.created(watch))
        let value = String(repeating: "v", count: 512)
        var revisions: [Int64] = []
        for index in 0..<200 { revisions.append(try driver.put(prefix + "k\(index)", value).header.revision) }
        let (events, largest, calls) = takeEvents(of: watch, from: slow, count: revisions.count)
        XCTAssertEqual(events.map(\.revision), revisions)
        // libcurl hands over at most 16 KiB a read; all 200 events at once would be ~140 KB.
        XCTAssertLessThan(largest, bound + 20_000)
        XCTAssertGreaterThan(calls, 5)
    }

    /// A watch from an old revision gets etcd's history in one message (up to 1,000 revisions,
    /// without fragments): a gRPC watch hands its events over about a round's bytes at a time,
    /// cut at revision boundaries, so that its caller never applies the whole message in one
    /// turn; every event arrives, in order. (A gateway watch hands a message over whole.)
    func test_aHistoryInOneMessage_isHandedOverARoundsBytesAtATime() throws {
        try XCTSkipIf(Self.api != .grpc, "a gateway watch hands a message over whole")
        let prefix = uniquePrefix()
        let bound = 4096
        let value = String(repeating: "v", count: 512)
        var revisions: [Int64] = []
        for index in 0..<200 { revisions.append(try driver.put(prefix + "k\(index)", value).header.revision) }
        let slow = try ClientDriver(cluster) { $0.maxBytesPerTake = bound }
        let watch = slow.client.watch(.prefix(bytes(prefix), startRevision: revisions[0]))
        let (events, largest, calls) = takeEvents(of: watch, from: slow, count: revisions.count)
        XCTAssertEqual(events.map(\.revision), revisions)
        // All 200 at once would be ~140 KB; a round takes what is left of its bound, then a slice.
        XCTAssertLessThan(largest, 2 * bound + 1_000)
        XCTAssertGreaterThan(calls, 20)
    }

    /// Takes `watch`'s events from `slow`'s completions, call after call, until `count` came (or
    /// 30 s passed): the events, the largest call's estimated size as the client counts it
    /// (CompletionSize.swift), and how many calls brought events.
    private func takeEvents(of watch: EtcdRequestID, from slow: ClientDriver, count: Int) -> (events: [WatchEvent], largest: Int, calls: Int) {
        var largest = 0
        var calls = 0
        var events: [WatchEvent] = []
        let deadline = Date().addingTimeInterval(30)
        while events.count < count, Date() < deadline {
            var descriptor = pollfd(fd: slow.client.completionFD, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 5000) == 1 else { break }
            var taken: [WatchEvent] = []
            for case .watch(watch, .events(_, let batch)) in slow.client.takeCompletions() { taken += batch }
            largest = max(largest, taken.reduce(64) { $0 + 64 + 48 + $1.kv.key.count + $1.kv.value.count })
            calls += taken.isEmpty ? 0 : 1
            events += taken
        }
        return (events, largest, calls)
    }

    /// One message a call, over a backlog of more than a thousand: every change comes, in order
    /// (the backlog's handed-over messages are dropped from its front now and then, not one by one).
    func test_aLongBacklog_isHandedOverInOrder() throws {
        let prefix = uniquePrefix()
        let slow = try ClientDriver(cluster) { $0.maxBytesPerTake = 1 }
        let watch = slow.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(slow.created(watch))
        var revisions: [Int64] = []
        for index in 0..<1_100 { revisions.append(try driver.put(prefix + "k\(index % 10)", "\(index)").header.revision) }
        var seen: [Int64] = []
        let deadline = Date().addingTimeInterval(60)
        while seen.count < revisions.count, Date() < deadline {
            var descriptor = pollfd(fd: slow.client.completionFD, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 5000) == 1 else { break }
            for case .watch(watch, .events(_, let batch)) in slow.client.takeCompletions() { seen += batch.map(\.revision) }
        }
        XCTAssertEqual(seen, revisions)
    }

    /// A gRPC watch is never paused: what one call has no room for waits in the watch's backlog,
    /// and a backlog past its bound stops the stream: what it holds is handed over, in order,
    /// then the watch ends `watchBehind` (not an outage), and a watch from the revision after the
    /// last taken brings the rest. (The gateway's watches pause instead, and never end so.)
    func test_gRPCWatchBacklogOverItsBound_handsOverWhatItKept_thenEndsWatchBehind() throws {
        try XCTSkipIf(Self.api != .grpc, "the gateway's watches pause instead of keeping a backlog")
        let prefix = uniquePrefix()
        let slow = try ClientDriver(cluster) {
            $0.maxBytesPerTake = 1
            $0.maxWatchBacklogBytes = 8192
        }
        let watch = slow.client.watch(.prefix(bytes(prefix)))
        XCTAssertTrue(slow.created(watch))
        var revisions: [Int64] = []
        for index in 0..<100 { revisions.append(try driver.put(prefix + "k\(index)", String(repeating: "v", count: 1024)).header.revision) }
        let updates = slow.watchUpdates(watch) { $0.end != nil }
        guard case .failed(.watchBehind(8192))? = updates.end else { return XCTFail("\(updates)") }
        let seen = updates.events.map(\.revision)
        // At least what the backlog held when it passed its bound: 8 messages of 1 KiB.
        XCTAssertGreaterThan(seen.count, 8)
        XCTAssertLessThan(seen.count, revisions.count)
        XCTAssertEqual(seen, Array(revisions.prefix(seen.count)), "a prefix of the changes, in order")
        XCTAssertNil(slow.client.endpoint(ofWatch: watch), "the watch is gone")
        // Watched again from the next revision (and again whenever it is behind): the rest, each once.
        var current = slow.client.watch(.prefix(bytes(prefix), startRevision: seen.last! + 1))
        var rest: [Int64] = []
        let deadline = Date().addingTimeInterval(30)
        while seen.count + rest.count < revisions.count, Date() < deadline {
            var descriptor = pollfd(fd: slow.client.completionFD, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 5000) == 1 else { break }
            for completion in slow.client.takeCompletions() {
                switch completion {
                case .watch(current, .events(_, let batch)): rest += batch.map(\.revision)
                case .watch(current, .failed(.watchBehind)):
                    current = slow.client.watch(.prefix(bytes(prefix), startRevision: (rest.last ?? seen.last!) + 1))
                case .watch(current, .failed(let error)): return XCTFail("\(error)")
                default: break
                }
            }
        }
        XCTAssertEqual(seen + rest, revisions)
    }
}

/// Every test above again, over etcd's JSON gateway (`etcd_api = json`). Each is named here:
/// XCTest on Linux finds a test class by the test methods it declares, not those it inherits.
/// (The gRPC backlog's test, inherited all the same, skips: the gateway's watches pause instead.)
final class EtcdWatchTestsOverTheGateway: EtcdWatchTests {
    override class var api: EtcdAPI { .json }

    override func test_watchFromARevision_seesEveryChangeInOrder_withRevisions() throws { try super.test_watchFromARevision_seesEveryChangeInOrder_withRevisions() }
    override func test_watchWithPrevKV_carriesTheKeyBefore() throws { try super.test_watchWithPrevKV_carriesTheKeyBefore() }
    override func test_progressNotify_reportsTheRevisionWhileNothingChanges() throws { try super.test_progressNotify_reportsTheRevisionWhileNothingChanges() }
    override func test_oneTransaction_isOneRevisionOfEvents() throws { try super.test_oneTransaction_isOneRevisionOfEvents() }
    override func test_watchFromACompactedRevision_reportsCompacted() throws { try super.test_watchFromACompactedRevision_reportsCompacted() }
    override func test_canceledWatch_reportsNothingMore() throws { try super.test_canceledWatch_reportsNothingMore() }
    override func test_boundedCompletions_holdTheWatchBack_losingNothing() throws { try super.test_boundedCompletions_holdTheWatchBack_losingNothing() }
    override func test_aLongBacklog_isHandedOverInOrder() throws { try super.test_aLongBacklog_isHandedOverInOrder() }
}
