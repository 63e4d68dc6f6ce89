// SIGTERM and SIGHUP while many clients pipeline requests. SIGTERM: every request a client managed
// to send is answered (done, or `shutting_down`), then `goodbye`, then the connection closes; what
// was acknowledged is on disk and what was refused was not applied. SIGHUP: reloads change nothing
// for the clients.
import Foundation
import Glibc
import TestSupport
import XCTest

final class HostileSignalTests: XCTestCase {
    /// One pipelining client's record.
    private final class Record: @unchecked Sendable {
        var sent = 0
        var done: [Int] = []
        var refused: [Int] = []
        var other = 0
        var goodbye = false
    }

    func test_sigtermUnderLoad_answersEveryRequestSent_thenSaysGoodbye() throws {
        let clientCount = Hostile.pick(quick: 100, long: 350)
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox)
        let records = (0..<clientCount).map { _ in Record() }
        let tally = Tally()
        let finished = DispatchGroup()
        for (index, record) in records.enumerated() {
            let client = try Client(sandbox.socket, timeout: 30)
            finished.enter()
            Thread.detachNewThread {
                defer { finished.leave() }
                var next = 0
                var open = true
                while open {
                    // A window of ten requests, each its own send: after the stop, a send either
                    // delivers a whole request or fails.
                    var window = 0
                    for _ in 0..<10 {
                        let request = next % 3 == 0 ? #"{"id":\#(next),"op":"ping"}"#
                            : #"{"id":\#(next),"op":"set","key":"c\#(index).\#(next)","value":\#(next)}"#
                        guard client.send(request + "\n") else {
                            open = false
                            break
                        }
                        record.sent += 1
                        window += 1
                        next += 1
                    }
                    // Read this window's answers (all of them, at the end).
                    var wanted = open ? window : Int.max
                    while wanted > 0, let line = client.readLine() {
                        let answer = json(line)
                        if answer["event"] as? String == "goodbye" {
                            record.goodbye = true
                            open = false
                            continue
                        }
                        wanted -= 1
                        let id = answer["id"] as? Int ?? -1
                        if answer["ok"] as? Bool == true {
                            record.done.append(id)
                        } else if errorCode(line) == "shutting_down" {
                            record.refused.append(id)
                        } else {
                            record.other += 1
                        }
                        tally.count("answers")
                    }
                    if wanted > 0 && wanted != Int.max { open = false }
                }
            }
        }
        waitFor("the clients to be busy") { tally["answers"] >= clientCount * 30 }
        obsd.signal(SIGTERM)
        XCTAssertEqual(finished.wait(timeout: .now() + 120), .success)
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)

        let sent = records.reduce(0) { $0 + $1.sent }
        let done = records.reduce(0) { $0 + $1.done.count }
        let refused = records.reduce(0) { $0 + $1.refused.count }
        let other = records.reduce(0) { $0 + $1.other }
        let goodbyes = records.filter(\.goodbye).count
        XCTAssertEqual(sent - done - refused - other, 0, "requests sent but never answered")
        XCTAssertEqual(other, 0)
        XCTAssertEqual(goodbyes, clientCount)

        // What was acknowledged is there; what was refused was not applied.
        let restarted = try ObsdProcess.started(sandbox)
        let reader = try Client(sandbox.socket)
        var lost = 0
        var applied = 0
        for (index, record) in records.enumerated() {
            for id in record.done where id % 3 != 0 {
                if reader.request(#"{"op":"get","key":"c\#(index).\#(id)"}"#)?["value"] as? Int != id { lost += 1 }
            }
            for id in record.refused where id % 3 != 0 {
                if reader.request(#"{"op":"get","key":"c\#(index).\#(id)"}"#)?["ok"] as? Bool == true { applied += 1 }
            }
        }
        XCTAssertEqual(lost, 0, "acknowledged writes lost")
        XCTAssertEqual(applied, 0, "writes answered shutting_down but applied")
        restarted.kill9()
        Hostile.report("SIGTERM under load", "\(clientCount) clients, \(sent) requests sent: \(done) done, \(refused) shutting_down, \(sent - done - refused - other) unanswered; \(goodbyes) goodbyes; \(lost) acknowledged writes lost, \(applied) refused writes applied")
    }

    /// Reloads every few milliseconds while clients write and watch: no request fails, a watcher
    /// that keeps reading misses no event (and never overflows), and the daemon reloads every time.
    func test_sighupUnderLoad_changesNothingForTheClients() throws {
        let reloads = Hostile.pick(quick: 20, long: 500)
        let sandbox = try Sandbox()
        let configs = ["log_level = info\nmax_connections = 500\n", "log_level = debug\nmax_connections = 400\nclient_timeout = 30s\n"]
        try sandbox.write(configs[0], to: sandbox.config)
        let obsd = try ObsdProcess.started(sandbox, ["--config", sandbox.config])
        let watcher = try Client(sandbox.socket)
        XCTAssertEqual(watcher.request(#"{"op":"watch","keys":["w.**"],"initial":false}"#)?["ok"] as? Bool, true)
        XCTAssertEqual(json(watcher.readLine())["event"] as? String, "synced")
        let tally = Tally()
        let stop = Tally()
        // The watcher reads all along, as a client that keeps up does (one that stops reading
        // overflows once its output buffer is full, by design), until the marker written last.
        let seen = Tally()
        let reading = DispatchGroup()
        DispatchQueue.global().async(group: reading) {
            while let line = watcher.readLine() {
                let event = json(line)
                if event["key"] as? String == "w.marker" { return }
                seen.count(event["event"] as? String ?? "other")
            }
        }
        let writers = DispatchGroup()
        for writer in 0..<4 {
            let client = try Client(sandbox.socket)
            DispatchQueue.global().async(group: writers) {
                var index = 0
                while stop["stop"] == 0 {
                    let answer = client.request(#"{"op":"set","key":"w.\#(writer).\#(index)","value":\#(index)}"#)
                    tally.count(answer?["ok"] as? Bool == true ? "done" : "failed")
                    index += 1
                }
            }
        }
        for round in 0..<reloads {
            try sandbox.write(configs[round % 2], to: sandbox.config)
            obsd.signal(SIGHUP)
            waitFor("reload \(round + 1)") {
                obsd.log.components(separatedBy: "reloaded the configuration").count - 1 >= round + 1
            }
        }
        stop.count("stop")
        XCTAssertEqual(writers.wait(timeout: .now() + 60), .success)
        let writes = tally["done"]
        let marker = try Client(sandbox.socket)
        XCTAssertEqual(marker.request(#"{"op":"set","key":"w.marker","value":1}"#)?["ok"] as? Bool, true)
        XCTAssertEqual(reading.wait(timeout: .now() + 120), .success, "the watcher reached the marker")
        let events = seen["change"]
        XCTAssertEqual(tally["failed"], 0)
        XCTAssertEqual(seen["overflow"], 0, "a watcher that keeps reading does not overflow")
        XCTAssertEqual(events, writes, "every change reached the watcher")
        XCTAssertTrue(obsd.process.isRunning)
        Hostile.report("SIGHUP under load", "\(reloads) reloads, \(writes) writes, \(tally["failed"]) failed, \(writes - events) events missed")
    }
}
