// A revision names one state, for good: a client that saw revision R and resumes a watch `since` R
// after the daemon restarted must get every change after R, or be told (`compacted` and a
// snapshot) that it cannot. Three ways the restarted daemon could break that, each held here
// through the real obsd, its real database and commit log, and kill -9:
// - revisions of transactions the storage keeps nothing of (ephemeral keys only) were not stored,
//   so a restart went back to the last stored one and gave its numbers again to other changes;
// - a daemon killed with ephemeral keys lost them with no event;
// - a `since` ahead of a single daemon's revision (a daemon with its state in memory started again)
//   replayed nothing and went on as if the client's view were this state's.
import Foundation
import Glibc
import TestSupport
import XCTest

final class RevisionContinuityTests: XCTestCase {
    /// The events of a watch up to its `synced`, read off a new connection.
    private func watch(_ sandbox: Sandbox, since: Int? = nil) throws -> (events: [[String: Any]], client: Client) {
        let client = try Client(sandbox.socket)
        let sinceField = since.map { #","since":\#($0)"# } ?? ""
        XCTAssertEqual(client.request(#"{"op":"watch","keys":["**"]\#(sinceField)}"#)?["ok"] as? Bool, true)
        var events: [[String: Any]] = []
        while let line = client.readLine() {
            let event = json(line)
            events.append(event)
            if event["event"] as? String == "synced" { break }
        }
        return (events, client)
    }

    private func rev(_ client: Client) -> Int? { client.request(#"{"op":"stats"}"#)?["rev"] as? Int }

    /// A durable daemon with `a` set at revision 1 and `presence` set ephemeral at revision 2 by
    /// `owner`, whose connection stays open.
    private func aKeyAndAnEphemeralKey() throws -> (Sandbox, ObsdProcess, owner: Client) {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(try Client(sandbox.socket).request(#"{"op":"set","key":"a","value":1}"#)?["rev"] as? Int, 1)
        let owner = try Client(sandbox.socket)
        XCTAssertEqual(owner.request(#"{"op":"set","key":"presence","value":"on","ephemeral":true}"#)?["rev"] as? Int, 2)
        return (sandbox, obsd, owner)
    }

    func test_revisionsOfEphemeralKeysOnly_areNotGivenAgainAfterARestart() throws {
        // Revisions 2 (the set) and 3 (its removal at the stop) change only an ephemeral key.
        var (sandbox, obsd, owner) = try aKeyAndAnEphemeralKey()
        let (_, watcher) = try watch(sandbox)
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
        withExtendedLifetime(owner) {}
        var lines: [String] = []
        while let line = watcher.readLine() { lines.append(line) }
        XCTAssertEqual(lines.compactMap { json($0)["rev"] as? Int }, [3], "the watcher saw the ephemeral key removed at revision 3: \(lines)")

        obsd = try ObsdProcess.started(sandbox)
        let again = try Client(sandbox.socket)
        XCTAssertEqual(rev(again), 3, "the restart goes on from the last revision, not from the last that stored a key")
        XCTAssertEqual(again.request(#"{"op":"set","key":"b","value":2}"#)?["rev"] as? Int, 4)
        XCTAssertEqual(again.request(#"{"op":"set","key":"c","value":3}"#)?["rev"] as? Int, 5)
        // The watcher comes back after both writes, resuming after the last revision it saw.
        let (events, _) = try watch(sandbox, since: 3)
        XCTAssertEqual(events.compactMap { $0["key"] as? String }, ["b", "c"], "\(events)")
        XCTAssertEqual(events.last?["rev"] as? Int, 5)
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
    }

    func test_aStoppingDaemon_removesEveryEphemeralKeyBeforeAnyGoodbye() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox)
        // Connections in no particular order: owners and watchers mixed.
        var owners: [Client] = []
        var watchers: [Client] = []
        for index in 0..<8 {
            let owner = try Client(sandbox.socket)
            XCTAssertEqual(owner.request(#"{"op":"set","key":"presence.\#(index)","value":"on","ephemeral":true}"#)?["ok"] as? Bool, true)
            owners.append(owner)
            if index % 2 == 0 { watchers.append(try watch(sandbox).client) }
        }
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
        for (index, watcher) in watchers.enumerated() {
            var lines: [String] = []
            while let line = watcher.readLine() { lines.append(line) }
            let deleted = Set(lines.map { json($0) }.filter { $0["event"] as? String == "delete" }.compactMap { $0["key"] as? String })
            XCTAssertEqual(deleted, Set((0..<8).map { "presence.\($0)" }), "watcher \(index): \(lines)")
            XCTAssertEqual(lines.last.map { json($0)["event"] as? String }, "goodbye", "watcher \(index)")
        }
        _ = owners
    }

    /// An owner whose output is over its limit when the daemon stops gets its `goodbye` later than
    /// the others (once it drains, or at the flush deadline): its ephemeral keys must go before
    /// the others' `goodbye` all the same.
    func test_aStoppingDaemon_removesTheEphemeralKeysOfAConnectionOverItsOutputLimitBeforeAnyGoodbye() throws {
        let sandbox = try Sandbox()
        try sandbox.write("output_buffer_bytes = 64K\n", to: sandbox.config)
        let obsd = try ObsdProcess.started(sandbox, ["--config", sandbox.config])
        let writer = try Client(sandbox.socket)
        let big = String(repeating: "v", count: 900_000)
        XCTAssertEqual(writer.request(#"{"op":"set","key":"big","value":"\#(big)"}"#)?["ok"] as? Bool, true)
        let owner = try Client(sandbox.socket)
        XCTAssertEqual(owner.request(#"{"op":"set","key":"presence","value":"on","ephemeral":true}"#)?["ok"] as? Bool, true)
        let (_, watcher) = try watch(sandbox)
        // The owner asks for the big value twice and reads nothing: the first answer puts its
        // output over the limit (more than the socket takes), the second waits behind it.
        XCTAssertTrue(owner.send(#"{"op":"get","key":"big"}"# + "\n" + #"{"op":"get","key":"big"}"# + "\n"))
        XCTAssertTrue(waitFor("the owner's first get to be answered") {
            (writer.request(#"{"op":"stats"}"#)?["requests"] as? [String: Any])?["get"] as? Int == 1
        })
        obsd.signal(SIGTERM)
        var lines: [String] = []
        while let line = watcher.readLine() { lines.append(line) }
        let events = lines.map { json($0) }
        XCTAssertEqual(events.last?["event"] as? String, "goodbye", "\(lines)")
        XCTAssertEqual(events.filter { $0["event"] as? String == "delete" }.compactMap { $0["key"] as? String }, ["presence"],
                       "the watcher saw the owner's key go before its goodbye: \(lines)")
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
        withExtendedLifetime(owner) {}
    }

    func test_killedWithAnEphemeralKey_aWatchResumedFromBeforeGetsASnapshotWithoutIt() throws {
        var (sandbox, obsd, owner) = try aKeyAndAnEphemeralKey()
        obsd.kill9()
        withExtendedLifetime(owner) {}

        obsd = try ObsdProcess.started(sandbox)
        let again = try Client(sandbox.socket)
        XCTAssertEqual(again.request(#"{"op":"get","key":"presence"}"#)?["ok"] as? Bool, false, "gone with its connection")
        XCTAssertEqual(rev(again), 3, "the restart took a revision for the ephemeral keys it lost")
        XCTAssertTrue(obsd.log.contains("did not stop cleanly"), obsd.log)
        // A watcher that saw revision 2 (the key set) resumes: the key's removal had no event, so
        // it must be told its view cannot be brought up to date by a replay.
        let (events, _) = try watch(sandbox, since: 2)
        XCTAssertEqual(events.first?["event"] as? String, "compacted", "\(events)")
        XCTAssertEqual(events.filter { $0["event"] as? String == "initial" }.compactMap { $0["key"] as? String }, ["a"])
        XCTAssertEqual(events.last?["rev"] as? Int, 3)
        // A watcher that resumes from the restart's own revision has nothing to catch up on.
        let (current, _) = try watch(sandbox, since: 3)
        XCTAssertEqual(current.map { $0["event"] as? String }, ["synced"], "\(current)")

        // A clean stop leaves nothing to take a revision for: the next start goes on at 3.
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
        obsd = try ObsdProcess.started(sandbox)
        XCTAssertEqual(rev(try Client(sandbox.socket)), 3)
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
    }

    func test_sinceAheadOfADaemonWithItsStateInMemory_getsCompactedAndASnapshot() throws {
        let sandbox = try Sandbox()
        var obsd = try ObsdProcess.started(sandbox, ["--memory"])
        var client = try Client(sandbox.socket)
        for value in 1...5 { XCTAssertEqual(client.request(#"{"op":"set","key":"old","value":\#(value)}"#)?["ok"] as? Bool, true) }
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)

        // Started again, the state is a new one: revision 1 is another change than before.
        obsd = try ObsdProcess.started(sandbox, ["--memory"])
        client = try Client(sandbox.socket)
        XCTAssertEqual(client.request(#"{"op":"set","key":"new","value":true}"#)?["rev"] as? Int, 1)
        let (events, _) = try watch(sandbox, since: 5)
        XCTAssertEqual(events.map { $0["event"] as? String }, ["compacted", "initial", "synced"], "\(events)")
        XCTAssertEqual(events[1]["key"] as? String, "new")
        XCTAssertEqual(events[2]["rev"] as? Int, 1)
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
    }
}
