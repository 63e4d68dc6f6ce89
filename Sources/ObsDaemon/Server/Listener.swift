// The listening socket and the rules of docs/operations.md's Security section:
// 1. The socket's directory is created 0700 if missing (and its missing parents 0711), and widened
//    only as socket_mode and socket_group ask: a group gets r-x on the directory (0750, with that
//    group), others get --x. A directory that already exists must be a real directory (not a
//    symlink), owned by us and writable by nobody else, or someone else could swap the socket; it
//    gains the bits the socket needs and is never narrowed (an operator may have opened it on
//    purpose). Every component above it is checked too (SafeDirectory.swift): only directories of
//    root or ours, others' write access only with the sticky bit, symlinks only of root or ours.
// 2. A socket path that is a symlink or some other file is refused. A socket file with a live
//    daemon behind it (connect succeeds) means "already running"; one nobody listens on is stale
//    and replaced.
// 3. bind runs under a umask that yields the configured mode, then chmod/chown set it exactly,
//    all before listen: no client can connect before the mode is final.
// With socket activation (LISTEN_FDS) systemd made the socket, so none of this applies.
// CLinux too: its shim includes <sys/socket.h>, and when another file of the module loads it first,
// SOCK_* and MSG_* are visible only through it.
import CLinux
import Glibc

final class Listener {
    let fd: Int32
    /// The path to unlink at shutdown; nil when systemd owns the socket.
    let ownedPath: String?

    private init(fd: Int32, ownedPath: String?) {
        self.fd = fd
        self.ownedPath = ownedPath
    }

    deinit { close(fd) }

    /// The socket systemd passed (fd 3) when LISTEN_PID is this process and LISTEN_FDS ≥ 1. The
    /// variables are removed so children do not think the socket is theirs.
    static func activated(_ environment: DaemonEnvironment) throws(ListenerError) -> Listener? {
        guard let pid = environment["LISTEN_PID"], pid == String(getpid()),
              let count = environment["LISTEN_FDS"].flatMap(Int.init), count >= 1 else { return nil }
        for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(name) }
        let fd: Int32 = 3
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        var listening: Int32 = 0
        var listeningLength = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &length) == 0, type == Int32(SOCK_STREAM.rawValue),
              getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &listeningLength) == 0, listening != 0 else {
            throw ListenerError("LISTEN_FDS passed fd 3, which is not a listening stream socket")
        }
        try setNonBlocking(fd)
        return Listener(fd: fd, ownedPath: nil)
    }

    /// Creates, secures and binds the socket at `settings.socket`.
    static func bind(_ settings: Settings) throws(ListenerError) -> Listener {
        var address = sockaddr_un()
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard settings.socket.utf8.count < capacity else {
            throw ListenerError("socket path \(settings.socket) is longer than \(capacity - 1) bytes")
        }
        let group = try settings.socketGroup.map { (name) throws(ListenerError) in try groupID(name) }
        let path = try prepareDirectory(directory(of: settings.socket), mode: settings.socketMode, group: group) + "/" + name(of: settings.socket)
        try removeStaleSocket(path)

        guard path.utf8.count < capacity else {
            throw ListenerError("socket path \(path) (\(settings.socket) with its symlinks resolved) is longer than \(capacity - 1) bytes")
        }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ListenerError("cannot create a socket: \(SystemError("socket"))") }
        let previous = umask(0o777 & ~mode_t(settings.socketMode))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        let bindError = errno
        umask(previous)
        guard bound == 0 else {
            close(fd)
            throw ListenerError("cannot bind \(path): \(SystemError("bind", code: bindError))")
        }
        guard chmod(path, mode_t(settings.socketMode)) == 0,
              group.map({ chown(path, uid_t.max, $0) == 0 }) ?? true else {
            let error = SystemError("chmod/chown \(path)")
            close(fd)
            unlink(path)
            throw ListenerError("cannot set the socket's mode: \(error)")
        }
        guard listen(fd, 512) == 0 else {
            let error = SystemError("listen")
            close(fd)
            unlink(path)
            throw ListenerError("cannot listen on \(path): \(error)")
        }
        return Listener(fd: fd, ownedPath: path)
    }

    /// Removes the socket file if it is still the one this listener bound.
    func removeSocketFile() {
        guard let ownedPath else { return }
        var info = stat()
        guard lstat(ownedPath, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return }
        unlink(ownedPath)
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func name(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// The socket's directory, checked or created under SafeDirectory's rules (missing parents
    /// 0711: others may only pass through), then given what `socket_mode` and `socket_group`
    /// need. Returns the directory with symlinks above it resolved.
    private static func prepareDirectory(_ directory: String, mode socketMode: UInt32, group: gid_t?) throws(ListenerError) -> String {
        var wanted: mode_t = 0o700
        if group != nil, socketMode & 0o060 != 0 { wanted |= 0o050 }
        if socketMode & 0o006 != 0 { wanted |= 0o001 }
        let prepared: SafeDirectory.Prepared
        do throws(UnsafePathError) {
            prepared = try SafeDirectory.prepare(directory, role: "socket directory", mode: 0o700, parentMode: 0o711,
                                                 allowSymlink: false)
        } catch {
            throw ListenerError(error.description)
        }
        let path = prepared.path
        if prepared.created {
            guard group.map({ chown(path, uid_t.max, $0) == 0 }) ?? true, chmod(path, wanted) == 0 else {
                throw ListenerError("cannot set the mode of socket directory \(path): \(SystemError("chmod"))")
            }
            return path
        }
        // Our own directory gains what socket_mode and socket_group need, and keeps what it had.
        let info = prepared.info
        if let group, info.st_gid != group, chown(path, uid_t.max, group) != 0 {
            throw ListenerError("cannot give socket directory \(path) to group \(group): \(SystemError("chown"))")
        }
        if info.st_mode & wanted != wanted, chmod(path, (info.st_mode & 0o777) | wanted) != 0 {
            throw ListenerError("cannot widen socket directory \(path): \(SystemError("chmod"))")
        }
        return path
    }

    private static func removeStaleSocket(_ path: String) throws(ListenerError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT != S_IFLNK else {
            throw ListenerError("socket path \(path) is a symlink; refusing to use it")
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw ListenerError("\(path) exists and is not a socket")
        }
        if isLive(path) {
            throw ListenerError("another obsd is already running on \(path)")
        }
        guard unlink(path) == 0 || errno == ENOENT else {
            throw ListenerError("cannot remove stale socket \(path): \(SystemError("unlink"))")
        }
    }

    /// Whether something accepts connections on the socket at `path`.
    static func isLive(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8.prefix($0.count - 1))) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        // Only a refused connection proves nobody listens; anything else (a full backlog: EAGAIN)
        // means a daemon is there.
        return result == 0 || errno != ECONNREFUSED
    }

    static func setNonBlocking(_ fd: Int32) throws(ListenerError) {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw ListenerError("cannot make fd \(fd) non-blocking: \(SystemError("fcntl"))")
        }
    }
}

/// Why obsd cannot listen; the message is for the operator.
struct ListenerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A group's id from its name or number.
func groupID(_ name: String) throws(ListenerError) -> gid_t {
    if let number = gid_t(name) { return number }
    var group = group()
    var result: UnsafeMutablePointer<group>?
    var buffer = [CChar](repeating: 0, count: 16384)
    guard getgrnam_r(name, &group, &buffer, buffer.count, &result) == 0, result != nil else {
        throw ListenerError("no such group '\(name)'")
    }
    return group.gr_gid
}
