// A watch resumed `since` a revision of another run of the daemon (`watch` with `run`): revisions
// alone cannot tell whether the state continues the one the client saw. A state restored from a
// backup, a crash that left a revision sent but never written, or a `--memory` daemon started
// again number new changes with revisions the client saw for others; once writes take the daemon
// to the client's `since`, a replay would leave the client's view wrong with no word. Here through
// the real obsd, its real database and kill -9: the daemon that does not continue the named run
// answers `compacted` and a snapshot; a clean restart still resumes.
import CSQLite
import Foundation
import Glibc
import ObsCore
import TestSupport
import XCTest

final class RunLineageTests: XCTestCase {
    /// The daemon's run, from `hello`.
    private func run(_ sandbox: Sandbox) throws -> String {
        let run = try Client(sandbox.socket).request(#"{"op":"hello"}"#)?["run"] as? String
        XCTAssertEqual(run?.count, 16, "hello names the run")
        return run ?? ""
    }

    /// The events of a watch of every key resumed `since` in `run`, up to its `synced`.
    private func resume(_ sandbox: Sandbox, since: Int, run: String?) throws -> [[String: Any]] {
        let client = try Client(sandbox.socket)
        let runField = run.map { #","run":"\#($0)""# } ?? ""
        XCTAssertEqual(client.request(#"{"op":"watch","keys":["**"],"since":\#(since)\#(runField)}"#)?["ok"] as? Bool, true)
        var events: [[String: Any]] = []
        while let line = client.readLine() {
            let event = json(line)
            events.append(event)
            if event["event"] as? String == "synced" { break }
        }
        return events
    }

    private func set(_ sandbox: Sandbox, _ key: String, _ value: Int) -> Int? {
        (try? Client(sandbox.socket))?.request(#"{"op":"set","key":"\#(key)","value":\#(value)}"#)?["rev"] as? Int
    }

    private func stop(_ obsd: ObsdProcess) {
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
    }

    private func names(_ events: [[String: Any]], _ kind: String) -> [String] {
        events.filter { $0["event"] as? String == kind }.compactMap { $0["key"] as? String }
    }

    func test_aCleanRestart_resumesAWatchThatNamesTheRunItSaw() throws {
        let sandbox = try Sandbox()
        var obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(set(sandbox, "a", 1), 1)
        XCTAssertEqual(set(sandbox, "b", 1), 2)
        let seenIn = try run(sandbox)
        stop(obsd)

        obsd = try ObsdProcess.started(sandbox)
        XCTAssertNotEqual(try run(sandbox), seenIn, "every start is a run of its own")
        XCTAssertEqual(set(sandbox, "c", 1), 3)
        let events = try resume(sandbox, since: 2, run: seenIn)
        XCTAssertEqual(events.map { $0["event"] as? String }, ["change", "synced"], "the state continues the run: a replay, no snapshot: \(events)")
        XCTAssertEqual(names(events, "change"), ["c"])

        // Restarted again with no write: the run before the last is not the one this state
        // continues, so a client that slept through a run gets a snapshot (one more than needed at
        // worst, never a wrong replay).
        stop(obsd)
        obsd = try ObsdProcess.started(sandbox)
        let slept = try resume(sandbox, since: 2, run: seenIn)
        XCTAssertEqual(slept.first?["event"] as? String, "compacted", "\(slept)")
        XCTAssertEqual(names(slept, "initial"), ["a", "b", "c"])
        stop(obsd)
    }

    func test_aStateRestoredFromABackup_writtenPastTheRevisionAWatcherSaw_givesTheWatcherASnapshot() throws {
        let sandbox = try Sandbox()
        var obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(set(sandbox, "a", 1), 1)
        stop(obsd)
        // The backup, as operations.md says: obsd.db after a clean stop.
        let database = sandbox.state + "/obsd.db", backup = sandbox.root + "/backup.db"
        try FileManager.default.copyItem(atPath: database, toPath: backup)

        obsd = try ObsdProcess.started(sandbox)
        for value in 1...3 { XCTAssertEqual(set(sandbox, "b", value), 1 + value) }
        let seenIn = try run(sandbox)
        // A watcher has seen revision 4 (b = 3) in this run.
        stop(obsd)

        // The backup restored; new writes take the revision to 5 before the watcher is back.
        try FileManager.default.removeItem(atPath: database)
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
        try FileManager.default.copyItem(atPath: backup, toPath: database)
        obsd = try ObsdProcess.started(sandbox)
        for value in 1...4 { XCTAssertEqual(set(sandbox, "c", value), 1 + value) }

        let events = try resume(sandbox, since: 4, run: seenIn)
        XCTAssertEqual(events.first?["event"] as? String, "compacted",
                       "revisions 2-4 are other changes here than the watcher saw: a replay of 5 alone would leave b in its view: \(events)")
        XCTAssertEqual(names(events, "initial"), ["a", "c"])
        XCTAssertEqual(events.last?["rev"] as? Int, 5)
        // A client that names no run is taken on trust, as before.
        XCTAssertEqual(try resume(sandbox, since: 4, run: nil).map { $0["event"] as? String }, ["change", "synced"])
        stop(obsd)
    }

    /// A copy of the database taken while obsd runs, with SQLite's online backup (as operations.md
    /// suggests), holds the state as of the last checkpoint, but not the run's ephemeral keys. A
    /// run is stored as the one that left a state only at its clean stop, so such a copy names the
    /// run before, whose revision it has moved past: a watcher of the copied run that saw exactly
    /// the copy's revision (with the ephemeral key) gets a snapshot without the key.
    func test_aCopyTakenWhileRunning_putBack_doesNotResumeTheRunItWasCopiedFrom() throws {
        let sandbox = try Sandbox()
        var obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(set(sandbox, "a", 1), 1)
        let before = try run(sandbox)
        stop(obsd)

        obsd = try ObsdProcess.started(sandbox)
        let copied = try run(sandbox)
        let owner = try Client(sandbox.socket)
        XCTAssertEqual(owner.request(#"{"op":"set","key":"presence","value":"on","ephemeral":true}"#)?["rev"] as? Int, 2)
        // The watcher's view at revision 2 holds the ephemeral key.
        XCTAssertEqual(names(try resume(sandbox, since: 1, run: copied), "change"), ["presence"])
        // The copy, once the checkpoint has folded revision 2 into the database.
        let database = sandbox.state + "/obsd.db", copy = sandbox.root + "/copy.db"
        XCTAssertTrue(waitFor("revision 2 in the database's rows") {
            (try? SQLiteStorage(path: database, mode: .check).load().rev) == 2
        })
        try onlineBackup(database, to: copy)
        XCTAssertEqual(try SQLiteStorage(path: copy, mode: .check).load().rev, 2)
        obsd.kill9()
        withExtendedLifetime(owner) {}

        // The copy put back in place of everything in the state directory.
        for name in try FileManager.default.contentsOfDirectory(atPath: sandbox.state) where name.hasPrefix("obsd.") && name != "obsd.lock" {
            try FileManager.default.removeItem(atPath: sandbox.state + "/" + name)
        }
        try FileManager.default.copyItem(atPath: copy, toPath: database)
        obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(try Client(sandbox.socket).request(#"{"op":"ping"}"#)?["rev"] as? Int, 2)
        let events = try resume(sandbox, since: 2, run: copied)
        XCTAssertEqual(events.map { $0["event"] as? String }, ["compacted", "initial", "synced"],
                       "revision 2 here has no ephemeral key: a replay of nothing would leave it in the watcher's view: \(events)")
        XCTAssertEqual(names(events, "initial"), ["a"])
        XCTAssertEqual(try resume(sandbox, since: 1, run: before).first?["event"] as? String, "compacted", "the state moved past the run before")
        stop(obsd)
    }

    /// `sqlite3 DATABASE ".backup COPY"`, through SQLite's own online backup.
    private func onlineBackup(_ database: String, to copy: String) throws {
        var source: OpaquePointer?, destination: OpaquePointer?
        defer { sqlite3_close(source); sqlite3_close(destination) }
        XCTAssertEqual(sqlite3_open_v2(database, &source, SQLITE_OPEN_READONLY, nil), SQLITE_OK)
        XCTAssertEqual(sqlite3_open_v2(copy, &destination, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil), SQLITE_OK)
        let backup = try XCTUnwrap(sqlite3_backup_init(destination, "main", source, "main"))
        XCTAssertEqual(sqlite3_backup_step(backup, -1), SQLITE_DONE)
        XCTAssertEqual(sqlite3_backup_finish(backup), SQLITE_OK)
    }

    func test_aRunKilledAfterARevision_thatRevisionIsNotResumedIntoTheRestartsOwn() throws {
        let sandbox = try Sandbox()
        var obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(set(sandbox, "a", 1), 1)
        let seenIn = try run(sandbox)
        obsd.kill9()

        // The restart takes revision 2 for what the killed run lost. A client of the killed run
        // can have seen a revision 2 of its own (one sent while its write waited for a full disk):
        // that is not this revision 2.
        obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(try Client(sandbox.socket).request(#"{"op":"ping"}"#)?["rev"] as? Int, 2)
        let events = try resume(sandbox, since: 2, run: seenIn)
        XCTAssertEqual(events.map { $0["event"] as? String }, ["compacted", "initial", "synced"], "\(events)")
        // The revision the killed run stored last cannot be resumed across the lost one either.
        XCTAssertEqual(try resume(sandbox, since: 1, run: seenIn).first?["event"] as? String, "compacted")
        // This run's own revision resumes.
        XCTAssertEqual(try resume(sandbox, since: 2, run: try run(sandbox)).map { $0["event"] as? String }, ["synced"])
        stop(obsd)

        // A run killed before it wrote anything (its one write waited for a full disk, say, and
        // never reached its log file) leaves an empty log file: the same.
        obsd = try ObsdProcess.started(sandbox)
        let idle = try run(sandbox)
        obsd.kill9()
        obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(try Client(sandbox.socket).request(#"{"op":"ping"}"#)?["rev"] as? Int, 3)
        XCTAssertEqual(try resume(sandbox, since: 3, run: idle).map { $0["event"] as? String }, ["compacted", "initial", "synced"])
        stop(obsd)
    }

    func test_aDaemonWithItsStateInMemory_startedAgainAtTheSameRevision_givesASnapshot() throws {
        let sandbox = try Sandbox()
        var obsd = try ObsdProcess.started(sandbox, ["--memory"])
        for value in 1...3 { XCTAssertEqual(set(sandbox, "old", value), value) }
        let seenIn = try run(sandbox)
        stop(obsd)

        // At revision 3 again, with other changes: not ahead of the daemon, so only the run tells.
        obsd = try ObsdProcess.started(sandbox, ["--memory"])
        for value in 1...3 { XCTAssertEqual(set(sandbox, "new", value), value) }
        let events = try resume(sandbox, since: 3, run: seenIn)
        XCTAssertEqual(events.map { $0["event"] as? String }, ["compacted", "initial", "synced"], "\(events)")
        XCTAssertEqual(names(events, "initial"), ["new"])
        stop(obsd)
    }

    func test_theRunField_isChecked() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(set(sandbox, "a", 1), 1)
        let client = try Client(sandbox.socket)
        let wrongType = client.request(#"{"op":"watch","keys":["a"],"since":1,"run":7}"#)
        XCTAssertEqual((wrongType?["error"] as? [String: Any])?["code"] as? String, "bad_request", "\(wrongType ?? [:])")
        // A run this daemon never gave out is no error: it cannot be resumed from.
        for unknown in ["not a run", "0123456789abcdef", "", String(repeating: "F", count: 16)] {
            XCTAssertEqual(try resume(sandbox, since: 1, run: unknown).first?["event"] as? String, "compacted", unknown)
        }
        stop(obsd)
    }
}
