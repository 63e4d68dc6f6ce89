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

        let connection = Connection(fd: pair[0], peer: PeerCredentials(pid: 0, uid: 0, gid: 0), maxLineBytes: 1024,
                                    batchToWaitFor: nil, markHeld: { _ in }, markDirty: { _ in })
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
    /// before goes at once. Two batches in flight: the first one written releases only its lines.
    ///
    ///     queue:   before | ack1 read1 | ack2 after
    ///     batch:     -    |     1      |     2
    func test_linesWaitForTheBatchTheyWereQueuedUnder_andEachBatchReleasesOnlyItsOwn() {
        var pair: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair), 0)
        defer { close(pair[0]); close(pair[1]) }
        _ = fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) | O_NONBLOCK)
        var held = 0
        var unwritten: UInt64? = nil
        let connection = Connection(fd: pair[0], peer: PeerCredentials(pid: 0, uid: 0, gid: 0), maxLineBytes: 1024,
                                    batchToWaitFor: { _ in unwritten }, markHeld: { _ in held += 1 }, markDirty: { _ in })
        connection.write(EncodedLine(body: Array("before\n".utf8)))
        unwritten = 1
        connection.write(EncodedLine(body: Array("ack1\n".utf8), needsSync: true))
        connection.write(EncodedLine(body: Array("read1\n".utf8)))
        unwritten = 2
        connection.write(EncodedLine(body: Array("ack2\n".utf8), needsSync: true))
        connection.write(EncodedLine(body: Array("after\n".utf8)))
        XCTAssertEqual(held, 1, "the server's list needs the connection once")

        guard case .held = connection.flush() else { return XCTFail("expected ack1 to be held") }
        XCTAssertEqual(readAll(pair[1]), "before\n")
        XCTAssertFalse(connection.hasSendableOutput)

        XCTAssertTrue(connection.releaseHeld(through: 1), "batch 2 still holds lines")
        guard case .held = connection.flush() else { return XCTFail("expected ack2 to be held") }
        XCTAssertEqual(readAll(pair[1]), "ack1\nread1\n")

        XCTAssertFalse(connection.releaseHeld(through: 2))
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
