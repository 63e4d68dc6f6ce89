import CLinux
import Glibc

/// Who is at the other end of a TCP connection from this machine.
enum PeerOwner {
    /// Whether the socket at the other end of `socket` belongs to this process's user (its
    /// effective uid): false when it belongs to another, or cannot be told (see `obs_tcp_peer_uid`).
    @Sendable static func isOwnUser(_ socket: Int32) -> Bool {
        var uid: uid_t = 0
        return obs_tcp_peer_uid(socket, &uid) == 0 && uid == geteuid()
    }
}
