// Who may use the socket (docs/operations.md, Security): the daemon's own uid and root with write access,
// then the users and groups of the `allow` setting, each with its access; the widest matching
// rule wins. Names are resolved when the settings are loaded (start and reload), so accepting a
// connection costs no passwd lookup except for a group rule's supplementary-group check.
import CLinux
import Foundation
import Glibc
import ObsCore

/// The credentials SO_PEERCRED reports for a connected peer.
public struct PeerCredentials: Sendable, Equatable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32

    /// The peer of the connected Unix socket `fd`.
    static func of(_ fd: Int32) -> PeerCredentials? {
        var credentials = obsd_ucred()
        var length = socklen_t(MemoryLayout<obsd_ucred>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else { return nil }
        return PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
    }
}

public struct AccessPolicy: Sendable {
    private var users: [UInt32: Access] = [:]
    private var groups: [UInt32: Access] = [:]
    private let owner: UInt32
    /// The uid every peer outside obsd's user namespace shows up as, when obsd runs in one that
    /// does not map every uid (systemd's PrivateUsers=): such a peer could be anyone, so it gets
    /// nothing, whatever `allow` says about that uid (`nobody`).
    private let unmapped: UInt32?

    /// The policy for `rules`; `unresolved` receives each rule naming a user or group that does
    /// not exist (such a rule grants nothing).
    public init(_ rules: [AllowRule], owner: UInt32 = geteuid(), unmapped: UInt32? = unmappedUID(),
                unresolved: (AllowRule) -> Void = { _ in }) {
        self.owner = owner
        self.unmapped = unmapped
        for rule in rules {
            switch rule.subject {
            case .user(let name):
                guard let uid = userID(name) else { unresolved(rule); continue }
                users[uid] = widest(users[uid], rule.access)
            case .group(let name):
                guard let gid = try? groupID(name) else { unresolved(rule); continue }
                groups[gid] = widest(groups[gid], rule.access)
            }
        }
    }

    /// What a peer may do, or nil when it may not connect at all.
    public func access(for peer: PeerCredentials) -> Access? {
        if peer.uid == unmapped { return nil }
        if peer.uid == owner || peer.uid == 0 { return .write }
        var best = users[peer.uid]
        if !groups.isEmpty {
            for gid in memberships(uid: peer.uid, primary: peer.gid) {
                if let access = groups[gid] { best = widest(best, access) }
            }
        }
        return best
    }

    /// The peer's primary group and the supplementary groups its user belongs to.
    private func memberships(uid: UInt32, primary: UInt32) -> [UInt32] {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else {
            return [primary]
        }
        var count: Int32 = 64
        var list = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(name, primary, &list, &count) < 0 {
            list = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(name, primary, &list, &count) >= 0 else { return [primary] }
        }
        return Array(list.prefix(Int(count)))
    }
}

/// The uid the kernel reports for users outside this process's user namespace (the overflow uid,
/// normally 65534), or nil when the namespace maps every uid, as the initial one does.
public func unmappedUID(uidMap: String? = try? String(contentsOfFile: "/proc/self/uid_map", encoding: .utf8),
                        overflow: String? = try? String(contentsOfFile: "/proc/sys/kernel/overflowuid", encoding: .utf8)) -> UInt32? {
    guard let uidMap else { return nil }
    let ranges = uidMap.split(separator: "\n").map { $0.split(separator: " ").compactMap { UInt64($0) } }
    if ranges.count == 1, ranges[0] == [0, 0, 4_294_967_295] { return nil }
    return overflow.flatMap { UInt32($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 65534
}

/// A user's id from its name or number.
func userID(_ name: String) -> UInt32? {
    if let number = UInt32(name) { return number }
    var entry = passwd()
    var result: UnsafeMutablePointer<passwd>?
    var buffer = [CChar](repeating: 0, count: 16384)
    guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
    return entry.pw_uid
}

/// The wider of two grants: write includes read.
private func widest(_ current: Access?, _ other: Access) -> Access {
    current == .write ? .write : other
}
