// Running out of file descriptors: obsd keeps max_connections under its descriptor limit, answers
// every client past either limit with `limit` (it never leaves one hanging in the backlog while it
// could accept), and when accepting cannot succeed at all it waits instead of spinning.
import Foundation
import Glibc
import TestSupport
import XCTest

final class HostileDescriptorTests: XCTestCase {
    /// obsd started under `prlimit --nofile=SOFT:HARD`.
    private func startLimited(_ sandbox: Sandbox, soft: Int, hard: Int) throws -> ObsdProcess {
        let obsd = try ObsdProcess(sandbox, arguments: ["--nofile=\(soft):\(hard)", "--", try builtExecutable("obsd"),
                                                        "--socket", sandbox.socket, "--state-dir", sandbox.state],
                                   executable: "/usr/bin/prlimit")
        obsd.waitUntilListeningOrExit()
        return obsd
    }

    private func softLimit(of pid: Int32) -> Int? {
        let limits = (try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)) ?? ""
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") } ?? ""
        return line.split(separator: " ").compactMap { Int($0) }.first
    }

    /// CPU seconds the process has used (user and system).
    private func cpuSeconds(of pid: Int32) -> Double {
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The highest descriptor number the process has open: the kernel gives out the lowest free
    /// number, and fails (EMFILE) once that is at the soft limit.
    private func highestDescriptor(of pid: Int32) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).compactMap { Int($0) }.max() ?? 0
    }

    func test_theSoftLimitIsRaisedToTheHardOne() throws {
        let sandbox = try Sandbox()
        let obsd = try startLimited(sandbox, soft: 256, hard: 4096)
        XCTAssertEqual(softLimit(of: obsd.pid), 4096)
        XCTAssertFalse(obsd.log.contains("max_connections is"), obsd.log)
        Hostile.report("soft descriptor limit 256, hard 4096", "raised to \(softLimit(of: obsd.pid) ?? 0); max_connections 1024 kept")
    }

    /// A hard limit of 128: max_connections is lowered (and the log says so); of 300 clients the
    /// first ones are served and every other one is answered `limit` and closed.
    func test_aLowDescriptorLimit_lowersMaxConnections_andAnswersTheRestLimit() throws {
        let sandbox = try Sandbox()
        let obsd = try startLimited(sandbox, soft: 128, hard: 128)
        XCTAssertTrue(obsd.process.isRunning, obsd.log)
        // obsd may log the ceiling just after it starts listening.
        XCTAssertTrue(waitFor("the connection ceiling in the log") { obsd.log.contains("serving at most") }, obsd.log)
        let line = obsd.log.split(separator: "\n").first { $0.contains("serving at most") } ?? ""
        let ceiling = try XCTUnwrap(line.split(separator: " ").last.flatMap { Int($0) }, obsd.log)
        XCTAssertLessThan(ceiling, 128)
        var clients: [Client] = []
        var served = 0
        var refused = 0
        var hung = 0
        // A client left hanging waits out its read timeout: after a few, the verdict is in.
        for index in 0..<300 where hung < 5 {
            guard let client = try? Client(sandbox.socket, timeout: 5) else {
                hung += 1
                continue
            }
            clients.append(client)
            // A refused client may find its connection closed before it sends: the answer is
            // waiting for it all the same.
            client.send(#"{"id":\#(index),"op":"ping"}"# + "\n")
            let answer: [String: Any]? = client.readLine().map { json($0) }
            if answer?["ok"] as? Bool == true {
                served += 1
            } else if (answer?["error"] as? [String: Any])?["code"] as? String == "limit" {
                XCTAssertNil(client.readLine(), "closed after `limit`")
                refused += 1
            } else {
                hung += 1
            }
        }
        XCTAssertEqual(served, ceiling)
        XCTAssertEqual(hung, 0)
        XCTAssertEqual(served + refused, 300)
        let logLines = obsd.log.split(separator: "\n").filter { $0.contains("connection refused") }.count
        XCTAssertLessThanOrEqual(logLines, 2, "client-triggered warnings are rate-limited:\n\(obsd.log)")
        Hostile.report("descriptor limit 128", "max_connections lowered to \(ceiling); 300 clients: \(served) served, \(refused) answered limit, \(hung) left hanging; \(logLines) log lines")
    }

    /// The limit lowered under a running obsd (prlimit --pid), below what it holds: accepting
    /// cannot succeed, even with the reserved descriptor. obsd waits instead of spinning and
    /// writes a few lines, not thousands; raised again, it serves the clients that waited.
    func test_outOfDescriptorsAtRunTime_obsdWaitsInsteadOfSpinning_andRecovers() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox)
        let hard = try XCTUnwrap(softLimit(of: obsd.pid))
        var clients = try (0..<5).map { _ in try Client(sandbox.socket, timeout: 20) }
        for client in clients { XCTAssertEqual(client.request(#"{"op":"ping"}"#)?["ok"] as? Bool, true) }

        // No descriptor number left under the limit but the reserve's (once the free numbers
        // below it are taken by clients): the reserve answers every client past it `limit`.
        try prlimit(obsd.pid, soft: highestDescriptor(of: obsd.pid) + 1, hard: hard)
        var refusedByReserve = 0
        var admitted = 0
        while refusedByReserve < 10, admitted < 200 {
            let client = try Client(sandbox.socket, timeout: 20)
            client.send(#"{"op":"ping"}"# + "\n")
            let line = client.readLine()
            if errorCode(line) == "limit" {
                refusedByReserve += 1
            } else {
                XCTAssertEqual(refusedByReserve, 0, "once out of descriptors, no client is admitted: \(line ?? "no answer")")
                XCTAssertEqual(json(line)["ok"] as? Bool, true)
                admitted += 1
            }
            clients.append(client)
        }
        XCTAssertEqual(refusedByReserve, 10, "answered limit by way of the reserved descriptor")

        // No room at all, not even with the reserve: clients wait in the backlog; obsd must not spin.
        try prlimit(obsd.pid, soft: 3, hard: hard)
        let waiting = try (0..<10).map { _ in try Client(sandbox.socket, timeout: 30) }
        for client in waiting { client.send(#"{"op":"ping"}"# + "\n") }
        let cpuBefore = cpuSeconds(of: obsd.pid)
        let wall = Date()
        usleep(2_000_000)
        let cpu = cpuSeconds(of: obsd.pid) - cpuBefore
        let elapsed = Date().timeIntervalSince(wall)
        XCTAssertLessThan(cpu, elapsed / 2, "obsd spun while it could not accept")
        let acceptLines = obsd.log.split(separator: "\n").filter { $0.contains("accept") }.count
        XCTAssertLessThanOrEqual(acceptLines, 3, obsd.log)

        try prlimit(obsd.pid, soft: hard, hard: hard)
        let answered = waiting.filter { json($0.readLine())["ok"] as? Bool == true }.count
        XCTAssertEqual(answered, 10, "the clients that waited are served once descriptors are back")
        Hostile.report("descriptors exhausted at run time", String(format: "%d of 10 clients answered limit through the reserve; with none left: %.2f s CPU in %.1f s, %d log lines; afterwards %d of 10 waiting clients served", refusedByReserve, cpu, elapsed, acceptLines, answered))
    }

    private func prlimit(_ pid: Int32, soft: Int, hard: Int) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        process.arguments = ["--pid", String(pid), "--nofile=\(soft):\(hard)"]
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "prlimit --pid \(pid) --nofile=\(soft):\(hard)")
    }
}
