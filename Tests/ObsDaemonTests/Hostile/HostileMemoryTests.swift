// Memory one client can make obsd hold: a watcher that never reads, a client that pipelines
// requests for large values without reading the answers, and history under large values. Each
// is bounded in bytes, whatever the client does; the figures are obsd's resident memory.
import Foundation
import Glibc
import TestSupport
import XCTest

final class HostileMemoryTests: XCTestCase {
    /// A watcher of every key that reads nothing while others write: its output stops at the
    /// limit (overflow), others are served, and after client_timeout it is disconnected.
    func test_aSlowConsumer_isBounded_andDisconnected() throws {
        let sandbox = try Sandbox()
        try sandbox.write("client_timeout = 2s\n", to: sandbox.config)
        let obsd = try ObsdProcess.started(sandbox, ["--memory", "--config", sandbox.config])
        let slow = try Client(sandbox.socket)
        slow.send(#"{"op":"watch","keys":["**"]}"# + "\n")
        let before = obsd.residentKiB
        let writer = try Client(sandbox.socket)
        let value = String(repeating: "v", count: 1000)
        let writes = Hostile.pick(quick: 30_000, long: 300_000)
        for chunk in stride(from: 0, to: writes, by: 500) {
            writer.send((chunk..<chunk + 500).map { #"{"op":"set","key":"k\#($0 % 1000)","value":"\#($0)\#(value)"}"# + "\n" }.joined())
            for _ in 0..<500 { XCTAssertEqual(json(writer.readLine())["ok"] as? Bool, true) }
        }
        let grown = obsd.residentKiB - before
        XCTAssertLessThan(grown, 64 * 1024, "resident memory grew by \(grown) KiB for one slow consumer")
        XCTAssertTrue(waitFor("the slow consumer to be disconnected") { obsd.log.contains("read nothing for 2.0s") }, obsd.log)
        Hostile.report("slow consumer", "\(writes) events of 1 KB for a watcher that reads nothing: obsd grew \(grown / 1024) MiB (output limit 8 MiB), disconnected after client_timeout")
    }

    /// Two thousand `get`s of a 100 KB value pipelined in one go, nothing read: answers stop at
    /// the output limit and the rest wait unparsed; read afterwards, every one arrives, in order.
    func test_aClientPipeliningLargeAnswersWithoutReading_isBounded() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox, ["--memory"])
        let client = try Client(sandbox.socket, timeout: 60)
        XCTAssertEqual(client.request(#"{"op":"set","key":"big","value":"\#(String(repeating: "x", count: 100_000))"}"#)?["ok"] as? Bool, true)
        let before = obsd.residentKiB
        let count = Hostile.pick(quick: 2000, long: 20000)
        // Sent by a thread of its own: once obsd stops reading, the socket's buffer fills and the
        // send waits for the reading below.
        let sending = DispatchGroup()
        DispatchQueue.global().async(group: sending) {
            client.send((0..<count).map { #"{"id":\#($0),"op":"get","key":"big"}"# + "\n" }.joined())
        }
        // Let obsd take in all it will before it stops reading.
        waitFor("obsd to stop reading") {
            let a = obsd.residentKiB
            usleep(200_000)
            return obsd.residentKiB == a
        }
        let grown = obsd.residentKiB - before
        XCTAssertLessThan(grown, 48 * 1024, "resident memory grew by \(grown) KiB")
        var inOrder = 0
        for id in 0..<count where json(client.readLine())["id"] as? Int == id { inOrder += 1 }
        XCTAssertEqual(sending.wait(timeout: .now() + 60), .success)
        XCTAssertEqual(inOrder, count)
        Hostile.report("pipelined answers nobody reads", "\(count) gets of a 100 KB value (\(count / 10) MB of answers): obsd grew \(grown / 1024) MiB; then \(inOrder) of \(count) answers read, in order")
    }

    /// A hundred watches of `**` on one connection over a 2 MB store, overflowed: once the client
    /// has read what was queued, the resync (`overflow` and a fresh snapshot per watch) stays
    /// within the output limit plus a snapshot, not a snapshot per watch (200 MB) queued at once;
    /// read on, every watch that missed the change gets its `overflow` and snapshot, then every
    /// watch live events.
    func test_theResyncOfManyOverflowedWatches_isBoundedByTheOutputLimit() throws {
        let keys = 20
        let (sandbox, obsd, writer, value) = try largeStore(keys: keys, outputLimit: "1M")
        let watches = 100
        let watcher = try Client(sandbox.socket, timeout: 60)
        watcher.send(String(repeating: #"{"op":"watch","keys":["**"],"initial":false}"# + "\n", count: watches))
        // Each watch's answer, then its `synced`.
        for _ in 0..<2 * watches { XCTAssertNotNil(watcher.readLine()) }
        let before = obsd.anonymousKiB
        // 100 events of 100 KB for one change: over the 1 MiB limit, the watches overflow.
        XCTAssertEqual(writer.request(#"{"op":"set","key":"s.0","value":"x\#(value)"}"#)?["ok"] as? Bool, true)
        // Each watch gets the change, or (once the output is over the limit) `overflow` and a
        // fresh snapshot instead.
        var changed = Set<Int>()
        var overflows = Set<Int>()
        var initials = 0
        func take(_ line: String) {
            if line.hasPrefix(#"{"event":"change""#) { changed.insert(json(line)["watch"] as? Int ?? 0) }
            if line.hasPrefix(#"{"event":"overflow""#) { overflows.insert(json(line)["watch"] as? Int ?? 0) }
            if line.hasPrefix(#"{"event":"initial""#) { initials += 1 }
        }
        while overflows.isEmpty, let line = watcher.readLine() { take(line) }
        XCTAssertFalse(overflows.isEmpty, "no overflow")
        // The watcher reads nothing now: what obsd queued for it when it drained is all there is.
        usleep(300_000)
        let grown = obsd.anonymousKiB - before
        XCTAssertLessThan(grown, 40 * 1024, "resident memory grew by \(grown) KiB for one client's resync (output limit 1 MiB, store 2 MB)")
        while changed.union(overflows).count < watches || initials < overflows.count * keys, let line = watcher.readLine() { take(line) }
        XCTAssertEqual(changed.union(overflows), Set(1...watches), "watches that got the change or overflow")
        XCTAssertTrue(changed.isDisjoint(with: overflows), "watches that got the change and overflow: \(changed.intersection(overflows).sorted())")
        XCTAssertEqual(initials, overflows.count * keys, "initial events of the fresh snapshots")
        XCTAssertEqual(writer.request(#"{"op":"set","key":"live","value":1}"#)?["ok"] as? Bool, true)
        var live = 0
        while live < watches, let line = watcher.readLine() {
            if line.hasPrefix(#"{"event":"change""#), json(line)["key"] as? String == "live" { live += 1 }
        }
        XCTAssertEqual(live, watches, "live events after the resync")
        Hostile.report("resync of many overflowed watches", "\(watches) watches of ** over \(keys) keys of 100 KB: obsd grew \(grown / 1024) MiB at the drain (output limit 1 MiB); \(changed.count) changes, \(overflows.count) overflows, \(initials) initial events, \(live) live events")
    }

    /// A `**` watch over a store four times the output limit, read steadily at about 2 MB/s while
    /// another client sets a small key every 5 ms: after its overflow and snapshot it gets live
    /// events. (The snapshot alone puts its output over the limit; counted against it, the next
    /// event overflowed the watch again, snapshot after snapshot, and a client that keeps up with
    /// the changes easily never saw one.)
    func test_aSnapshotLargerThanTheLimit_isFollowedByLiveEvents_forASteadyReader() throws {
        let (sandbox, obsd, writer, value) = try largeStore(keys: 10, outputLimit: "256K")
        let watcher = try Client(sandbox.socket, timeout: 60)
        XCTAssertEqual(watcher.request(#"{"op":"watch","keys":["**"],"initial":false}"#)?["ok"] as? Bool, true)
        XCTAssertEqual(watcher.readLine().map { $0.contains(#""event":"synced""#) }, true)
        let ticking = Tally()
        let ticker = DispatchGroup()
        let tickerClient = try Client(sandbox.socket, timeout: 60)
        DispatchQueue.global().async(group: ticker) {
            var tick = 0
            while ticking["stop"] == 0, tick < 20_000 {
                guard tickerClient.request(#"{"op":"set","key":"tick","value":\#(tick)}"#)?["ok"] as? Bool == true else { return }
                tick += 1
                usleep(5_000)
            }
        }
        defer { ticking.count("stop"); ticker.wait() }
        // Three changes of 100 KB while the watcher reads nothing: over the limit, it overflows.
        for key in 0..<3 {
            XCTAssertEqual(writer.request(#"{"op":"set","key":"s.\#(key)","value":"x\#(value)"}"#)?["ok"] as? Bool, true)
        }
        watcher.readChunkBytes = 16_384
        watcher.pauseAfterReadMicroseconds = 8_000
        var overflows = 0
        var snapshots = 0
        var liveSinceSynced = 0
        var sawSynced = false
        let deadline = Date().addingTimeInterval(60)
        while liveSinceSynced < 50, Date() < deadline, let line = watcher.readLine() {
            if line.hasPrefix(#"{"event":"overflow""#) {
                overflows += 1
                sawSynced = false
                liveSinceSynced = 0
            } else if line.hasPrefix(#"{"event":"synced""#) {
                snapshots += 1
                sawSynced = true
            } else if sawSynced, line.hasPrefix(#"{"event":"change""#), line.contains(#""key":"tick""#) {
                liveSinceSynced += 1
            }
        }
        XCTAssertGreaterThan(overflows, 0, "the watch should have overflowed")
        XCTAssertEqual(liveSinceSynced, 50, "live events after the snapshot: \(overflows) overflows and \(snapshots) snapshots instead\n\(obsd.log)")
        Hostile.report("a snapshot larger than the output limit, read at about 2 MB/s under 200 changes/s",
                       "\(overflows) overflow, \(snapshots) snapshot, then live events")
    }

    /// obsd in memory with `output_buffer_bytes` at `outputLimit`, and `keys` keys `s.N` of the
    /// 100 KB value it returns, set by the client it returns.
    private func largeStore(keys: Int, outputLimit: String) throws -> (Sandbox, ObsdProcess, Client, String) {
        let sandbox = try Sandbox()
        try sandbox.write("output_buffer_bytes = \(outputLimit)\nclient_timeout = 120s\n", to: sandbox.config)
        let obsd = try ObsdProcess.started(sandbox, ["--memory", "--config", sandbox.config])
        let writer = try Client(sandbox.socket, timeout: 60)
        let value = String(repeating: "s", count: 100_000)
        for key in 0..<keys {
            XCTAssertEqual(writer.request(#"{"op":"set","key":"s.\#(key)","value":"\#(value)"}"#)?["ok"] as? Bool, true)
        }
        return (sandbox, obsd, writer, value)
    }

    /// One key overwritten with 1 MiB values: history holds at most history_bytes of them, and a
    /// `since` before what it holds gets `compacted`.
    func test_historyUnderLargeValues_isBoundedInBytes() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess.started(sandbox, ["--memory"])
        let client = try Client(sandbox.socket, timeout: 60)
        let before = obsd.residentKiB
        let writes = Hostile.pick(quick: 150, long: 1000)
        let value = String(repeating: "y", count: 1_000_000)
        for index in 0..<writes {
            XCTAssertEqual(client.request(#"{"op":"set","key":"big","value":"\#(index)\#(value)"}"#)?["ok"] as? Bool, true)
        }
        let grown = obsd.residentKiB - before
        // 64 MiB of history (old and new values counted), the current value, buffers.
        XCTAssertLessThan(grown, 128 * 1024, "resident memory grew by \(grown) KiB")
        let watcher = try Client(sandbox.socket, timeout: 60)
        watcher.send(#"{"op":"watch","keys":["big"],"since":1}"# + "\n")
        XCTAssertEqual(json(watcher.readLine())["ok"] as? Bool, true)
        let first = json(watcher.readLine())
        XCTAssertEqual(first["event"] as? String, "compacted")
        Hostile.report("history under 1 MiB values", "\(writes) overwrites: obsd grew \(grown / 1024) MiB (history_bytes 64 MiB; without it \(writes) MiB and more); since 1 gets compacted at \(first["compact_rev"] ?? "?")")
    }
}
