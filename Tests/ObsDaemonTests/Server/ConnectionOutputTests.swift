import Glibc
import ObsCore
import XCTest
@testable import ObsDaemon

/// The output queue against a real socket pair with a small send buffer, so writev stops in the
/// middle of heads and bodies and the queue must resume at the exact byte.
final class ConnectionOutputTests: XCTestCase {
    func test_partialWrites_resumeAtTheExactByte_acrossHeadsAndBodies() {
        var pair: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair), 0)
        defer { close(pair[0]); close(pair[1]) }
        var small: Int32 = 4096
        setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        _ = fcntl(pair[0], F_SETFL, fcntl(pair[0], F_GETFL) | O_NONBLOCK)
        _ = fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) | O_NONBLOCK)

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
    /// before goes at once. Two batches: the first one written releases only its lines. (A real
    /// group commit and writer thread, over a store kept in memory.)
    ///
    ///     queue:   before | ack1 read1 | ack2 after
    ///     batch:     -    |     1      |     2
    func test_linesWaitForTheBatchTheyWereQueuedUnder_andEachBatchReleasesOnlyItsOwn() throws {
        var pair: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair), 0)
        defer { close(pair[0]); close(pair[1]) }
        _ = fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) | O_NONBLOCK)
        let storage = try GroupCommitStorage(writer: try StorageWriter(MemoryStorage()), strict: false, retryInterval: 1)
        defer { try? storage.close() }
        let store = try Store(storage: MemoryStorage(), clock: ManualClock())
        let gate = WriteGate(storage: storage, store: store, log: Logger(level: .error, journal: false))
        let flushList = FlushList()
        let connection = Connection(fd: pair[0], peer: PeerCredentials(pid: 0, uid: 0, gid: 0), gate: gate, flushList: flushList)
        func commit(_ rev: UInt64) throws {
            var transaction = StoredTransaction(rev: rev)
            transaction.putKeys = [StoredKey(key: "k", value: .int(Int64(rev)), rev: rev, createdRev: 1, version: rev)]
            try storage.commit(transaction)
        }
        func waitForWriter() throws {
            var descriptor = pollfd(fd: gate.completionFD!, events: Int16(POLLIN), revents: 0)
            XCTAssertEqual(poll(&descriptor, 1, -1), 1)
            try gate.endTurn(now: 0, writerFinished: true)
        }

        connection.write(EncodedLine(body: Array("before\n".utf8)))
        try commit(1)
        connection.write(EncodedLine(body: Array("ack1\n".utf8), needsSync: true))
        connection.write(EncodedLine(body: Array("read1\n".utf8)))
        try storage.endTurn(now: 0)
        try commit(2)
        connection.write(EncodedLine(body: Array("ack2\n".utf8), needsSync: true))
        connection.write(EncodedLine(body: Array("after\n".utf8)))
        XCTAssertEqual(flushList.connections.count, 1, "listed for the turn's flush once")

        guard case .held = connection.flush() else { return XCTFail("expected ack1 to be held") }
        XCTAssertEqual(readAll(pair[1]), "before\n")
        XCTAssertFalse(connection.hasSendableOutput)

        try waitForWriter()
        XCTAssertEqual(storage.written, 1)
        guard case .held = connection.flush() else { return XCTFail("expected ack2 to be held") }
        XCTAssertEqual(readAll(pair[1]), "ack1\nread1\n")

        try storage.endTurn(now: 0)
        try waitForWriter()
        XCTAssertEqual(storage.written, 2)
        guard case .done = connection.flush() else { return XCTFail("expected everything written") }
        XCTAssertEqual(readAll(pair[1]), "ack2\nafter\n")
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
