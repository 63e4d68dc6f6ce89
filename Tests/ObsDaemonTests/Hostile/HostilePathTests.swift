// Symlinks and foreign directories planted in the socket's and the state's paths, as another user
// would plant them: obsd refuses every one, naming the path, and creates nothing where they point.
import Foundation
import Glibc
import TestSupport
import XCTest

final class HostilePathTests: XCTestCase {
    /// One planted setup: prepares the sandbox (`victim` is where a followed link would lead), and
    /// gives the socket and state paths to start obsd with.
    private struct Setup {
        var name: String
        var prepare: (_ root: String, _ other: TestUser) -> (socket: String, state: String)
    }

    private func link(_ target: String, _ path: String, owner: TestUser? = nil) {
        symlink(target, path)
        if let owner { lchown(path, owner.uid, owner.gid) }
    }

    private func directory(_ path: String, mode: mode_t, owner: TestUser? = nil) {
        mkdir(path, mode)
        chmod(path, mode)
        if let owner { chown(path, owner.uid, owner.gid) }
    }

    func test_plantedSymlinksAndForeignDirectories_areAllRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to plant files of another user")
        let other = try TestUser.make("obsd-test-other")
        let setups: [Setup] = [
            Setup(name: "socket directory a symlink") { root, _ in
                self.link(root + "/victim", root + "/run")
                return (root + "/run/obsd.sock", root + "/state")
            },
            Setup(name: "socket a symlink") { root, _ in
                self.directory(root + "/run", mode: 0o700)
                self.link(root + "/victim/obsd.sock", root + "/run/obsd.sock")
                return (root + "/run/obsd.sock", root + "/state")
            },
            Setup(name: "socket directory of another user") { root, other in
                self.directory(root + "/run", mode: 0o700, owner: other)
                return (root + "/run/obsd.sock", root + "/state")
            },
            Setup(name: "socket directory writable by its group") { root, _ in
                self.directory(root + "/run", mode: 0o770)
                return (root + "/run/obsd.sock", root + "/state")
            },
            Setup(name: "another user's symlink above the socket directory") { root, other in
                self.link(root + "/victim", root + "/up", owner: other)
                return (root + "/up/run/obsd.sock", root + "/state")
            },
            Setup(name: "a parent of the socket directory writable by all, not sticky") { root, _ in
                self.directory(root + "/open", mode: 0o777)
                return (root + "/open/run/obsd.sock", root + "/state")
            },
            Setup(name: "state directory another user's symlink") { root, other in
                self.link(root + "/victim", root + "/state", owner: other)
                return (root + "/run/obsd.sock", root + "/state")
            },
            Setup(name: "state directory of another user, writable by all, with obsd.lock and obsd.db planted") { root, other in
                self.directory(root + "/state", mode: 0o777, owner: other)
                self.link(root + "/victim/obsd.lock", root + "/state/obsd.lock", owner: other)
                self.link(root + "/victim/obsd.db", root + "/state/obsd.db", owner: other)
                return (root + "/run/obsd.sock", root + "/state")
            },
            Setup(name: "state directory writable by its group") { root, _ in
                self.directory(root + "/state", mode: 0o770)
                return (root + "/run/obsd.sock", root + "/state")
            },
            Setup(name: "obsd.lock a symlink") { root, _ in
                self.directory(root + "/state", mode: 0o700)
                self.link(root + "/victim/obsd.lock", root + "/state/obsd.lock")
                return (root + "/run/obsd.sock", root + "/state")
            },
            Setup(name: "obsd.db a symlink") { root, _ in
                self.directory(root + "/state", mode: 0o700)
                self.link(root + "/victim/obsd.db", root + "/state/obsd.db")
                return (root + "/run/obsd.sock", root + "/state")
            },
            Setup(name: "obsd.db-wal a symlink") { root, _ in
                self.directory(root + "/state", mode: 0o700)
                self.link(root + "/victim/obsd.db-wal", root + "/state/obsd.db-wal")
                return (root + "/run/obsd.sock", root + "/state")
            },
            Setup(name: "a parent of the state directory writable by all, not sticky") { root, _ in
                self.directory(root + "/open", mode: 0o777)
                return (root + "/run/obsd.sock", root + "/open/state")
            },
        ]
        var refused = 0
        var created = 0
        for setup in setups {
            let sandbox = try Sandbox()
            let victim = sandbox.root + "/victim"
            directory(victim, mode: 0o777)
            let (socket, state) = setup.prepare(sandbox.root, other)
            let obsd = try ObsdProcess(sandbox, arguments: ["--socket", socket, "--state-dir", state])
            let status = obsd.waitForExit()
            XCTAssertEqual(status, 1, "\(setup.name): \(obsd.log)")
            XCTAssertTrue(obsd.log.contains(sandbox.root), "\(setup.name): the refusal names the path: \(obsd.log)")
            if status == 1 { refused += 1 }
            let planted = (try? FileManager.default.contentsOfDirectory(atPath: victim)) ?? []
            XCTAssertEqual(planted, [], "\(setup.name): created where a link points")
            created += planted.count
        }
        Hostile.report("planted paths", "\(setups.count) setups: \(refused) refused naming the path, \(created) files created where a link points")
    }
}
