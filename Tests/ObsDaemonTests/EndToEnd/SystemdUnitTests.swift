// The shipped config/obsd.service, run by a real systemd, so that its settings apply the way
// systemd applies them (DynamicUser=, the sandbox, LimitNOFILE=, StateDirectory='s symlink),
// not only the way obsd reads them.
//
// systemd boots as PID 1 of a fresh PID and mount namespace (`unshare`), with its own /run, /var/lib,
// /tmp and an overlay on /etc, so nothing of the machine's is touched: /usr/local/bin holds the
// obsd under test, the unit path holds the unit exactly as shipped (plus a drop-in that only sends
// its output to a file), and /etc/obsd/obsd.conf says who may connect. The test then connects from
// outside, as root and as users it creates, through the bind-mounted /run.
import Foundation
import Glibc
import TestSupport
import XCTest

final class SystemdUnitTests: XCTestCase {
    private var repository: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// systemd and obsd.service, booted in namespaces of their own.
    private final class BootedUnit {
        let sandbox: Sandbox
        let process = Process()

        init(_ sandbox: Sandbox, unit: String, config: String, obsd: String) throws {
            self.sandbox = sandbox
            let root = sandbox.root
            // Modes set outright: the test process's umask may be anything (an in-process daemon
            // sets 077), and the service's dynamic user must reach /usr/local/bin and /etc/obsd.
            for directory in ["run", "run/obsd-test-units", "run/obsd-test-units/obsd.service.d", "varlib", "bin", "etc-upper",
                              "etc-upper/obsd", "etc-work"] {
                try FileManager.default.createDirectory(atPath: root + "/" + directory, withIntermediateDirectories: true)
                chmod(root + "/" + directory, 0o755)
            }
            try FileManager.default.copyItem(atPath: obsd, toPath: root + "/bin/obsd")
            chmod(root + "/bin/obsd", 0o755)
            try FileManager.default.copyItem(atPath: unit, toPath: root + "/run/obsd-test-units/obsd.service")
            try sandbox.write("[Unit]\nWants=obsd.service\n", to: root + "/run/obsd-test-units/obsd-test.target")
            try sandbox.write("[Service]\nStandardOutput=append:/run/obsd-test.log\nStandardError=append:/run/obsd-test.log\n",
                              to: root + "/run/obsd-test-units/obsd.service.d/output.conf")
            try sandbox.write(config, to: root + "/etc-upper/obsd/obsd.conf")
            for file in ["run/obsd-test-units/obsd.service", "run/obsd-test-units/obsd-test.target",
                         "run/obsd-test-units/obsd.service.d/output.conf", "etc-upper/obsd/obsd.conf"] {
                chmod(root + "/" + file, 0o644)
            }
            try sandbox.write("""
                set -e
                mount --bind "$1/run" /run
                mount --bind "$1/varlib" /var/lib
                mount --bind "$1/bin" /usr/local/bin
                mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/etc-upper,workdir=$1/etc-work" /etc
                mount -t tmpfs -o mode=1777 tmpfs /tmp
                mount -t tmpfs -o mode=1777 tmpfs /var/tmp
                exec env container=obsd-test SYSTEMD_UNIT_PATH=/run/obsd-test-units /lib/systemd/systemd --unit=obsd-test.target

                """, to: root + "/boot.sh")
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            process.arguments = ["--pid", "--fork", "--mount", "--propagation", "private", "--mount-proc", "/bin/sh", root + "/boot.sh", root]
            FileManager.default.createFile(atPath: root + "/boot.log", contents: nil)
            process.standardOutput = FileHandle(forWritingAtPath: root + "/boot.log")
            process.standardError = FileHandle(forWritingAtPath: root + "/boot.log")
            try process.run()
        }

        var socket: String { sandbox.root + "/run/obsd/obsd.sock" }
        /// obsd's output, and what booting printed.
        var log: String {
            ["/run/obsd-test.log", "/boot.log"].map { (try? String(contentsOfFile: sandbox.root + $0, encoding: .utf8)) ?? "" }
                .joined(separator: "\n")
        }

        /// Killing systemd, PID 1 of its namespace, ends every process in it.
        deinit {
            let children = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/task/\(process.processIdentifier)/children",
                                        encoding: .utf8)) ?? ""
            for child in children.split(separator: " ").compactMap({ Int32($0) }) { kill(child, SIGKILL) }
            process.waitUntilExit()
        }
    }

    private func requireSystemd() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to boot systemd in namespaces of its own")
        guard FileManager.default.isExecutableFile(atPath: "/lib/systemd/systemd"),
              FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else {
            if ProcessInfo.processInfo.environment["CI"] != nil { XCTFail("systemd is not installed: scripts/test installs it") }
            throw XCTSkip("systemd is not installed (scripts/test installs it)")
        }
    }

    /// `allow` lets the users it names in, and only them, under the shipped unit; the unit's
    /// descriptor limit reaches obsd; the state directory is systemd's symlink to private/.
    func test_shippedUnit_allowWorks_andItsLimitsApply() throws {
        try requireSystemd()
        let writer = try TestUser.make("obsd-test-rw")
        let stranger = try TestUser.make("obsd-test-none")
        let sandbox = try Sandbox()
        // A rule for nobody too: under PrivateUsers= every stranger would arrive as nobody.
        let unit = try BootedUnit(sandbox, unit: repository + "/config/obsd.service",
                                  config: "socket_mode = 0666\nallow = user:obsd-test-rw:write, user:nobody:read\n",
                                  obsd: try builtExecutable("obsd"))
        XCTAssertTrue(waitFor("obsd under systemd to listen") { (try? Client(unit.socket)) != nil }, unit.log)

        let root = try Client(unit.socket)
        root.send(#"{"op":"set","key":"from-root","value":1}"# + "\n")
        XCTAssertEqual(json(root.readLine())["ok"] as? Bool, true, unit.log)

        let allowed = try writer.connect(unit.socket)
        allowed.send(#"{"op":"set","key":"from-writer","value":2}"# + "\n")
        let answer = allowed.readLine()
        XCTAssertEqual(json(answer)["ok"] as? Bool, true, "a user `allow` names may write: \(answer ?? "no answer")\n\(unit.log)")

        let refused = try stranger.connect(unit.socket)
        XCTAssertEqual(errorCode(refused.readLine()), "permission_denied")
        XCTAssertTrue(refused.readsEOF())

        // The daemon as systemd runs it: a dynamic user, its soft descriptor limit at the hard one,
        // which is LimitNOFILE= unless this machine caps it lower.
        var credentials = obsd_peer()
        var length = socklen_t(MemoryLayout<obsd_peer>.size)
        XCTAssertEqual(getsockopt(root.fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length), 0)
        XCTAssertNotEqual(credentials.uid, 0, "DynamicUser=")
        let limits = try String(contentsOfFile: "/proc/\(credentials.pid)/limits", encoding: .utf8)
        let files = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }?
            .split(separator: " ").compactMap { Int($0) } ?? []
        var own = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &own)
        XCTAssertEqual(files, [min(65536, Int(own.rlim_max)), min(65536, Int(own.rlim_max))], limits)
        XCTAssertTrue(FileManager.default.fileExists(atPath: sandbox.root + "/varlib/private/obsd/obsd.db"), unit.log)
    }

    /// The hardening that makes `allow` work costs little: systemd rates the unit 2.0 or lower.
    func test_shippedUnit_exposureIsAtMost2() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            if ProcessInfo.processInfo.environment["CI"] != nil { XCTFail("systemd is not installed: scripts/test installs it") }
            throw XCTSkip("systemd-analyze is not installed (scripts/test installs it)")
        }
        let analyze = Process()
        analyze.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-analyze")
        analyze.arguments = ["security", "--offline=yes", "--no-pager", repository + "/config/obsd.service"]
        let output = Pipe()
        analyze.standardOutput = output
        analyze.standardError = output
        try analyze.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        analyze.waitUntilExit()
        let overall = text.split(separator: "\n").first { $0.contains("Overall exposure level for obsd.service:") } ?? ""
        let score = overall.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) }
        XCTAssertNotNil(score, text)
        XCTAssertLessThanOrEqual(score ?? 10, 2.0, String(overall))
    }
}

/// struct ucred, as SO_PEERCRED fills it.
private struct obsd_peer {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
