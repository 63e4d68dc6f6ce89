import Foundation
import Glibc
import XCTest
@testable import ObsDaemon

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
