// Disks that cannot be written: a database obsd's user may only read, a read-only file system, and
// a file system that fills up under load (a small tmpfs, so these need root).
import Foundation
import Glibc
import TestSupport
import XCTest

final class HostileDiskTests: XCTestCase {
    /// A tmpfs of `size` mounted inside the sandbox, unmounted at the end of the test.
    private func tmpfs(_ sandbox: Sandbox, size: String) throws -> String {
        try XCTSkipUnless(geteuid() == 0, "needs root to mount a small tmpfs")
        let disk = sandbox.root + "/disk"
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        guard mount("tmpfs", disk, "tmpfs", 0, "size=\(size),mode=0700") == 0 else {
            throw XCTSkip("cannot mount a tmpfs here (errno \(errno))")
        }
        // The sandbox goes when the test's body ends, with the tmpfs still mounted (a mount point
        // cannot be removed): what is left is removed here, once it is unmounted.
        let root = sandbox.root
        addTeardownBlock {
            umount2(disk, Int32(MNT_DETACH))
            try? FileManager.default.removeItem(atPath: root)
        }
        return disk
    }

    /// The issue's case: obsd.db mode 0400 for the daemon's user. obsd runs as a user of its own
    /// here (root could write the file anyway).
    func test_aDatabaseTheDaemonCanOnlyRead_isRefusedAtStart_namingIt() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to run obsd as another user")
        let user = try TestUser.make("obsd-test-rw")
        let sandbox = try Sandbox()
        for directory in [sandbox.state, sandbox.root + "/run"] {
            mkdir(directory, 0o700)
            chown(directory, user.uid, user.gid)
        }
        let arguments = ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "--", try builtExecutable("obsd"),
                         "--socket", sandbox.socket, "--state-dir", sandbox.state]
        let first = try ObsdProcess(sandbox, arguments: arguments, executable: "/usr/bin/setpriv")
        first.waitUntilListeningOrExit()
        XCTAssertEqual(try Client(sandbox.socket).request(#"{"op":"set","key":"k","value":1}"#)?["ok"] as? Bool, true, first.log)
        first.signal(SIGTERM)
        XCTAssertEqual(first.waitForExit(), 0, first.log)

        let database = sandbox.state + "/obsd.db"
        chmod(database, 0o400)
        let second = try ObsdProcess(sandbox, arguments: arguments, executable: "/usr/bin/setpriv")
        XCTAssertEqual(second.waitForExit(), 1, second.log)
        XCTAssertTrue(second.log.contains("database \(database) can only be read by this user (uid \(user.uid))"), second.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.socket), "nothing is served")
        Hostile.report("obsd.db mode 0400", "refused at start, naming the file")
    }

    func test_aReadOnlyFileSystem_isRefusedAtStart_namingTheFile() throws {
        let sandbox = try Sandbox()
        let disk = try tmpfs(sandbox, size: "4m")
        let state = disk + "/state"
        let first = try ObsdProcess.started(sandbox, state: state)
        XCTAssertEqual(try Client(sandbox.socket).request(#"{"op":"set","key":"k","value":1}"#)?["ok"] as? Bool, true)
        first.signal(SIGTERM)
        XCTAssertEqual(first.waitForExit(), 0)
        XCTAssertEqual(mount("tmpfs", disk, "tmpfs", UInt(MS_REMOUNT | MS_RDONLY), nil), 0)
        let second = try ObsdProcess.started(sandbox, state: state)
        XCTAssertEqual(second.waitForExit(), 1, second.log)
        XCTAssertTrue(second.log.contains(state + "/obsd."), second.log)
        XCTAssertTrue(second.log.contains("Read-only file system") || second.log.contains("can only be read"), second.log)
        Hostile.report("read-only file system", "refused at start, naming the file")
    }

    /// Three clients write 2 KB values until the disk is full and on after it: no write is
    /// acknowledged that is not on disk, reads go on, writes are refused with a clear error, and
    /// once there is room the held writes are answered and everything acknowledged survives a
    /// restart.
    func test_aDiskThatFillsUnderLoad_losesNothingAcknowledged() throws {
        var figures: [String] = []
        for durability in ["normal", "strict"] {
            let sandbox = try Sandbox()
            let disk = try tmpfs(sandbox, size: "600k")
            let state = disk + "/state"
            let obsd = try ObsdProcess.started(sandbox, state: state, ["--durability", durability])
            let tally = Tally()
            let writers = DispatchGroup()
            let value = String(repeating: "x", count: 2000)
            for writer in 0..<3 {
                let client = try Client(sandbox.socket, timeout: 3)
                DispatchQueue.global().async(group: writers) {
                    for index in 0..<400 {
                        // Sent one at a time: a held write (not on disk) is never answered, and
                        // the writer moves on after the read timeout.
                        guard let answer = client.request(#"{"op":"set","key":"w\#(writer).\#(index)","value":"\#(value)"}"#) else { return }
                        if answer["ok"] as? Bool == true { tally.add("w\(writer).\(index)") } else { tally.count("refused") }
                    }
                }
            }
            XCTAssertEqual(writers.wait(timeout: .now() + 120), .success)
            let reader = try Client(sandbox.socket)
            XCTAssertEqual(reader.request(#"{"op":"ping"}"#)?["ok"] as? Bool, true, "reads go on")
            let refusal = reader.request(#"{"op":"set","key":"probe","value":1}"#)
            XCTAssertTrue((refusal?["error"] as? [String: Any])?["message"].map { "\($0)" }?.contains("writes are refused") == true,
                          "\(String(describing: refusal))")
            XCTAssertEqual(mount("tmpfs", disk, "tmpfs", UInt(MS_REMOUNT), "size=16m"), 0)
            XCTAssertTrue(waitFor("writes accepted again") {
                reader.request(#"{"op":"set","key":"probe","value":2}"#)?["ok"] as? Bool == true
            })
            obsd.signal(SIGTERM)
            XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
            let restarted = try ObsdProcess.started(sandbox, state: state, ["--durability", durability])
            let checker = try Client(sandbox.socket)
            let keys = tally.items
            let lost = keys.filter { checker.request(#"{"op":"get","key":"\#($0)"}"#)?["ok"] as? Bool != true }
            XCTAssertEqual(lost, [], "acknowledged writes lost")
            restarted.kill9()
            figures.append("\(durability): \(keys.count) acknowledged, \(tally["refused"]) refused while full, \(lost.count) lost after restart")
        }
        Hostile.report("disk full under load (600 KiB tmpfs)", figures.joined(separator: "; "))
    }
    /// A watcher over the output limit only because its event waits for a batch that the full disk
    /// cannot take reads everything it is sent: it keeps its connection through a disk-full longer
    /// than client_timeout, and gets the event once there is room.
    func test_aWatcherOverTheLimitOnlyByAnEventWaitingForTheDisk_staysConnected() throws {
        let sandbox = try Sandbox()
        let disk = try tmpfs(sandbox, size: "2m")
        try sandbox.write("output_buffer_bytes = 64K\nclient_timeout = 1s\n", to: sandbox.config)
        let obsd = try ObsdProcess.started(sandbox, state: disk + "/state", ["--config", sandbox.config])
        let watcher = try Client(sandbox.socket, timeout: 30)
        XCTAssertEqual(watcher.request(#"{"op":"watch","keys":["big"],"initial":false}"#)?["ok"] as? Bool, true)
        XCTAssertEqual(watcher.readLine().map { $0.contains(#""event":"synced""#) }, true)

        // Fill the disk, so that the batch of the next write cannot be written.
        let filler = disk + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
        let chunk = [UInt8](repeating: 0x61, count: 64 << 10)
        while write(fd, chunk, chunk.count) > 0 {}
        close(fd)
        let value = String(repeating: "v", count: 100_000)
        let writer = try Client(sandbox.socket, timeout: 30)
        XCTAssertTrue(writer.send(#"{"op":"set","key":"big","value":"\#(value)"}"# + "\n"))
        // Three times client_timeout with the event (over the limit) waiting for the disk.
        Thread.sleep(forTimeInterval: 3)
        XCTAssertEqual(unlink(filler), 0)
        XCTAssertEqual(writer.readLine().map { $0.contains(#""ok":true"#) }, true, obsd.log)
        let event = watcher.readLine()
        XCTAssertEqual(event.map { $0.contains(#""event":"change""#) && $0.contains(value) }, true,
                       "the watcher was disconnected, or got something else: \(event?.prefix(200) ?? "nothing")\n\(obsd.log)")
        Hostile.report("an event over the output limit waiting for a full disk", "the watcher stays connected and gets it once there is room")
    }
}
