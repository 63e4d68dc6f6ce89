import Foundation
import Glibc
import XCTest
@testable import ObsDaemon

final class LoggerTests: XCTestCase {
    private final class Lines: @unchecked Sendable {
        var values: [String] = []
    }

    func test_journal_prefixesSyslogPriorities() {
        let lines = Lines()
        let log = Logger(level: .debug, journal: true) { lines.values.append($0) }
        log.debug("d")
        log.info("i")
        log.warn("w")
        log.error("e\nsecond line")
        XCTAssertEqual(lines.values, ["<7>d\n", "<6>i\n", "<4>w\n", "<3>e second line\n"])
    }

    func test_plain_namesTheLevel_andFiltersBelowIt() {
        let lines = Lines()
        let log = Logger(level: .warn, journal: false) { lines.values.append($0) }
        log.info("hidden")
        log.warn("shown")
        log.level = .error
        log.warn("hidden too")
        XCTAssertEqual(lines.values, ["obsd: warn: shown\n"])
    }
}

final class AccessPolicyTests: XCTestCase {
    func test_ownerAndRoot_haveWriteAccess_othersNone() {
        let policy = AccessPolicy([], owner: 1000)
        XCTAssertEqual(policy.access(for: PeerCredentials(pid: 1, uid: 1000, gid: 1000)), .write)
        XCTAssertEqual(policy.access(for: PeerCredentials(pid: 1, uid: 0, gid: 0)), .write)
        XCTAssertNil(policy.access(for: PeerCredentials(pid: 1, uid: 1001, gid: 1001)))
    }

    func test_userAndGroupRules_grantTheirAccess_widestWins() {
        let policy = AccessPolicy([AllowRule(.user("4242"), .read), AllowRule(.group("4343"), .write),
                                   AllowRule(.user("4444"), .read), AllowRule(.user("4444"), .write)], owner: 1000)
        XCTAssertEqual(policy.access(for: PeerCredentials(pid: 1, uid: 4242, gid: 1)), .read)
        XCTAssertEqual(policy.access(for: PeerCredentials(pid: 1, uid: 4242, gid: 4343)), .write, "primary group")
        XCTAssertEqual(policy.access(for: PeerCredentials(pid: 1, uid: 4444, gid: 1)), .write)
        XCTAssertNil(policy.access(for: PeerCredentials(pid: 1, uid: 4545, gid: 1)))
    }

    func test_unknownNames_grantNothing_andAreReported() {
        var unresolved: [AllowRule] = []
        let policy = AccessPolicy([AllowRule(.user("no-such-user-obsd"), .write), AllowRule(.group("no-such-group-obsd"), .read)],
                                  owner: 1000) { unresolved.append($0) }
        XCTAssertEqual(unresolved.count, 2)
        XCTAssertNil(policy.access(for: PeerCredentials(pid: 1, uid: 4242, gid: 4242)))
    }

    /// In a user namespace that maps only some uids (systemd's PrivateUsers=), every other user
    /// connects as the overflow uid: a rule for that uid would let everyone in, so it is ignored.
    func test_peersOutsideAPartialUserNamespace_getNothing_evenIfAllowNamesTheirUid() {
        XCTAssertNil(unmappedUID(uidMap: "         0          0 4294967295\n", overflow: "65534\n"), "the initial namespace")
        XCTAssertEqual(unmappedUID(uidMap: "0 0 1\n61895 61895 1\n", overflow: "65534\n"), 65534)
        let policy = AccessPolicy([AllowRule(.user("65534"), .write)], owner: 61895, unmapped: 65534)
        XCTAssertNil(policy.access(for: PeerCredentials(pid: 1, uid: 65534, gid: 65534)))
        XCTAssertEqual(policy.access(for: PeerCredentials(pid: 1, uid: 0, gid: 0)), .write)
        XCTAssertEqual(policy.access(for: PeerCredentials(pid: 1, uid: 61895, gid: 61895)), .write)
    }

    func test_names_resolveThroughPasswd() {
        let policy = AccessPolicy([AllowRule(.user("root"), .read), AllowRule(.group("root"), .read)], owner: 1000)
        XCTAssertEqual(policy.access(for: PeerCredentials(pid: 1, uid: 0, gid: 0)), .write, "root always writes")
    }
}

final class NotifierTests: XCTestCase {
    /// Binds a datagram socket at `path` (or an abstract name) and returns its fd.
    private func bindDatagram(_ name: [UInt8]) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: name) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + name.count)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        XCTAssertEqual(result, 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    private func receive(_ fd: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : ""
    }

    func test_sendsDatagramsToAPathSocket() {
        let path = NSTemporaryDirectory() + "obsd-notify-\(getpid())-\(Int.random(in: 0..<1_000_000)).sock"
        let fd = bindDatagram(Array(path.utf8))
        defer { close(fd); unlink(path) }
        let notifier = Notifier(socketPath: path, log: Logger(level: .error, journal: false))
        notifier.send("READY=1")
        notifier.reloading()
        XCTAssertEqual(receive(fd), "READY=1")
        let reloading = receive(fd)
        XCTAssertTrue(reloading.hasPrefix("RELOADING=1\nMONOTONIC_USEC="), reloading)
        XCTAssertNotNil(UInt64(reloading.split(separator: "=").last ?? ""))
    }

    func test_sendsDatagramsToAnAbstractSocket() {
        let name = "obsd-notify-test-\(getpid())-\(Int.random(in: 0..<1_000_000))"
        let fd = bindDatagram([0] + Array(name.utf8))
        defer { close(fd) }
        Notifier(socketPath: "@" + name, log: Logger(level: .error, journal: false)).send("STOPPING=1")
        XCTAssertEqual(receive(fd), "STOPPING=1")
    }

    func test_withoutNotifySocket_doesNothing() {
        XCTAssertFalse(Notifier(socketPath: nil, log: Logger(level: .error, journal: false)).isActive)
        XCTAssertFalse(Notifier(socketPath: "relative", log: Logger(level: .error, journal: false)).isActive)
    }

    func test_watchdogInterval_followsWatchdogUsecAndPid() {
        XCTAssertEqual(watchdogInterval(DaemonEnvironment(variables: ["WATCHDOG_USEC": "2000000"], uid: 0)), 2)
        XCTAssertEqual(watchdogInterval(DaemonEnvironment(variables: ["WATCHDOG_USEC": "500000", "WATCHDOG_PID": "\(getpid())"], uid: 0)), 0.5)
        XCTAssertNil(watchdogInterval(DaemonEnvironment(variables: ["WATCHDOG_USEC": "500000", "WATCHDOG_PID": "1"], uid: 0)))
        XCTAssertNil(watchdogInterval(DaemonEnvironment(variables: [:], uid: 0)))
    }
}
