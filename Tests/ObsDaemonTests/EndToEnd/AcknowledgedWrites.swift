// What the daemon's crash tests share: the writes a daemon acknowledged, and the check that every
// one of them survives a kill -9.
import Foundation
import Glibc
import TestSupport
import XCTest

/// Writes acknowledged by the daemon, recorded by the test's writing threads.
final class AcknowledgedWrites: @unchecked Sendable {
    private let lock = NSLock()
    private var indexes: [Int] = []
    private var lastRev = 0

    func add(index: Int, rev: Int) {
        lock.withLock {
            indexes.append(index)
            lastRev = max(lastRev, rev)
        }
    }

    var count: Int { lock.withLock { indexes.count } }
    var snapshot: ([Int], Int) { lock.withLock { (indexes, lastRev) } }
}

extension XCTestCase {
    /// Kills `obsd` with SIGKILL once `minimum` writes are acknowledged, waits for the writers to
    /// stop, restarts obsd on the same state, and checks that every acknowledged write (key `k.N`
    /// with value N) is there and that revisions go on after the last acknowledged one.
    func killAndCheckAcknowledgedWrites(_ obsd: ObsdProcess, _ sandbox: Sandbox, arguments: [String],
                                        acknowledged: AcknowledgedWrites, minimum: Int, writing: DispatchGroup,
                                        file: StaticString = #filePath, line: UInt = #line) throws {
        waitFor("some acknowledged writes") { acknowledged.count >= minimum }
        obsd.signal(SIGKILL)
        XCTAssertEqual(writing.wait(timeout: .now() + 60), .success, file: file, line: line)
        _ = obsd.waitForExit()
        let (indexes, lastRev) = acknowledged.snapshot
        XCTAssertGreaterThanOrEqual(indexes.count, minimum, file: file, line: line)

        let restarted = try ObsdProcess(sandbox, arguments: arguments)
        XCTAssertTrue(restarted.waitUntilListening(), restarted.log, file: file, line: line)
        let checker = try Client(sandbox.socket)
        var lost: [Int] = []
        for chunk in stride(from: 0, to: indexes.count, by: 1000) {
            let part = indexes[chunk..<min(chunk + 1000, indexes.count)]
            checker.send(part.map { "{\"op\":\"get\",\"key\":\"k.\($0)\"}\n" }.joined())
            for index in part where json(checker.readLine())["value"] as? Int != index { lost.append(index) }
        }
        XCTAssertEqual(lost, [], "acknowledged writes lost after kill -9", file: file, line: line)
        checker.send("{\"op\":\"set\",\"key\":\"after\",\"value\":1}\n")
        XCTAssertGreaterThan(json(checker.readLine())["rev"] as? Int ?? 0, lastRev, "revisions continue from the stored counter",
                             file: file, line: line)
        restarted.signal(SIGTERM)
        XCTAssertEqual(restarted.waitForExit(), 0, file: file, line: line)
    }
}
