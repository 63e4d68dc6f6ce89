// kill -9 at a random moment while several clients pipeline writes, in normal and strict mode:
// after a restart every acknowledged write is there, and revisions go on after the last one.
import Foundation
import Glibc
import TestSupport
import XCTest

final class HostileCrashTests: XCTestCase {
    func test_kill9AtRandomMoments_normal_losesNoAcknowledgedWrite() throws {
        try crashTrials(durability: "normal")
    }

    func test_kill9AtRandomMoments_strict_losesNoAcknowledgedWrite() throws {
        try crashTrials(durability: "strict")
    }

    /// The same with the commit log's newest file handed to the checkpoint every 4 KiB (a debug
    /// build's OBSD_TEST_LOG_ROTATE_BYTES), so that the kill also falls while a file is started,
    /// folded into the database or deleted.
    func test_kill9AtRandomMoments_whileLogFilesAreRotatedAndFolded_normal() throws {
        try crashTrials(durability: "normal", environment: ["OBSD_TEST_LOG_ROTATE_BYTES": "4096"])
    }

    func test_kill9AtRandomMoments_whileLogFilesAreRotatedAndFolded_strict() throws {
        try crashTrials(durability: "strict", environment: ["OBSD_TEST_LOG_ROTATE_BYTES": "4096"])
    }

    /// Acknowledged writes of one trial: key names and the highest revision answered.
    private final class Acknowledged: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var keys: [String] = []
        private(set) var lastRev = 0

        func add(_ key: String, rev: Int) {
            lock.withLock {
                keys.append(key)
                lastRev = max(lastRev, rev)
            }
        }

        var snapshot: ([String], Int) { lock.withLock { (keys, lastRev) } }
    }

    private func crashTrials(durability: String, environment: [String: String] = [:]) throws {
        let trials = Hostile.pick(quick: 10, long: 100)
        let seed = Hostile.seed()
        var random = SplitMix64(seed: seed)
        var acknowledgedTotal = 0
        var lostTotal = 0
        for trial in 0..<trials {
            let sandbox = try Sandbox()
            let arguments = ["--durability", durability]
            let obsd = try ObsdProcess.started(sandbox, arguments, environment: environment)
            XCTAssertTrue(obsd.process.isRunning, obsd.log)
            let acknowledged = Acknowledged()
            let writers = DispatchGroup()
            for writer in 0..<4 {
                let client = try Client(sandbox.socket, timeout: 10)
                DispatchQueue.global().async(group: writers) {
                    // Windows of 16 pipelined sets; each answer is matched to its request by id.
                    var next = 0
                    while true {
                        let window = (next..<next + 16)
                        let lines = window.map { #"{"id":\#($0),"op":"set","key":"t\#(writer).\#($0)","value":\#($0)}"# + "\n" }
                        guard client.send(lines.joined()) else { return }
                        for _ in window {
                            guard let line = client.readLine() else { return }
                            let answer = json(line)
                            guard answer["ok"] as? Bool == true, let id = answer["id"] as? Int else { return }
                            acknowledged.add("t\(writer).\(id)", rev: answer["rev"] as? Int ?? 0)
                        }
                        next += 16
                    }
                }
            }
            // The random moment: somewhere in the first few hundred milliseconds of writing.
            waitFor("the first acknowledged write") { !acknowledged.snapshot.0.isEmpty }
            usleep(UInt32.random(in: 0...300_000, using: &random))
            obsd.kill9()
            XCTAssertEqual(writers.wait(timeout: .now() + 60), .success)
            let (keys, lastRev) = acknowledged.snapshot

            let restarted = try ObsdProcess.started(sandbox, arguments, environment: environment)
            let reader = try Client(sandbox.socket)
            var lost: [String] = []
            for chunk in stride(from: 0, to: keys.count, by: 500) {
                let part = keys[chunk..<min(chunk + 500, keys.count)]
                reader.send(part.map { #"{"op":"get","key":"\#($0)"}"# + "\n" }.joined())
                for key in part where json(reader.readLine())["ok"] as? Bool != true { lost.append(key) }
            }
            XCTAssertEqual(lost, [], "trial \(trial): acknowledged writes lost after kill -9")
            let after = reader.request(#"{"op":"set","key":"after","value":1}"#)
            XCTAssertGreaterThan(after?["rev"] as? Int ?? 0, lastRev, "trial \(trial): revisions go on after the last acknowledged one")
            restarted.kill9()
            acknowledgedTotal += keys.count
            lostTotal += lost.count
        }
        Hostile.report("kill -9 during writes (\(durability))", seed: seed,
                       "\(trials) trials, \(acknowledgedTotal) acknowledged writes, \(lostTotal) lost")
    }
}
