import Glibc
import ObsCore
import TestSupport
import XCTest
@testable import ObsDaemon

/// The output queue against a real socket pair with a small send buffer, so writev stops in the
/// middle of heads and bodies and the queue must resume at the exact byte.
final class ConnectionOutputTests: XCTestCase {
    func test_partialWrites_resumeAtTheExactByte_acrossHeadsAndBodies() {
        let pair = smallBufferPair()
        defer { close(pair[0]); close(pair[1]) }

        let flushList = FlushList()
        let connection = Connection(fd: pair[0], peer: PeerCredentials(pid: 0, uid: 0, gid: 0), gate: nil, flushList: flushList)
        var expected: [UInt8] = []
        let shared = Array(String(repeating: "b", count: 700).utf8) + [0x0A]
        for index in 0..<3000 {
            let head = index % 3 == 0 ? [] : Array("{\"watch\":\(index)".utf8)
            let body = index % 5 == 0 ? shared : Array("\(index)-body\n".utf8)
            connection.write(EncodedLine(head: head, body: body))
            expected += head + body
        }
        XCTAssertEqual(connection.pendingBytes, expected.count)

        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 3000)
        var flushes = 0
        while received.count < expected.count {
            if case .failed = connection.flush() { XCTFail("flush failed"); return }
            flushes += 1
            while true {
                let count = read(pair[1], &buffer, Int.random(in: 1...buffer.count))
                guard count > 0 else { break }
                received += buffer[..<count]
            }
            XCTAssertEqual(connection.pendingBytes, expected.count - received.count)
            guard flushes < 100_000 else { break }
        }
        XCTAssertEqual(received, expected)
        XCTAssertGreaterThan(flushes, 10, "the small buffer should have forced many partial writes")
        if case .done = connection.flush() {} else { XCTFail("nothing should be left") }
    }

    /// A line waits for the batch it was queued under, and so does everything after it; what came
    /// before goes at once. Two turns, each with its batch. (A real group commit, over a store
    /// kept in memory.)
    ///
    ///     queue:   before | ack1 read1 | ack2 after
    ///     batch:     -    |     1      |     2
    func test_linesWaitForTheBatchTheyWereQueuedUnder_andEachBatchReleasesOnlyItsOwn() throws {
        let gated = try GatedConnection()
        let (connection, storage, flushList) = (gated.connection, gated.storage, gated.flushList)

        connection.write(EncodedLine(body: Array("before\n".utf8)))
        try gated.commit(1)
        connection.write(EncodedLine(body: Array("ack1\n".utf8), needsSync: true))
        connection.write(EncodedLine(body: Array("read1\n".utf8)))
        XCTAssertEqual(flushList.connections.count, 1, "listed for the turn's flush once")
        guard case .held = connection.flush() else { return XCTFail("expected ack1 to be held") }
        XCTAssertEqual(readAll(gated.peer), "before\n")
        XCTAssertFalse(connection.hasSendableOutput)

        try gated.writeBatch()
        XCTAssertEqual(storage.written, 1)
        try gated.commit(2)
        connection.write(EncodedLine(body: Array("ack2\n".utf8), needsSync: true))
        connection.write(EncodedLine(body: Array("after\n".utf8)))
        guard case .held = connection.flush() else { return XCTFail("expected ack2 to be held") }
        XCTAssertEqual(readAll(gated.peer), "ack1\nread1\n")

        try gated.writeBatch()
        XCTAssertEqual(storage.written, 2)
        guard case .done = connection.flush() else { return XCTFail("expected everything written") }
        XCTAssertEqual(readAll(gated.peer), "ack2\nafter\n")
    }

    /// A shared line is kept once per turn for every connection that gets it with the same head;
    /// another head, or another body, is another line; nothing is kept while the turn's flush
    /// runs, and the memory is taken again after it.
    func test_sharedLines_keepOneCopyPerBodyAndHead_forOneTurn() {
        let lines = SharedLines()
        func line(_ head: String, _ body: String, _ sharing: UInt64) -> UnsafeRawBufferPointer? {
            Array(head.utf8).withUnsafeBytes { head in
                Array(body.utf8).withUnsafeBytes { body in lines.line(head: head, body: body, sharing: sharing) }
            }
        }
        let head1 = #"{"event":"change","watch":1"#
        let head2 = #"{"event":"change","watch":2"#
        let first = line(head1, ",\"key\":\"k\"}\n", 7)
        XCTAssertEqual(first.map { String(decoding: $0, as: UTF8.self) }, head1 + ",\"key\":\"k\"}\n")
        XCTAssertEqual(line(head1, ",\"key\":\"k\"}\n", 7)?.baseAddress, first?.baseAddress, "the same line: one copy")
        let other = line(head2, ",\"key\":\"k\"}\n", 7)
        XCTAssertEqual(other.map { String(decoding: $0, as: UTF8.self) }, head2 + ",\"key\":\"k\"}\n")
        XCTAssertNotEqual(other?.baseAddress, first?.baseAddress)
        XCTAssertEqual(line(head1, ",\"key\":\"k\"}\n", 7)?.baseAddress, first?.baseAddress, "both heads kept")
        XCTAssertNotEqual(line(head1, ",\"key\":\"j\"}\n", 8)?.baseAddress, first?.baseAddress)

        lines.close()
        XCTAssertNil(line(head1, ",\"key\":\"k\"}\n", 7), "nothing is taken while the flush runs")
        lines.reset()
        let again = line(head1, ",\"key\":\"x\"}\n", 9)
        XCTAssertEqual(again?.baseAddress, first?.baseAddress, "after the turn the memory is taken again")
        XCTAssertNotEqual(line(head1, ",\"key\":\"k\"}\n", 7)?.baseAddress, first?.baseAddress,
                          "a line of the last turn is not found again")

        XCTAssertNil(line("", String(repeating: "x", count: SharedLines.chunkBytes + 1), 10), "longer than a chunk")
        let big = String(repeating: "y", count: SharedLines.chunkBytes - 1) + "\n"
        for sharing in 0..<UInt64(SharedLines.maxChunks - 1) { XCTAssertNotNil(line("", big, 100 + sharing)) }
        XCTAssertNil(line("", big, 200), "the turn's room is used up")
    }

    /// Lines shared with other connections and the connection's own, interleaved, through a small
    /// send buffer: the queue resumes at the exact byte, also when a flush leaves shared lines
    /// unwritten and the turn's memory is then used for other lines.
    func test_partialWrites_ofSharedAndOwnLines_resumeAtTheExactByte_acrossTurns() {
        let pair = smallBufferPair()
        defer { close(pair[0]); close(pair[1]) }

        let flushList = FlushList()
        let peer = PeerCredentials(pid: 0, uid: 0, gid: 0)
        let connection = Connection(fd: pair[0], peer: peer, gate: nil, flushList: flushList)
        // Another connection, never flushed, that takes the turn's memory for other lines.
        let other = Connection(fd: -1, peer: peer, gate: nil, flushList: flushList)
        var expected: [UInt8] = []
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 3000)
        var sharing: UInt64 = 0
        var random = SplitMix64(seed: 16)
        for turn in 0..<200 {
            for index in 0..<Int(random.next() % 40) {
                let head = Array("{\"event\":\"change\",\"watch\":\(random.next() % 3 + 1)".utf8)
                let body = Array(",\"turn\":\(turn),\"line\":\(index)\(String(repeating: "b", count: Int(random.next() % 300)))}\n".utf8)
                sharing += 1
                if random.next() % 4 == 0 {
                    connection.write(EncodedLine(body: body))
                    expected += body
                } else {
                    head.withUnsafeBytes { head in
                        body.withUnsafeBytes { body in connection.write(head: head, body: body, needsSync: false, sharing: sharing) }
                    }
                    expected += head + body
                }
            }
            XCTAssertLessThanOrEqual(connection.pendingBytes, expected.count - received.count)
            flushList.shared.close()
            if case .failed = connection.flush() { return XCTFail("flush failed") }
            flushList.shared.reset()
            let junk = Array(String(repeating: "J", count: 2000).utf8) + [0x0A]
            junk.withUnsafeBytes { junk in
                for filler in 0..<8 {
                    other.write(head: UnsafeRawBufferPointer(start: nil, count: 0), body: junk, needsSync: false, sharing: 1_000_000 + UInt64(turn * 8 + filler))
                }
            }
            other.discardOutput()
            flushList.shared.reset()
            let count = read(pair[1], &buffer, Int(random.next() % 3000) + 1)
            if count > 0 { received += buffer[..<count] }
        }
        while received.count < expected.count {
            if case .failed = connection.flush() { return XCTFail("flush failed") }
            let count = read(pair[1], &buffer, buffer.count)
            if count > 0 { received += buffer[..<count] }
        }
        XCTAssertEqual(String(decoding: received, as: UTF8.self), String(decoding: expected, as: UTF8.self))
        if case .done = connection.flush() {} else { XCTFail("nothing should be left") }
    }

    /// A shared line that waits for a batch is queued by reference; once the batch is written
    /// (before the turn's flush, as the daemon writes it) the flush writes it from the turn's copy,
    /// after the lines before it.
    func test_aSharedLineWaitingForABatch_goesByReference_whenTheBatchIsWrittenBeforeTheFlush() throws {
        let gated = try GatedConnection()
        let connection = gated.connection
        let shared = gated.writeShared
        let writeBatch = gated.writeBatch

        try gated.commit(1)
        shared("event1\n", 1)
        XCTAssertEqual(connection.referencedBytes, 7, "queued by reference, not copied")
        XCTAssertFalse(connection.hasSendableOutput, "it waits for batch 1")
        try writeBatch()
        XCTAssertTrue(connection.hasSendableOutput)
        XCTAssertEqual(connection.referencedBytes, 7)
        guard case .done = connection.flush() else { return XCTFail("expected everything written") }
        XCTAssertEqual(readAll(gated.peer), "event1\n")

        try gated.commit(2)
        connection.write(EncodedLine(body: Array("ack2\n".utf8), needsSync: true))
        shared("event2\n", 2)
        XCTAssertEqual(connection.referencedBytes, 7)
        XCTAssertFalse(connection.hasSendableOutput, "both wait for batch 2")
        try writeBatch()
        guard case .done = connection.flush() else { return XCTFail("expected everything written") }
        XCTAssertEqual(readAll(gated.peer), "ack2\nevent2\n")
        XCTAssertEqual(connection.referencedBytes, 0)
    }

    /// While a line waits for its batch, a shared line after it waits too, and a flush before the
    /// batch is written copies it (the turn's memory is taken again after the flush): the order on
    /// the connection is the order of the writes.
    func test_aSharedLine_afterAHeldOne_waitsForTheSameBatch() throws {
        let gated = try GatedConnection()
        let connection = gated.connection
        let shared = gated.writeShared

        shared("event0\n", 1)
        try gated.commit(1)
        connection.write(EncodedLine(body: Array("ack1\n".utf8), needsSync: true))
        shared("event1\n", 2)
        XCTAssertGreaterThan(connection.referencedBytes, 0)
        guard case .held = connection.flush() else { return XCTFail("expected ack1 to be held") }
        XCTAssertEqual(readAll(gated.peer), "event0\n")
        XCTAssertEqual(connection.referencedBytes, 0, "what waits is copied by the flush")
        // The turn's memory is taken again: the held line must not refer to it.
        gated.flushList.shared.reset()
        shared("junk!!\n", 3)

        try gated.writeBatch()
        guard case .done = connection.flush() else { return XCTFail("expected everything written") }
        XCTAssertEqual(readAll(gated.peer), "ack1\nevent1\njunk!!\n")
    }

    /// A non-blocking socket pair whose first end has a 4 KiB send buffer, so that writes stop short.
    private func smallBufferPair() -> [Int32] {
        var pair: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair), 0)
        var small: Int32 = 4096
        setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        _ = fcntl(pair[0], F_SETFL, fcntl(pair[0], F_GETFL) | O_NONBLOCK)
        _ = fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) | O_NONBLOCK)
        return pair
    }

    private func readAll(_ fd: Int32) -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A connection over a socket pair whose lines wait for the batches of a real group commit, over a
/// store kept in memory; `peer` is the reading end.
private final class GatedConnection {
    private var pair: [Int32] = [0, 0]
    let storage: GroupCommitStorage
    let store: Store
    let gate: WriteGate
    let flushList = FlushList()
    let connection: Connection

    var peer: Int32 { pair[1] }

    init() throws {
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair), 0)
        _ = fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) | O_NONBLOCK)
        storage = GroupCommitStorage(writer: StorageWriter(MemoryStorage()), strict: false, retryInterval: 1)
        store = try Store(storage: MemoryStorage(), clock: ManualClock())
        gate = WriteGate(storage: storage, store: store, log: Logger(level: .error, journal: false))
        connection = Connection(fd: pair[0], peer: PeerCredentials(pid: 0, uid: 0, gid: 0), gate: gate, flushList: flushList)
    }

    deinit {
        try? storage.close()
        close(pair[0])
        close(pair[1])
    }

    /// Queues `text` as a line other connections get too (its body number `sharing`), waiting for
    /// the batch of the changes committed before it.
    func writeShared(_ text: String, _ sharing: UInt64) {
        Array(text.utf8).withUnsafeBytes {
            connection.write(head: UnsafeRawBufferPointer(start: nil, count: 0), body: $0, needsSync: true, sharing: sharing)
        }
    }

    /// Commits a change of `k` at `rev` into the open batch.
    func commit(_ rev: UInt64) throws {
        var transaction = StoredTransaction(rev: rev)
        transaction.putKeys = [StoredKey(key: "k", value: .int(Int64(rev)), rev: rev, createdRev: 1, version: rev)]
        try storage.commit(transaction)
    }

    /// Ends a turn as the daemon does before its flush: the turn's batch written and its lines
    /// released.
    func writeBatch() throws {
        try gate.endTurn(now: 0)
    }
}
