import Glibc

/// Why connecting to the daemon's socket failed, told apart so that the message says what to do:
/// start obsd, fix the path, or get access.
public enum ConnectFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing at the path (or a directory on the way is missing).
    case missing
    /// Something is at the path, but not a socket (`kind` says what: "a regular file", ...).
    case notASocket(kind: String)
    /// A socket, but nothing listens on it: a daemon that stopped without removing it.
    case refused
    /// The caller may not reach the socket: `path` (the socket, or a directory on the way) has
    /// this owner, group and mode; `caller` names the user obsctl runs as and their groups.
    case permissionDenied(path: String, owner: String, group: String, mode: UInt32, caller: String)
    /// A socket path longer than the kernel's limit (108 bytes).
    case pathTooLong
    /// Nothing accepted the connection for `seconds`: the socket's queue of connections waiting
    /// to be accepted stayed full, as it does when obsd is stopped (SIGSTOP, Ctrl-Z), stuck, or
    /// swamped with connections.
    case notAccepting(seconds: Double)
    /// The caller gave up waiting (`Cancellation`).
    case cancelled
    /// Anything else, as the system describes it.
    case other(String)

    public var description: String {
        switch self {
        case .missing: "no such file (is obsd running?)"
        case .notASocket(let kind): "not a socket but \(kind) (is the path right?)"
        case .refused: "nothing is listening on the socket (is obsd running?)"
        case .permissionDenied(let path, let owner, let group, let mode, let caller):
            "permission denied: \(path) is owned by user \(owner) and group \(group), mode "
                + Self.octal(mode) + "; \(caller) (obsd's socket_mode, socket_group and allow settings say who may connect)"
        case .pathTooLong: "the path is longer than a Unix socket path may be (107 bytes)"
        case .notAccepting(let seconds):
            "obsd accepted no connection for \(Self.duration(seconds)): its queue of new connections is full (is it stopped or stuck?)"
        case .cancelled: "cancelled"
        case .other(let reason): reason
        }
    }

    /// The failure `connect(2)` reported as `code` for `path`, looked at more closely.
    static func diagnose(_ code: Int32, path: String) -> ConnectFailure {
        switch code {
        case ENOENT, ENOTDIR: return .missing
        case ECONNREFUSED:
            var info = stat()
            if stat(path, &info) == 0, info.st_mode & S_IFMT != S_IFSOCK { return .notASocket(kind: kind(info.st_mode)) }
            return .refused
        case EACCES, EPERM: return denied(path)
        default: return .other(String(cString: strerror(code)))
        }
    }

    /// Names the first directory on the way that the caller cannot search, or else the socket
    /// itself, which the caller cannot write.
    private static func denied(_ path: String) -> ConnectFailure {
        var blocking = path
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/").dropLast() {
            prefix += "/" + component
            if access(prefix, X_OK) != 0 {
                blocking = prefix
                break
            }
        }
        var info = stat()
        guard stat(blocking, &info) == 0 else { return .other(String(cString: strerror(EACCES))) }
        return .permissionDenied(path: blocking, owner: userName(info.st_uid), group: groupName(info.st_gid),
                                 mode: info.st_mode & 0o7777, caller: callerDescription())
    }

    /// "you are alice (uid 1000), in groups alice, users".
    static func callerDescription() -> String {
        let count = getgroups(0, nil)
        var groups = [gid_t](repeating: 0, count: Int(max(count, 0)))
        let filled = count > 0 ? getgroups(count, &groups) : 0
        var names = [groupName(getgid())]
        for gid in groups.prefix(Int(max(filled, 0))) where !names.contains(groupName(gid)) { names.append(groupName(gid)) }
        return "you are \(userName(getuid())) (uid \(getuid())), in groups \(names.joined(separator: ", "))"
    }

    static func userName(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "\(uid)" }
        return String(cString: name)
    }

    static func groupName(_ gid: gid_t) -> String {
        guard let entry = getgrgid(gid), let name = entry.pointee.gr_name else { return "\(gid)" }
        return String(cString: name)
    }

    private static func kind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: "a regular file"
        case S_IFDIR: "a directory"
        case S_IFIFO: "a named pipe"
        case S_IFCHR, S_IFBLK: "a device"
        default: "something else"
        }
    }

    /// "10 s", "250 ms".
    private static func duration(_ seconds: Double) -> String {
        seconds >= 1 ? "\(Int(seconds.rounded())) s" : "\(Int((seconds * 1000).rounded())) ms"
    }

    private static func octal(_ mode: UInt32) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
