import Foundation
import Glibc
import XCTest
@testable import ObsDaemon

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
