// systemd integration against the real obsd: sd_notify on a NOTIFY_SOCKET the test binds, and
// socket activation through systemd-socket-activate.
import Foundation
import Glibc
import TestSupport
import XCTest

final class SystemdTests: XCTestCase {
    /// A datagram socket bound in the sandbox that collects sd_notify messages.
    private final class NotifyListener {
        let path: String
        let fd: Int32

        init(_ sandbox: Sandbox) {
            path = sandbox.root + "/notify.sock"
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            var timeout = timeval(tv_sec: 20, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(fd) }

        /// The next message, or "" after the timeout.
        func next() -> String {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &buffer, buffer.count, 0)
            return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : ""
        }

        /// The next message that is not a watchdog ping.
        func nextState() -> String {
            while true {
                let message = next()
                if message != "WATCHDOG=1" { return message }
            }
        }
    }

    func test_sdNotify_readyReloadingWatchdogStopping() throws {
        let sandbox = try Sandbox()
        let notify = NotifyListener(sandbox)
        try sandbox.write("log_level = info\n", to: sandbox.config)
        let obsd = try ObsdProcess(sandbox, arguments: ["--config", sandbox.config, "--socket", sandbox.socket,
                                                        "--state-dir", sandbox.state],
                                   environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "200000"])
        let ready = notify.nextState()
        XCTAssertTrue(ready.split(separator: "\n").contains("READY=1"), ready)
        XCTAssertTrue(ready.contains("MAINPID=\(obsd.pid)"), ready)
        // READY means listening: a connection succeeds at once.
        let client = try Client(sandbox.socket)
        client.send("{\"op\":\"ping\"}\n")
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)

        var sawWatchdog = false
        for _ in 0..<10 where !sawWatchdog { sawWatchdog = notify.next() == "WATCHDOG=1" }
        XCTAssertTrue(sawWatchdog, "WATCHDOG=1 is sent when WATCHDOG_USEC is set")

        obsd.signal(SIGHUP)
        let reloading = notify.nextState()
        let lines = reloading.split(separator: "\n")
        XCTAssertEqual(lines.first, "RELOADING=1", reloading)
        XCTAssertTrue(lines.contains { $0.hasPrefix("MONOTONIC_USEC=") && UInt64($0.dropFirst(15)) != nil }, reloading)
        XCTAssertTrue(notify.nextState().split(separator: "\n").contains("READY=1"))

        obsd.signal(SIGTERM)
        XCTAssertEqual(notify.nextState(), "STOPPING=1")
        XCTAssertEqual(obsd.waitForExit(), 0)
    }

    func test_socketActivation_usesTheSocketSystemdPasses() throws {
        guard let activate = ["/usr/bin/systemd-socket-activate", "/bin/systemd-socket-activate"]
            .first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            if ProcessInfo.processInfo.environment["CI"] != nil {
                XCTFail("systemd-socket-activate is not installed: scripts/test installs it")
            }
            throw XCTSkip("systemd-socket-activate is not installed (scripts/test installs it)")
        }
        let sandbox = try Sandbox()
        mkdir(sandbox.root + "/run", 0o700)
        let notify = NotifyListener(sandbox)
        // systemd-socket-activate listens, then on the first connection execs obsd with the
        // listening socket as fd 3 and LISTEN_FDS/LISTEN_PID set.
        let obsd = try ObsdProcess(sandbox, arguments: [
            "--listen=\(sandbox.socket)", "-E", "NOTIFY_SOCKET=\(notify.path)",
            try builtExecutable("obsd"), "--socket", sandbox.root + "/unused/obsd.sock", "--state-dir", sandbox.state,
        ], executable: activate, name: "activate")
        // The socket file exists once bound, a moment before it listens: connect until it takes.
        var connected: Client?
        XCTAssertTrue(waitFor("the activation socket") {
            connected = try? Client(sandbox.socket)
            return connected != nil
        })
        let client = try XCTUnwrap(connected)
        client.send("{\"id\":1,\"op\":\"set\",\"key\":\"a\",\"value\":1}\n")
        XCTAssertEqual(json(client.readLine())["rev"] as? Int, 1, obsd.log)
        XCTAssertTrue(notify.nextState().contains("READY=1"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.root + "/unused"), "obsd bound no socket of its own")
        XCTAssertTrue(obsd.log.contains("the socket systemd passed"), obsd.log)

        obsd.signal(SIGTERM)
        XCTAssertEqual(obsd.waitForExit(), 0, obsd.log)
        XCTAssertEqual(json(client.readLine())["event"] as? String, "goodbye")
    }
}
