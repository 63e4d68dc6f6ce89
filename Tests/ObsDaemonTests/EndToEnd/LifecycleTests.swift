// The real obsd, started and stopped as an operator or systemd would.
import Foundation
import Glibc
import TestSupport
import XCTest

final class LifecycleTests: XCTestCase {
    func test_noArguments_startsWithEmbeddedDefaults() throws {
        // Root's defaults are system paths; the environment moves them into the sandbox while the
        // command line stays empty (precedence: environment over default).
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox, arguments: [], environment: [
            "OBSD_SOCKET": sandbox.socket, "STATE_DIRECTORY": sandbox.state,
        ])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.state + "/obsd.db"))
        var info = stat()
        XCTAssertEqual(stat(sandbox.state, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700, "a missing state directory is created 0700")
        XCTAssertEqual(stat(sandbox.root + "/run", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700, "a missing socket directory is created 0700")
        XCTAssertEqual(stat(sandbox.socket, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
    }

    func test_sigterm_sendsGoodbye_exitsZero_andRemovesTheSocket() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let idle = try Client(sandbox.socket)
        let busy = try Client(sandbox.socket)
        busy.send("{\"id\":1,\"op\":\"ping\"}\n")
        XCTAssertNotNil(busy.readLine())
        // Load: requests keep arriving while the signal lands.
        let writers = try (0..<8).map { _ in try Client(sandbox.socket) }
        for writer in writers { writer.send(String(repeating: "{\"op\":\"ping\"}\n", count: 2000)) }
        // The writers read their answers as they come, as real clients do.
        let lastLines = LastLines(count: writers.count)
        let readers = DispatchGroup()
        for (index, writer) in writers.enumerated() {
            DispatchQueue.global().async(group: readers) {
                var last: String?
                while let line = writer.readLine() { last = line }
                lastLines.set(index, last)
            }
        }
        let started = Date()
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(timeout: 30), 0, obsd.log)
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "exit within 5 s")
        var goodbye: String?
        while let line = idle.readLine() { goodbye = line }
        XCTAssertEqual(json(goodbye)["event"] as? String, "goodbye")
        XCTAssertEqual(json(goodbye)["reason"] as? String, "shutdown")
        XCTAssertEqual(readers.wait(timeout: .now() + 30), .success)
        for index in writers.indices {
            XCTAssertEqual(json(lastLines.get(index))["event"] as? String, "goodbye", "every connection gets goodbye last")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.socket))
        XCTAssertTrue(obsd.log.contains("received SIGTERM"), obsd.log)
    }

    func test_sigint_stopsGracefullyToo() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        obsd.signal(SIGINT)
        XCTAssertEqual(obsd.waitForExit(), 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.socket))
    }

    func test_sighup_appliesAGoodConfig_andKeepsTheOldOneWhenTheNewIsBad() throws {
        let sandbox = try Sandbox()
        try sandbox.write("max_connections = 100\n", to: sandbox.config)
        let obsd = try ObsdProcess(sandbox, arguments: ["--config", sandbox.config, "--socket", sandbox.socket,
                                                        "--state-dir", sandbox.state])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)

        try sandbox.write("max_connections = 1\n", to: sandbox.config)
        obsd.signal(SIGHUP)
        waitFor("the reload") { obsd.log.contains("reloaded the configuration") }
        let first = try Client(sandbox.socket)
        first.send("{\"op\":\"ping\"}\n")
        XCTAssertNotNil(first.readLine())
        let second = try Client(sandbox.socket)
        XCTAssertEqual(errorCode(second.readLine()), "limit", "the reloaded max_connections applies")

        try sandbox.write("max_connections = 1\nbogus_setting = 3\n", to: sandbox.config)
        obsd.signal(SIGHUP)
        waitFor("the rejected reload") { obsd.log.contains("keeping the running configuration") }
        XCTAssertTrue(obsd.log.contains("obsd.conf:2: unknown setting 'bogus_setting'"), obsd.log)
        XCTAssertTrue(obsd.process.isRunning)
        let third = try Client(sandbox.socket)
        XCTAssertEqual(errorCode(third.readLine()), "limit", "the old configuration is still in force")
        first.send("{\"op\":\"ping\"}\n")
        XCTAssertNotNil(first.readLine(), "existing clients are unaffected")
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
    }

    func test_invalidConfig_refusesToStart_withTheLineNumber() throws {
        let sandbox = try Sandbox()
        try sandbox.write("# comment\ndurability = sometimes\n", to: sandbox.config)
        let obsd = try ObsdProcess(sandbox, arguments: ["--config", sandbox.config])
        XCTAssertEqual(obsd.waitForExit(), 1)
        XCTAssertTrue(obsd.log.contains("obsd.conf:2: bad value 'sometimes' for durability"), obsd.log)
    }

    func test_usageError_exits64_andHelpExits0() throws {
        let sandbox = try Sandbox()
        let bad = try ObsdProcess(sandbox, arguments: ["--nope"])
        XCTAssertEqual(bad.waitForExit(), 64)
        XCTAssertTrue(bad.log.hasSuffix("See 'obsd --help'.\n"), bad.log)
        let help = try ObsdProcess(sandbox, arguments: ["--help"])
        XCTAssertEqual(help.waitForExit(), 0)
        XCTAssertTrue(help.output.hasPrefix("OVERVIEW:"))
        XCTAssertEqual(help.log, "")
    }

    func test_corruptDatabase_refusesToStartNamingTheFile_andCheckFails() throws {
        let sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        let database = sandbox.state + "/obsd.db"
        let garbage = Data(repeating: 0x5A, count: 10_000)
        try garbage.write(to: URL(fileURLWithPath: database))
        let obsd = try ObsdProcess(sandbox)
        XCTAssertEqual(obsd.waitForExit(), 1)
        XCTAssertTrue(obsd.log.contains(database), obsd.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.socket))
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: database)), garbage, "nothing is overwritten")

        let check = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
        XCTAssertEqual(check.waitForExit(), 1)
        XCTAssertTrue(check.output.contains(database), check.output)
    }

    /// `--check` loads the database as start-up does: a database obsd would refuse to start on is
    /// never "ok", and every row that cannot be loaded is listed with its key.
    func test_check_runsTheStartUpLoad_andListsEveryDamagedRowWithItsKey() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let client = try Client(sandbox.socket)
        for index in 0..<50 {
            client.send(#"{"op":"set","key":"k\#(index)","value":"value-\#(index)-xxxxxxxxxxxxxxxx"}"# + "\n")
            XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        }
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
        let database = sandbox.state + "/obsd.db"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: database))
        for (from, to) in [("value-17-", "value-71-"), ("value-42-", "valuE-42-")] {
            let range = try XCTUnwrap(bytes.range(of: Data(from.utf8)))
            bytes.replaceSubrange(range, with: Data(to.utf8))
        }
        try bytes.write(to: URL(fileURLWithPath: database))

        let check = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
        XCTAssertEqual(check.waitForExit(), 1, check.output)
        XCTAssertTrue(check.output.contains("database: \(database) cannot be loaded; 2 problems:"), check.output)
        XCTAssertTrue(check.output.contains(#"  key "k17": damaged"#), check.output)
        XCTAssertTrue(check.output.contains(#"  key "k42": damaged"#), check.output)
        let start = try ObsdProcess(sandbox)
        XCTAssertEqual(start.waitForExit(), 1, start.log)
        XCTAssertTrue(start.log.contains(#"key "k17": damaged"#) && start.log.contains(database), start.log)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: database)), bytes, "nothing is changed")
    }

    func test_anEmptyDatabaseFile_isRefusedAtStart_notTakenForAFreshStore() throws {
        let sandbox = try Sandbox()
        try FileManager.default.createDirectory(atPath: sandbox.state, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: sandbox.state + "/obsd.db", contents: Data())
        let obsd = try ObsdProcess(sandbox)
        XCTAssertEqual(obsd.waitForExit(), 1, obsd.log)
        XCTAssertTrue(obsd.log.contains("\(sandbox.state)/obsd.db exists but holds no obsd schema (0 bytes)"), obsd.log)
        let check = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
        XCTAssertEqual(check.waitForExit(), 1, check.output)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: sandbox.state + "/obsd.db")), Data())
    }

    func test_check_passesOnAHealthyDatabase() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
        let check = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
        XCTAssertEqual(check.waitForExit(), 0, check.output)
        XCTAssertTrue(check.output.contains("database: ok"), check.output)
    }

    func test_journalStream_prefixesLogLinesWithLevels() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox, environment: ["JOURNAL_STREAM": "8:12345"])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
        let lines = obsd.log.split(separator: "\n")
        XCTAssertFalse(lines.isEmpty)
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("<6>") }, obsd.log)
    }
}

/// Last lines read by reader threads.
final class LastLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String?]

    init(count: Int) { lines = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ line: String?) { lock.withLock { lines[index] = line } }
    func get(_ index: Int) -> String? { lock.withLock { lines[index] } }
}
