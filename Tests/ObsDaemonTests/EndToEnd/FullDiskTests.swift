// A full disk, under normal and strict durability: the daemon keeps running, holds the answers to
// writes it could not write, refuses new writes with a clear error, and catches up once there is
// room.
// The state lives on a tiny tmpfs the test mounts (root only), so the disk really fills.
import Foundation
import Glibc
import TestSupport
import XCTest

final class FullDiskTests: XCTestCase {
    func test_strict_fullDisk_refusesWritesKeepsRunningAndCatchesUp() throws {
        try fullDisk(durability: "strict")
    }

    func test_normal_fullDisk_refusesWritesKeepsRunningAndCatchesUp() throws {
        try fullDisk(durability: "normal")
    }

    /// A disk with room for the commit log's files (handed to the checkpoint at 1 MiB here, a
    /// debug build's OBSD_TEST_LOG_ROTATE_BYTES) but, once it fills, not for the checkpoint that
    /// must fold them into the tables: the checkpoint fails and changes nothing, the log's files
    /// stay, and the write that the disk then cannot take is held and new writes are refused.
    func test_normal_aCheckpointOnAFullDisk_isRefusedLikeAWrite_losesNothing_andCatchesUp() throws {
        try fullDisk(durability: "normal", size: "10m", logMentions: "cannot checkpoint its log",
                     environment: ["OBSD_TEST_LOG_ROTATE_BYTES": "1048576"])
    }

    /// A start on a disk with little room: obsd starts and serves reads as soon as there is room
    /// for the commit log's first file, as it did before it stored runs (a run is stored at its
    /// clean stop, never at its start), and once there is room again a watch of this run resumes
    /// across a clean restart. Every room from none to 64 KiB is tried on a copy of the same
    /// database: each start that is refused must be refused for what a start needs (the database
    /// or the commit log's file cannot be opened), never for the run.
    func test_aStartWithLittleRoom_servesReads_andItsRunResumesAfterACleanStopWithRoom() throws {
        let sandbox = try Sandbox()
        let disk = try smallDisk(in: sandbox, size: "2m")
        defer { umount2(disk, Int32(MNT_DETACH)) }
        let state = disk + "/state", database = disk + "/state/obsd.db", pristine = sandbox.root + "/pristine.db"
        let arguments = ["--socket", sandbox.socket, "--state-dir", state]
        let first = try ObsdProcess(sandbox, arguments: arguments)
        XCTAssertTrue(first.waitUntilListening(), first.log)
        for (key, rev) in [("a", 1), ("b", 2)] {
            XCTAssertEqual(try Client(sandbox.socket).request(#"{"op":"set","key":"\#(key)","value":1}"#)?["rev"] as? Int, rev)
        }
        let loadedRun = try XCTUnwrap(try Client(sandbox.socket).request(#"{"op":"hello"}"#)?["run"] as? String)
        first.signal(SIGTERM)
        XCTAssertEqual(first.waitForExit(), 0, first.log)
        try FileManager.default.copyItem(atPath: database, toPath: pristine)

        var started: ObsdProcess?
        for free in stride(from: 0, through: 64 << 10, by: 4 << 10) {
            // The database as the clean stop left it, and a filler that leaves `free` bytes.
            for name in (try? FileManager.default.contentsOfDirectory(atPath: state)) ?? [] where name != "obsd.lock" {
                try FileManager.default.removeItem(atPath: state + "/" + name)
            }
            unlink(disk + "/filler")
            try FileManager.default.copyItem(atPath: pristine, toPath: database)
            let fd = open(disk + "/filler", O_WRONLY | O_CREAT, 0o600)
            XCTAssertGreaterThanOrEqual(fd, 0)
            let chunk = [UInt8](repeating: 0, count: 4096)
            var size = 0
            while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == chunk.count { size += chunk.count }
            XCTAssertEqual(ftruncate(fd, off_t(max(0, size - free))), 0)
            close(fd)

            let obsd = try ObsdProcess(sandbox, arguments: arguments)
            if obsd.waitUntilListening() {
                started = obsd
                break
            }
            _ = obsd.waitForExit()
            XCTAssertTrue(obsd.log.contains("cannot read database") || obsd.log.contains("cannot start the commit log"),
                          "with \(free) bytes free, refused for something a start did not need before it stored runs: \(obsd.log)")
        }
        let obsd = try XCTUnwrap(started, "obsd started with no room up to 64 KiB")
        defer { obsd.signal(SIGKILL); _ = obsd.waitForExit() }
        let client = try Client(sandbox.socket)
        XCTAssertEqual(client.request(#"{"op":"get","key":"b"}"#)?["value"] as? Int, 1, "reads are served")
        let run = try XCTUnwrap(client.request(#"{"op":"hello"}"#)?["run"] as? String)

        // Room again: the first change stores the run with its rows; a clean stop, and a watch of
        // this run resumes from the revision it saw, while one of the run before gets a snapshot.
        XCTAssertEqual(mount("tmpfs", disk, "tmpfs", UInt(MS_REMOUNT), "size=64m"), 0)
        XCTAssertTrue(waitFor("writes accepted") {
            client.request(#"{"op":"set","key":"c","value":1}"#)?["rev"] as? Int == 3
        }, obsd.log)
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
        let restarted = try ObsdProcess(sandbox, arguments: arguments)
        defer { restarted.signal(SIGKILL); _ = restarted.waitForExit() }
        XCTAssertTrue(restarted.waitUntilListening(), restarted.log)
        func resume(since: Int, run: String) -> [String?] {
            guard let watcher = try? Client(sandbox.socket),
                  watcher.request(#"{"op":"watch","keys":["**"],"since":\#(since),"run":"\#(run)"}"#)?["ok"] as? Bool == true
            else { return ["no watch"] }
            var events: [String?] = []
            while let line = watcher.readLine() {
                events.append(json(line)["event"] as? String)
                if events.last == "synced" { break }
            }
            return events
        }
        XCTAssertEqual(resume(since: 3, run: run), ["synced"], "the run that started with little room stored its identity at its clean stop")
        XCTAssertEqual(resume(since: 2, run: loadedRun).first, "compacted", "the run before does not name this state")
    }

    /// A disk so full that appends still fit the commit log's last block, but a new file gets
    /// none: the newest file, past the size at which it is handed to the checkpoint (256 bytes
    /// here, a debug build's OBSD_TEST_LOG_ROTATE_BYTES), cannot be replaced. The next file is
    /// tried again a second later, not at every append (each try a create, a failed write and an
    /// unlink: counted here by inotify), the failure is logged once, every write is acknowledged
    /// meanwhile, and once there is room the next file starts and nothing is lost.
    func test_aDiskWithNoRoomForANewLogFile_triesTheNextFileOnceASecond_notAtEveryAppend() throws {
        let sandbox = try Sandbox()
        let disk = try smallDisk(in: sandbox, size: "1m")
        defer { umount2(disk, Int32(MNT_DETACH)) }
        let state = disk + "/state"
        let arguments = ["--socket", sandbox.socket, "--state-dir", state]
        let daemon = try ObsdProcess(sandbox, arguments: arguments, environment: ["OBSD_TEST_LOG_ROTATE_BYTES": "256"])
        defer { daemon.signal(SIGKILL); _ = daemon.waitForExit() }
        XCTAssertTrue(daemon.waitUntilListening(), daemon.log)
        let client = try Client(sandbox.socket)
        XCTAssertEqual(client.request(#"{"op":"set","key":"before","value":1}"#)?["ok"] as? Bool, true)
        // The first file handed over once the writer is idle a second, folded and deleted: the
        // newest file holds its magic alone, in a page of its own with room for a few KB.
        XCTAssertTrue(waitFor("the first log file folded") {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: state))?.filter { $0.hasPrefix("obsd.commitlog.") }
            return files == ["obsd.commitlog.2"]
        }, daemon.log)

        // Every page of the disk taken.
        let filler = open(disk + "/filler", O_WRONLY | O_CREAT, 0o600)
        XCTAssertGreaterThanOrEqual(filler, 0)
        for chunk in [64 << 10, 4 << 10] {
            let bytes = [UInt8](repeating: 0x61, count: chunk)
            while bytes.withUnsafeBytes({ write(filler, $0.baseAddress, $0.count) }) == chunk {}
        }
        close(filler)

        let watch = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        XCTAssertGreaterThanOrEqual(watch, 0)
        defer { close(watch) }
        // Deletions too: inotify merges an event with an identical one still unread, and a try's
        // create then alternates with its unlink.
        XCTAssertGreaterThanOrEqual(inotify_add_watch(watch, state, UInt32(IN_CREATE | IN_DELETE)), 0)

        // 40 small writes, each an append that fits the newest file's page; past 256 bytes every
        // one of them found the file due for the checkpoint.
        let start = Date()
        for index in 0..<40 {
            let answer = client.request(#"{"op":"set","key":"k","value":\#(index)}"#)
            XCTAssertEqual(answer?["ok"] as? Bool, true, "write \(index) on a disk with room in the log's page: \(answer ?? [:])")
        }
        let elapsed = Date().timeIntervalSince(start)
        let tries = createdLogFiles(watch)
        XCTAssertGreaterThan(tries, 0, "the next file was never tried: the test did not reach its case")
        // One try at the first append past the size, then one a second (the idle second's included).
        XCTAssertLessThanOrEqual(tries, 2 + Int(elapsed.rounded(.up)), "new log files tried in \(elapsed) s of 40 appends")
        XCTAssertEqual(daemon.log.components(separatedBy: "cannot start the next commit log file").count - 1, 1, daemon.log)

        // Room again: the next file starts within a second or so, and everything is kept.
        XCTAssertEqual(mount("tmpfs", disk, "tmpfs", UInt(MS_REMOUNT), "size=64m"), 0)
        XCTAssertTrue(waitFor("the next log file started") {
            _ = client.request(#"{"op":"set","key":"after","value":1}"#)
            return daemon.log.contains("obsd.commitlog.3 started")
        }, daemon.log)
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(), 0, daemon.log)
        let restarted = try ObsdProcess(sandbox, arguments: arguments)
        defer { restarted.signal(SIGKILL); _ = restarted.waitForExit() }
        XCTAssertTrue(restarted.waitUntilListening(), restarted.log)
        let reader = try Client(sandbox.socket)
        for (key, value) in [("before", 1), ("k", 39), ("after", 1)] {
            XCTAssertEqual(reader.request(#"{"op":"get","key":"\#(key)"}"#)?["value"] as? Int, value, key)
        }
    }

    /// Log files created in the watched directory since the last call (inotify's IN_CREATE).
    private func createdLogFiles(_ watch: Int32) -> Int {
        var count = 0
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let length = buffer.withUnsafeMutableBytes { read(watch, $0.baseAddress, $0.count) }
            guard length > 0 else { return count }
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= length {
                let (mask, nameLength) = buffer.withUnsafeBytes { raw in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    return (event.mask, Int(event.len))
                }
                let nameStart = offset + MemoryLayout<inotify_event>.size
                let name = String(decoding: buffer[nameStart..<nameStart + nameLength].prefix { $0 != 0 }, as: UTF8.self)
                if mask & UInt32(IN_CREATE) != 0, name.hasPrefix("obsd.commitlog.") { count += 1 }
                offset = nameStart + nameLength
            }
        }
    }

    private func fullDisk(durability: String, size: String = "400k", logMentions: String? = nil,
                          environment: [String: String] = [:]) throws {
        let sandbox = try Sandbox()
        let disk = try smallDisk(in: sandbox, size: size)
        defer { umount2(disk, Int32(MNT_DETACH)) }
        let state = disk + "/state"
        let daemon = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--state-dir", state, "--durability", durability],
                                     environment: environment)
        defer { daemon.signal(SIGKILL); _ = daemon.waitForExit() }
        XCTAssertTrue(daemon.waitUntilListening())

        // A watcher of every key: it gets the change event of a write only once it is written.
        let watcher = try Client(sandbox.socket, timeout: 2)
        watcher.send(#"{"id":"w","op":"watch","keys":["**"],"initial":false}"# + "\n")
        XCTAssertEqual(json(watcher.readLine())["ok"] as? Bool, true)

        // Fill the disk: 3 KB values until one set gets no answer (held: not written).
        let writer = try Client(sandbox.socket, timeout: 5)
        var acknowledged: [Int] = []
        var held: Int?
        for index in 0..<5000 {
            writer.send(#"{"id":\#(index),"op":"set","key":"k\#(index)","value":"\#(String(repeating: "x", count: 3000))"}"# + "\n")
            guard let line = writer.readLine() else {
                held = index
                break
            }
            XCTAssertEqual(json(line)["ok"] as? Bool, true, line)
            acknowledged.append(index)
        }
        guard let held else { return XCTFail("the disk never filled") }
        // The watcher has the events of the acknowledged writes, and none for the held one.
        var lastSeen: String?
        while lastSeen != "k\(held - 1)", let line = watcher.readLine() {
            if json(line)["event"] as? String == "change" { lastSeen = json(line)["key"] as? String }
        }
        XCTAssertEqual(lastSeen, "k\(held - 1)")
        let early = watcher.readLine()
        XCTAssertNil(early, "a line for a write that is not on disk: \(early?.prefix(80) ?? "")")

        // Meanwhile: new writes are refused at once with a clear error, reads still work, and the
        // daemon is alive.
        let other = try Client(sandbox.socket)
        other.send(#"{"op":"set","key":"other","value":1}"# + "\n")
        let refused = other.readLine()
        XCTAssertEqual(errorCode(refused), "internal", refused ?? "no answer")
        XCTAssertTrue(refused?.contains("writes are refused") == true, refused ?? "")
        if let logMentions { XCTAssertTrue(daemon.log.contains(logMentions), daemon.log) }
        other.send(#"{"op":"get","key":"k0"}"# + "\n")
        XCTAssertEqual(json(other.readLine())["ok"] as? Bool, true)

        // Room again: the held write is written (and fsynced) and answered, writes are accepted
        // again.
        XCTAssertEqual(mount("tmpfs", disk, "tmpfs", UInt(MS_REMOUNT), "size=64m"), 0)
        XCTAssertEqual(json(writer.readLine())["id"] as? Int, held, "the held write is answered once written")
        var event: [String: Any] = [:]
        waitFor("the held write's change event") {
            event = json(watcher.readLine())
            return event["event"] as? String == "change"
        }
        XCTAssertEqual(event["key"] as? String, "k\(held)")
        XCTAssertTrue(waitFor("writes accepted again") {
            other.send(#"{"op":"set","key":"other","value":2}"# + "\n")
            return json(other.readLine())["ok"] as? Bool == true
        })

        // Everything acknowledged survives a restart.
        daemon.signal(SIGTERM)
        XCTAssertEqual(daemon.waitForExit(), 0)
        let restarted = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--state-dir", state, "--durability", durability])
        defer { restarted.signal(SIGKILL); _ = restarted.waitForExit() }
        XCTAssertTrue(restarted.waitUntilListening())
        let reader = try Client(sandbox.socket)
        for index in acknowledged + [held] {
            reader.send(#"{"op":"get","key":"k\#(index)"}"# + "\n")
            XCTAssertEqual(json(reader.readLine())["ok"] as? Bool, true, "k\(index) after the restart")
        }
    }
}

extension XCTestCase {
    /// A tmpfs of `size` (tmpfs's `size=`, e.g. "400k"; more mount options in `options`) mounted at
    /// SANDBOX/disk, so that the disk really fills; the caller unmounts it (`defer`, before the
    /// sandbox is removed). Root only: skips the test otherwise, or where no tmpfs can be mounted.
    func smallDisk(in sandbox: Sandbox, size: String, options: String = "") throws -> String {
        try XCTSkipUnless(geteuid() == 0, "needs root to mount a small tmpfs")
        let disk = sandbox.root + "/disk"
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        guard mount("tmpfs", disk, "tmpfs", 0, "size=\(size)" + (options.isEmpty ? "" : "," + options)) == 0 else {
            throw XCTSkip("cannot mount a tmpfs here (errno \(errno))")
        }
        return disk
    }
}
