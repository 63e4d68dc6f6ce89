// The files obsd reads (configuration, definitions, etcd's TLS files) under the rules of
// SafeFile.swift: each planted or careless setup is refused with a message naming the path and the
// rule, and nothing blocks on a FIFO.
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import ObsDaemon

final class SafeFileTests: XCTestCase {
    private var sandbox: Sandbox!

    override func setUpWithError() throws {
        sandbox = try Sandbox()
        chmod(sandbox.root, 0o700)
    }

    override func tearDown() { sandbox = nil }

    /// A file with `text`, with exactly `mode`.
    private func file(_ name: String, _ text: String = "history = 7\n", mode: mode_t = 0o644) throws -> String {
        let path = sandbox.root + "/" + name
        try sandbox.write(text, to: path)
        chmod(path, mode)
        return path
    }

    /// The message of the refusal, or a failure when the file was read.
    private func refusal(_ path: String, secret: Bool = false, maxBytes: Int = 1 << 20,
                         file: StaticString = #filePath, line: UInt = #line) -> String {
        do {
            let contents = try SafeFile.read(path, role: "test file", maxBytes: maxBytes, secret: secret)
            XCTFail("read \(contents?.bytes.count ?? -1) bytes of \(path)", file: file, line: line)
            return ""
        } catch {
            XCTAssertTrue(error.description.contains(path) || error.description.contains(sandbox.root),
                          "names the path: \(error)", file: file, line: line)
            return error.description
        }
    }

    func test_aFileOfThisUser_isReadWhole_andAMissingOneIsNil() throws {
        let path = try file("obsd.conf", String(repeating: "x", count: 200_000))
        let contents = try XCTUnwrap(try SafeFile.read(path, role: "test file", maxBytes: 1 << 20))
        XCTAssertEqual(contents.bytes.count, 200_000)
        XCTAssertEqual(contents.path, path)
        XCTAssertNil(try SafeFile.read(sandbox.root + "/absent.conf", role: "test file", maxBytes: 1 << 20))
        XCTAssertNil(try SafeFile.read(sandbox.root + "/absent/obsd.conf", role: "test file", maxBytes: 1 << 20))
    }

    func test_devNull_readsAsEmpty() throws {
        XCTAssertEqual(try SafeFile.read("/dev/null", role: "test file", maxBytes: 10)?.bytes, [])
    }

    func test_aFileOthersCanWrite_isRefused() throws {
        XCTAssertTrue(refusal(try file("group.conf", mode: 0o664)).contains("writable by others"))
        XCTAssertTrue(refusal(try file("world.conf", mode: 0o646)).contains("writable by others"))
    }

    func test_aSecretEveryUserCanRead_isRefused_andOneForAGroupIsRead() throws {
        XCTAssertTrue(refusal(try file("key.pem", mode: 0o644), secret: true).contains("readable by every user"))
        XCTAssertNotNil(try SafeFile.read(try file("group-key.pem", mode: 0o640), role: "test file", maxBytes: 1 << 20, secret: true))
        XCTAssertNotNil(try SafeFile.read(try file("own-key.pem", mode: 0o600), role: "test file", maxBytes: 1 << 20, secret: true))
    }

    func test_aFileLargerThanTheBound_isRefused() throws {
        let path = try file("big.conf", String(repeating: "x", count: 1001))
        XCTAssertTrue(refusal(path, maxBytes: 1000).contains("more than the 1000 bytes"))
        XCTAssertEqual(try SafeFile.read(path, role: "test file", maxBytes: 1001)?.bytes.count, 1001)
    }

    func test_aFIFOOrADirectory_isRefusedWithoutBlocking() throws {
        let fifo = sandbox.root + "/fifo.conf"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        XCTAssertTrue(refusal(fifo).contains("not a regular file"))
        let directory = sandbox.root + "/dir.conf"
        mkdir(directory, 0o700)
        XCTAssertTrue(refusal(directory).contains("not a regular file"))
    }

    func test_symlinksOfThisUser_areFollowed_toTheFile() throws {
        // As certbot lays out its files: live/NAME/privkey.pem -> ../../archive/NAME/privkey1.pem.
        mkdir(sandbox.root + "/archive", 0o700)
        mkdir(sandbox.root + "/live", 0o755)
        let target = try file("archive/privkey1.pem", "KEY", mode: 0o600)
        XCTAssertEqual(symlink("../archive/privkey1.pem", sandbox.root + "/live/privkey.pem"), 0)
        let contents = try XCTUnwrap(try SafeFile.read(sandbox.root + "/live/privkey.pem", role: "test file",
                                                       maxBytes: 100, secret: true))
        XCTAssertEqual(contents.bytes, Array("KEY".utf8))
        XCTAssertEqual(contents.path, target)
    }

    func test_anotherUsersFileOrSymlinkOrDirectory_isRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to plant files of another user")
        let other = try TestUser.make("obsd-test-other")
        let foreign = try file("foreign.conf")
        chown(foreign, other.uid, other.gid)
        XCTAssertTrue(refusal(foreign).contains("belongs to uid \(other.uid)"))

        let mine = try file("mine.conf")
        XCTAssertEqual(symlink(mine, sandbox.root + "/link.conf"), 0)
        lchown(sandbox.root + "/link.conf", other.uid, other.gid)
        XCTAssertTrue(refusal(sandbox.root + "/link.conf").contains("symlink of uid \(other.uid)"))

        mkdir(sandbox.root + "/theirs", 0o755)
        chown(sandbox.root + "/theirs", other.uid, other.gid)
        let inside = try file("theirs/obsd.conf")
        XCTAssertTrue(refusal(inside).contains("every directory on the way must belong to root or to this user"))
    }

    func test_aDirectoryOthersCanWrite_isRefusedUnlessSticky() throws {
        mkdir(sandbox.root + "/open", 0o777)
        chmod(sandbox.root + "/open", 0o777)
        XCTAssertTrue(refusal(try file("open/obsd.conf")).contains("not sticky"))
        chmod(sandbox.root + "/open", 0o1777)
        XCTAssertNotNil(try SafeFile.read(sandbox.root + "/open/obsd.conf", role: "test file", maxBytes: 1 << 20))
    }

    /// A trailing slash names a directory (open(2) says ENOTDIR for a file): it is not read as
    /// the file.
    func test_aTrailingSlashAfterAFile_isNotReadAsTheFile() throws {
        let path = try file("slash.conf")
        XCTAssertThrowsError(try SafeFile.read(path + "/", role: "test file", maxBytes: 1 << 20))
    }

    /// A pipe reached through /proc/self/fd (`--config <(...)`, /dev/stdin) is refused as not a
    /// regular file, not reported as a file that does not exist.
    func test_aPipeThroughProcFD_isRefusedAsNotARegularFile() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        let path = "/proc/self/fd/\(fds[0])"
        XCTAssertThrowsError(try SafeFile.read(path, role: "test file", maxBytes: 1 << 20)) { error in
            XCTAssertTrue("\(error)".contains("not a regular file"), "\(error)")
        }
    }

    /// A dangling symlink as the file's own name is an error, not a missing file.
    func test_aDanglingSymlink_isAnError_notAMissingFile() throws {
        XCTAssertEqual(symlink(sandbox.root + "/gone.conf", sandbox.root + "/link.conf"), 0)
        XCTAssertTrue(refusal(sandbox.root + "/link.conf").contains("which does not exist"))
    }

    /// On a read-only mount nobody can write, whatever the modes say (as Kubernetes mounts a
    /// ConfigMap: a directory of mode 0777, read-only): the file is read there, and refused once
    /// the same directory is writable.
    func test_aDirectoryOthersCouldWrite_onAReadOnlyMount_isRead() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to mount")
        let source = sandbox.root + "/source", mounted = sandbox.root + "/mounted"
        mkdir(source, 0o777)
        chmod(source, 0o777)
        mkdir(mounted, 0o700)
        let path = try file("source/obsd.conf", "history = 7\n", mode: 0o666)
        XCTAssertTrue(refusal(path).contains("not sticky"))
        func mount(_ arguments: [String]) throws -> Bool {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/mount")
            process.arguments = arguments
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            return process.terminationStatus == 0
        }
        guard try mount(["--bind", source, mounted]) else { throw XCTSkip("cannot bind-mount here") }
        defer { umount(mounted) }
        XCTAssertTrue(try mount(["-o", "remount,bind,ro", mounted]))
        XCTAssertEqual(try SafeFile.read(mounted + "/obsd.conf", role: "test file", maxBytes: 100)?.bytes, Array("history = 7\n".utf8))
        XCTAssertTrue(refusal(mounted + "/obsd.conf", secret: true).contains("readable by every user"), "a secret still is not")
    }

    // MARK: - Through the configuration

    func test_aConfigurationFileWithThePassword_mustNotBeReadableByEveryone() throws {
        let path = try file("cluster.conf", "cluster = etcd\netcd_endpoints = http://127.0.0.1:2379\netcd_user = obsd\netcd_password = pw\n")
        XCTAssertThrowsError(try Configuration.readFile(path)) { error in
            XCTAssertTrue("\(error)".contains("readable by every user"), "\(error)")
            XCTAssertTrue("\(error)".contains("OBSD_ETCD_PASSWORD"), "\(error)")
        }
        chmod(path, 0o640)
        XCTAssertNotNil(try Configuration.readFile(path))
        // Without a password, the same mode is fine.
        XCTAssertNotNil(try Configuration.readFile(try file("plain.conf", "cluster = etcd\n", mode: 0o644)))
    }

    func test_aConfigurationFileOthersCanWrite_isRefused() throws {
        XCTAssertThrowsError(try Configuration.readFile(try file("open.conf", mode: 0o666))) { error in
            XCTAssertTrue("\(error)".contains("writable by others"), "\(error)")
        }
    }

    func test_theTLSFiles_areReadUnderTheRules_theKeyAsASecret() throws {
        var settings = ClusterSettings()
        settings.endpoints = ["https://127.0.0.1:2379"]
        settings.caFile = try file("ca.pem", "CA")
        settings.certFile = try file("cert.pem", "CERT")
        settings.keyFile = try file("key.pem", "KEY", mode: 0o644)
        XCTAssertThrowsError(try settings.tlsMaterial()) { error in
            XCTAssertTrue("\(error)".contains("etcd_key \(settings.keyFile!) is readable by every user"), "\(error)")
        }
        chmod(settings.keyFile!, 0o600)
        let material = try settings.tlsMaterial()
        XCTAssertEqual(material.ca, Array("CA".utf8))
        XCTAssertEqual(material.certificate, Array("CERT".utf8))
        XCTAssertEqual(material.key, Array("KEY".utf8))
        // Only bytes go to libcurl: the configuration names no file.
        let configuration = try settings.etcdConfigurationWithTLS()
        XCTAssertNil(configuration.caFile)
        XCTAssertNil(configuration.keyFile)
        XCTAssertEqual(configuration.tls, material)

        settings.caFile = sandbox.root + "/missing.pem"
        XCTAssertThrowsError(try settings.tlsMaterial()) { XCTAssertTrue("\($0)".contains("does not exist"), "\($0)") }
        settings.caFile = try file("empty.pem", "")
        XCTAssertThrowsError(try settings.tlsMaterial()) { XCTAssertTrue("\($0)".contains("is empty"), "\($0)") }
    }
}
