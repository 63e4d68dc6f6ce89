// The security rules (docs/operations.md, Security) against the real obsd: the socket directory, symlinks, ownership,
// stale and live sockets, and SO_PEERCRED with the allow setting, using uids the test creates.
import Foundation
import Glibc
import TestSupport
import XCTest

final class SecurityTests: XCTestCase {
    private func startExpectingFailure(_ sandbox: Sandbox, socket: String) throws -> ObsdProcess {
        let obsd = try ObsdProcess(sandbox, arguments: ["--socket", socket, "--state-dir", sandbox.state])
        XCTAssertEqual(obsd.waitForExit(), 1, obsd.log)
        return obsd
    }

    func test_symlinkedSocketDirectory_isRefused() throws {
        let sandbox = try Sandbox()
        let real = sandbox.root + "/real"
        mkdir(real, 0o700)
        symlink(real, sandbox.root + "/link")
        let obsd = try startExpectingFailure(sandbox, socket: sandbox.root + "/link/obsd.sock")
        XCTAssertTrue(obsd.log.contains("is a symlink"), obsd.log)
        XCTAssertFalse(FileManager.default.fileExists(atPath: real + "/obsd.sock"))
    }

    func test_symlinkedSocketPath_isRefused() throws {
        let sandbox = try Sandbox()
        mkdir(sandbox.root + "/run", 0o700)
        symlink(sandbox.root + "/elsewhere.sock", sandbox.socket)
        let obsd = try startExpectingFailure(sandbox, socket: sandbox.socket)
        XCTAssertTrue(obsd.log.contains("is a symlink"), obsd.log)
    }

    func test_directoryOfAnotherUser_isRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to give the directory away")
        let sandbox = try Sandbox()
        let user = try TestUser.make("obsd-test-other")
        mkdir(sandbox.root + "/run", 0o700)
        chown(sandbox.root + "/run", user.uid, user.gid)
        let obsd = try startExpectingFailure(sandbox, socket: sandbox.socket)
        XCTAssertTrue(obsd.log.contains("belongs to uid \(user.uid)"), obsd.log)
    }

    func test_groupWritableDirectory_isRefused() throws {
        let sandbox = try Sandbox()
        mkdir(sandbox.root + "/run", 0o700)
        chmod(sandbox.root + "/run", 0o770)
        let obsd = try startExpectingFailure(sandbox, socket: sandbox.socket)
        XCTAssertTrue(obsd.log.contains("writable by others"), obsd.log)
    }

    func test_staleSocket_isReplaced_andALiveDaemonRefusesASecond() throws {
        let sandbox = try Sandbox()
        mkdir(sandbox.root + "/run", 0o700)
        // A socket file nobody listens on, as a crashed daemon leaves it.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(sandbox.socket.utf8)) }
        XCTAssertEqual(withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }, 0)
        close(stale)

        let obsd = try ObsdProcess(sandbox)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let second = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--state-dir", sandbox.root + "/state2"])
        XCTAssertEqual(second.waitForExit(), 1)
        XCTAssertTrue(second.log.contains("already running"), second.log)
        let client = try Client(sandbox.socket)
        client.send("{\"op\":\"ping\"}\n")
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true, "the first daemon is untouched")
    }

    func test_secondDaemonOnTheSameStateDirectory_isRefused() throws {
        let sandbox = try Sandbox()
        let obsd = try ObsdProcess(sandbox)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let second = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.root + "/other/obsd.sock", "--state-dir", sandbox.state])
        XCTAssertEqual(second.waitForExit(), 1)
        XCTAssertTrue(second.log.contains("already using the state directory"), second.log)
    }

    func test_socketModeAndGroup_widenTheDirectoryOnlyAsAsked() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to create a group")
        let sandbox = try Sandbox()
        let user = try TestUser.make("obsd-test-grp")
        try sandbox.write("socket_mode = 0660\nsocket_group = \(user.gid)\n", to: sandbox.config)
        let obsd = try ObsdProcess(sandbox, arguments: ["--config", sandbox.config, "--socket", sandbox.socket,
                                                        "--state-dir", sandbox.state])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        var info = stat()
        XCTAssertEqual(stat(sandbox.root + "/run", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o750)
        XCTAssertEqual(info.st_gid, user.gid)
        XCTAssertEqual(stat(sandbox.socket, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o660)
        XCTAssertEqual(info.st_gid, user.gid)
    }

    /// A uid that is not allowed gets one permission_denied line and is closed; a read-only uid can
    /// read but not write; a write uid can write.
    func test_peerCredentials_andTheAllowSetting() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to create users and connect as them")
        let sandbox = try Sandbox()
        let stranger = try TestUser.make("obsd-test-none")
        let reader = try TestUser.make("obsd-test-ro")
        let writer = try TestUser.make("obsd-test-rw")
        try sandbox.write("""
            socket_mode = 0666
            allow = user:obsd-test-ro:read, user:\(writer.uid):write

            """, to: sandbox.config)
        let obsd = try ObsdProcess(sandbox, arguments: ["--config", sandbox.config, "--socket", sandbox.socket,
                                                        "--state-dir", sandbox.state])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        var info = stat()
        XCTAssertEqual(stat(sandbox.root + "/run", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o701, "others get only search permission on the directory")

        let refused = try stranger.connect(sandbox.socket)
        XCTAssertEqual(errorCode(refused.readLine()), "permission_denied")
        XCTAssertTrue(refused.readsEOF())

        let owner = try Client(sandbox.socket)
        owner.send("{\"op\":\"set\",\"key\":\"k\",\"value\":1}\n")
        XCTAssertEqual(json(owner.readLine())["ok"] as? Bool, true)

        let readOnly = try reader.connect(sandbox.socket)
        readOnly.send("{\"op\":\"get\",\"key\":\"k\"}\n{\"op\":\"set\",\"key\":\"k\",\"value\":2}\n{\"op\":\"watch\",\"keys\":[\"k\"]}\n")
        XCTAssertEqual(json(readOnly.readLine())["value"] as? Int, 1)
        XCTAssertEqual(errorCode(readOnly.readLine()), "permission_denied")
        XCTAssertEqual(json(readOnly.readLine())["ok"] as? Bool, true, "a reader may watch")

        let readWrite = try writer.connect(sandbox.socket)
        readWrite.send("{\"op\":\"set\",\"key\":\"k\",\"value\":3}\n")
        XCTAssertEqual(json(readWrite.readLine())["rev"] as? Int, 2)
        XCTAssertTrue(obsd.log.contains("uid \(stranger.uid)"), obsd.log)
    }
}

/// A system user the test creates (once per machine) to connect as.
struct TestUser {
    let uid: UInt32
    let gid: UInt32

    static func make(_ name: String) throws -> TestUser {
        if getpwnam(name) == nil {
            let useradd = Process()
            useradd.executableURL = URL(fileURLWithPath: "/usr/sbin/useradd")
            useradd.arguments = ["--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", name]
            try useradd.run()
            useradd.waitUntilExit()
        }
        guard let entry = getpwnam(name) else { throw XCTSkip("cannot create user \(name)") }
        return TestUser(uid: entry.pointee.pw_uid, gid: entry.pointee.pw_gid)
    }

    /// Connects with this user's credentials: SO_PEERCRED reports the effective ids at connect
    /// time, so switching them around connect(2) is enough.
    func connect(_ path: String) throws -> Client {
        var groups: [gid_t] = [gid]
        setgroups(1, &groups)
        setegid(gid)
        seteuid(uid)
        defer {
            seteuid(0)
            setegid(0)
            var root: [gid_t] = [0]
            setgroups(1, &root)
        }
        return try Client(path)
    }
}

extension SecurityTests {
    func test_existingDirectory_gainsOnlyWhatTheSocketModeNeeds() throws {
        let sandbox = try Sandbox()
        mkdir(sandbox.root + "/run", 0o700)
        chmod(sandbox.root + "/run", 0o700)
        try sandbox.write("socket_mode = 0606\n", to: sandbox.config)
        let obsd = try ObsdProcess(sandbox, arguments: ["--config", sandbox.config, "--socket", sandbox.socket,
                                                        "--state-dir", sandbox.state])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        var info = stat()
        XCTAssertEqual(stat(sandbox.root + "/run", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o701)
        XCTAssertEqual(stat(sandbox.socket, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o606)
    }
}
