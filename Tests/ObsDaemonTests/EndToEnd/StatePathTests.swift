// The state directory and the socket's path against the real obsd: the same rules for both
// (docs/operations.md, Security), and the lock and database never reached through a symlink.
import Foundation
import Glibc
import TestSupport
import XCTest

final class StatePathTests: XCTestCase {
    private func start(_ sandbox: Sandbox, socket: String? = nil, state: String) throws -> ObsdProcess {
        try ObsdProcess(sandbox, arguments: ["--socket", socket ?? sandbox.socket, "--state-dir", state])
    }

    private func refused(_ obsd: ObsdProcess, saying text: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(obsd.waitForExit(), 1, obsd.log, file: file, line: line)
        XCTAssertTrue(obsd.log.contains(text), "expected '\(text)' in:\n\(obsd.log)", file: file, line: line)
    }

    /// A root obsd given a world-writable state directory of another user, in which that user
    /// planted `obsd.lock` and `obsd.db` as symlinks to files of root's: it must touch neither.
    func test_aStateDirectoryOfAnotherUser_withPlantedSymlinks_isRefused_andNothingIsWritten() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to give the directory to another user")
        let sandbox = try Sandbox()
        let user = try TestUser.make("obsd-test-other")
        let victim = sandbox.root + "/victim"
        mkdir(victim, 0o700)
        let state = sandbox.root + "/shared"
        mkdir(state, 0o777)
        chmod(state, 0o777)
        for name in ["obsd.lock", "obsd.db"] {
            XCTAssertEqual(symlink(victim + "/" + name, state + "/" + name), 0)
            lchown(state + "/" + name, user.uid, user.gid)
        }
        chown(state, user.uid, user.gid)
        refused(try start(sandbox, state: state), saying: "state directory \(state) belongs to uid \(user.uid)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: victim), [], "nothing created where the symlinks point")

        // Even given to root, a directory others can write is refused: they could swap the files.
        chown(state, 0, 0)
        refused(try start(sandbox, state: state), saying: "state directory \(state) is writable by others (mode 777); make it 0700")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: victim), [])
    }

    func test_aStateDirectoryThatIsASymlinkOfAnotherUser_isRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to make a symlink of another user")
        let sandbox = try Sandbox()
        let user = try TestUser.make("obsd-test-other")
        let elsewhere = sandbox.root + "/elsewhere"
        mkdir(elsewhere, 0o700)
        XCTAssertEqual(symlink(elsewhere, sandbox.state), 0)
        lchown(sandbox.state, user.uid, user.gid)
        refused(try start(sandbox, state: sandbox.state), saying: "\(sandbox.state) (on the path of state directory \(sandbox.state)) is a symlink of uid \(user.uid)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: elsewhere), [])
    }

    func test_aStateDirectoryWritableByItsGroup_isRefused() throws {
        let sandbox = try Sandbox()
        mkdir(sandbox.state, 0o770)
        chmod(sandbox.state, 0o770)
        refused(try start(sandbox, state: sandbox.state), saying: "state directory \(sandbox.state) is writable by others (mode 770)")
    }

    func test_aParentOthersCanWrite_withoutTheStickyBit_isRefused() throws {
        let sandbox = try Sandbox()
        let open = sandbox.root + "/open"
        mkdir(open, 0o777)
        chmod(open, 0o777)
        refused(try start(sandbox, state: open + "/state"),
                saying: "\(open) (on the path of state directory \(open)/state) is writable by others (mode 777) and not sticky")
        // With the sticky bit (like /tmp) nobody else can rename what is ours: accepted.
        chmod(open, 0o1777)
        let obsd = try start(sandbox, state: open + "/state")
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
    }

    func test_aSymlinkedLockFileOrDatabase_inItsOwnDirectory_isNotFollowed() throws {
        let sandbox = try Sandbox()
        let target = sandbox.root + "/target"
        try Data("precious".utf8).write(to: URL(fileURLWithPath: target))
        mkdir(sandbox.state, 0o700)
        XCTAssertEqual(symlink(target, sandbox.state + "/obsd.lock"), 0)
        refused(try start(sandbox, state: sandbox.state), saying: "lock file \(sandbox.state)/obsd.lock is a symlink")
        unlink(sandbox.state + "/obsd.lock")
        XCTAssertEqual(symlink(target, sandbox.state + "/obsd.db"), 0)
        refused(try start(sandbox, state: sandbox.state), saying: "database file \(sandbox.state)/obsd.db is a symlink")
        XCTAssertEqual(try String(contentsOfFile: target, encoding: .utf8), "precious")
    }

    /// systemd's DynamicUser= layout: /var/lib/NAME is root's symlink to private/NAME. A symlink of
    /// root's (or of obsd's own user) in a directory nobody else can write is followed.
    func test_aStateDirectoryReachedThroughATrustedSymlink_isUsed() throws {
        let sandbox = try Sandbox()
        mkdir(sandbox.root + "/private", 0o700)
        mkdir(sandbox.root + "/private/obsd", 0o700)
        XCTAssertEqual(symlink("private/obsd", sandbox.state), 0)
        let obsd = try start(sandbox, state: sandbox.state)
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.root + "/private/obsd/obsd.db"))
        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0)
        let check = try ObsdProcess(sandbox, arguments: ["--state-dir", sandbox.state, "--check"])
        XCTAssertEqual(check.waitForExit(), 0, check.output)
    }

    func test_theSocketDirectorysMissingParents_areCreated_passableOnly() throws {
        let sandbox = try Sandbox()
        let socket = sandbox.root + "/a/b/run/obsd.sock"
        let obsd = try start(sandbox, socket: socket, state: sandbox.state)
        XCTAssertTrue(obsd.waitUntilListening(socket), obsd.log)
        var info = stat()
        for (path, mode) in [(sandbox.root + "/a", 0o711), (sandbox.root + "/a/b", 0o711), (sandbox.root + "/a/b/run", 0o700)] {
            XCTAssertEqual(stat(path, &info), 0, path)
            XCTAssertEqual(info.st_mode & 0o7777, mode_t(mode), path)
        }
    }

    func test_aSymlinkHigherUpTheSocketPath_ofAnotherUser_isRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to make a symlink of another user")
        let sandbox = try Sandbox()
        let user = try TestUser.make("obsd-test-other")
        let theirs = sandbox.root + "/theirs"
        mkdir(theirs, 0o755)
        chown(theirs, user.uid, user.gid)
        XCTAssertEqual(symlink(theirs, sandbox.root + "/link"), 0)
        lchown(sandbox.root + "/link", user.uid, user.gid)
        let socket = sandbox.root + "/link/run/obsd.sock"
        refused(try start(sandbox, socket: socket, state: sandbox.state),
                saying: "\(sandbox.root)/link (on the path of socket directory \(sandbox.root)/link/run) is a symlink of uid \(user.uid)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: theirs), [])
        // Their directory itself, reached without a symlink, is refused as well: they could swap
        // the socket's directory inside it.
        refused(try start(sandbox, socket: theirs + "/run/obsd.sock", state: sandbox.state),
                saying: "\(theirs) (on the path of socket directory \(theirs)/run) belongs to uid \(user.uid)")
    }
}
