// The hostile suite: obsd tried as an attacker and an unlucky operator would (kill -9, damaged
// files, full and read-only disks, fuzzed input, exhausted descriptors, slow consumers, other
// users, symlinks, signals under load). docs/operations.md has the table of what obsd promises
// under each; these tests hold it to that.
//
// Two settings: quick (the default, run by CI with everything else: each test takes seconds) and
// long, by hand, for more trials and minutes of fuzzing:
//
//     OBSD_HOSTILE=long swift test --disable-swift-testing --filter Hostile
//
// Every test prints one line of figures (`hostile: NAME: ...`: trials, inputs, lost writes,
// resident memory), and the seed of its random choices: OBSD_HOSTILE_SEED=N repeats a run.
import Foundation
import Glibc
import TestSupport
import XCTest

enum Hostile {
    /// Whether the long setting was asked for.
    static let isLong = ProcessInfo.processInfo.environment["OBSD_HOSTILE"] == "long"

    /// `quick` in the quick setting, `long` in the long one.
    static func pick<T>(quick: T, long: T) -> T { isLong ? long : quick }

    /// The seed of a test's random choices: OBSD_HOSTILE_SEED, or a new one each run.
    static func seed() -> UInt64 {
        if let text = ProcessInfo.processInfo.environment["OBSD_HOSTILE_SEED"], let seed = UInt64(text) { return seed }
        return UInt64.random(in: 1...UInt64.max)
    }

    /// Prints the test's figures on one line.
    static func report(_ name: String, seed: UInt64? = nil, _ figures: String) {
        print("hostile: \(name): \(figures)\(seed.map { " (seed \($0))" } ?? "") [\(isLong ? "long" : "quick")]")
    }
}

extension ObsdProcess {
    /// Starts obsd on the sandbox's socket and `state` (none with `--memory` among `more`), with
    /// `more` arguments, and waits until it listens or exits.
    static func started(_ sandbox: Sandbox, state: String? = nil, _ more: [String] = [],
                        environment: [String: String] = [:]) throws -> ObsdProcess {
        let stateArguments = more.contains("--memory") ? [] : ["--state-dir", state ?? sandbox.state]
        let obsd = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket] + stateArguments + more,
                                   environment: environment)
        obsd.waitUntilListeningOrExit()
        return obsd
    }

    /// Waits until obsd accepts connections or has exited (what the test expects decides which).
    func waitUntilListeningOrExit() {
        waitFor("obsd to listen or exit; log:\n\(log)", timeout: 60) {
            !process.isRunning || (try? Client(sandbox.socket)) != nil
        }
    }

    /// Stops obsd at once and waits for it.
    func kill9() {
        signal(SIGKILL)
        _ = waitForExit()
    }
}

extension Client {
    /// Sends one request and returns its answer, skipping events.
    func request(_ line: String) -> [String: Any]? {
        guard send(line + "\n") else { return nil }
        while let answer = readLine() {
            let object = json(answer)
            if object["event"] == nil { return object }
        }
        return nil
    }

    /// Everything the store holds, as `dump` answers it (nil if the daemon does not answer).
    func dump() -> NSDictionary? {
        guard var answer = request(#"{"op":"dump"}"#), answer["ok"] as? Bool == true else { return nil }
        answer["id"] = nil
        return answer as NSDictionary
    }
}

/// The resident memory of process `pid` in KiB, from /proc.
func residentKiB(of pid: Int32) -> Int { processStatusKiB(pid, "VmRSS:") }

/// What client threads collect: named counts, and items (keys acknowledged, say).
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [String: Int] = [:]
    private var collected: [String] = []

    func count(_ name: String, by amount: Int = 1) { lock.withLock { counts[name, default: 0] += amount } }
    func add(_ item: String) { lock.withLock { collected.append(item) } }
    subscript(_ name: String) -> Int { lock.withLock { counts[name, default: 0] } }
    var items: [String] { lock.withLock { collected } }
    var all: [String: Int] { lock.withLock { counts } }
}
