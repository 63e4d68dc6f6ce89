// One event to many connections over the real socket: obsd keeps such a line once per turn for
// every connection that gets it (Server/SharedLines.swift), and these tests check what each client
// reads.
import Foundation
import Glibc
import TestSupport
import XCTest

final class FanOutTests: XCTestCase {
    /// 24 connections watch `hot`, each with the patterns `hot` and `*` (an event matches twice, and
    /// is sent once), after making 0, 1 or 2 other watches first, so that their `hot` watch is
    /// watch 1, 2 or 3. One publisher pipelines 3,000 sets of 200-byte values, with a publish on
    /// channel `hot` after every 500th, and reads every answer before any watcher reads: the
    /// watchers' sockets fill, and what each turn could not write waits in obsd. Then every watcher
    /// reads every line whole, once, in order, under its own watch id; one sends a ping halfway
    /// (its answer comes among the events).
    func test_eventsForManyConnections_arriveWholeOnceAndInOrder_underEachWatchsOwnID() throws {
        try fanOut { _ in ["--memory"] }
    }

    /// The same with a database: every line waits for its batch to be written, which happens at
    /// the end of the turn, before the lines are written (from the turn's one copy).
    func test_eventsForManyConnections_arriveWholeOnceAndInOrder_inStrictDurability() throws {
        try fanOut { ["--durability", "strict", "--state-dir", $0.state] }
    }

    /// `mode`: obsd's arguments for its storage, given the sandbox.
    private func fanOut(_ mode: (Sandbox) -> [String]) throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket] + mode(sandbox))
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let count = 24
        let watchers = try (0..<count).map { _ in try Client(sandbox.socket) }
        for (index, watcher) in watchers.enumerated() {
            for other in 0..<index % 3 {
                watcher.send("{\"op\":\"watch\",\"keys\":[\"other.\(other)\"],\"initial\":false}\n")
                XCTAssertEqual(json(watcher.readLine())["watch"] as? Int, other + 1)
                XCTAssertEqual(json(watcher.readLine())["event"] as? String, "synced")
            }
            watcher.send("{\"op\":\"watch\",\"keys\":[\"hot\",\"*\"],\"initial\":false}\n")
            XCTAssertEqual(json(watcher.readLine())["watch"] as? Int, index % 3 + 1)
            XCTAssertEqual(json(watcher.readLine())["event"] as? String, "synced")
        }
        let sets = 3000
        let value: @Sendable (Int) -> String = { "\($0)-" + String(repeating: "v", count: 200) }
        // A hundred at a time, each hundred answered before the next is sent: a turn's lines then
        // fit the room obsd keeps for lines shared in one turn, and go by reference.
        let publisher = try Client(sandbox.socket)
        for first in stride(from: 0, to: sets, by: 100) {
            var lines = ""
            for index in first..<first + 100 {
                lines += "{\"op\":\"set\",\"key\":\"hot\",\"value\":\"\(value(index))\"}\n"
                if index % 500 == 499 { lines += "{\"op\":\"publish\",\"channel\":\"hot\",\"payload\":\(index)}\n" }
            }
            publisher.send(lines)
            for answer in 0..<lines.utf8.count(where: { $0 == 0x0A }) {
                guard json(publisher.readLine())["ok"] as? Bool == true else { return XCTFail("answer \(first + answer) missing or failed") }
            }
        }

        let pinging = 1
        let failures = LastLines(count: count)
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let watcher = watchers[index]
            let watch = index % 3 + 1
            var lastRev = 0
            var changes = 0
            var publishes = 0
            var pinged = false
            while changes < sets || publishes < sets / 500 || (index == pinging && !pinged) {
                if index == pinging, changes == sets / 2, !pinged {
                    watcher.send("{\"id\":\"p\",\"op\":\"ping\"}\n")
                }
                guard let line = watcher.readLine() else {
                    return failures.set(index, "stopped after \(changes) changes and \(publishes) publishes")
                }
                let object = json(line)
                if index == pinging, object["id"] as? String == "p", object["ok"] as? Bool == true, !pinged {
                    pinged = true
                    continue
                }
                guard object["watch"] as? Int == watch else { return failures.set(index, "not watch \(watch): \(line)") }
                switch object["event"] as? String {
                case "change":
                    guard object["new"] as? String == value(changes),
                          changes == 0 || object["old"] as? String == value(changes - 1),
                          let rev = object["rev"] as? Int, rev > lastRev else {
                        return failures.set(index, "change \(changes) wrong: \(line)")
                    }
                    lastRev = rev
                    changes += 1
                case "publish":
                    guard object["payload"] as? Int == publishes * 500 + 499, changes == (publishes + 1) * 500 else {
                        return failures.set(index, "publish \(publishes) wrong or out of place: \(line)")
                    }
                    publishes += 1
                default:
                    return failures.set(index, "unexpected line: \(line)")
                }
            }
        }
        for index in 0..<count { XCTAssertNil(failures.get(index), "watcher \(index)") }
        withExtendedLifetime(obsd) {}
    }
}
