// The directories obsd keeps its socket and its state in, checked before anything is created in
// them, with one set of rules (docs/operations.md, Security):
// 1. The path is walked from `/`, one component at a time, with lstat: nothing is followed blindly.
// 2. Every directory on the way must belong to root or to obsd's user; one that others can write
//    must have the sticky bit (like /tmp), where nobody else can rename or replace what is ours.
//    Otherwise whoever can write it could swap the next component under obsd.
// 3. A symlink on the way is followed only when it belongs to root or to obsd's user (by rule 2 it
//    sits in a directory nobody else can change): /var/run -> /run, or systemd's /var/lib/NAME ->
//    private/NAME for a DynamicUser= service. A symlink of another user is refused, and so is the
//    directory itself being a symlink when the caller forbids it (the socket's directory).
// 4. A missing component is created (the directory itself with `mode`, missing parents with
//    `parentMode`), then checked like the others: if someone else made it first, the checks say so.
// 5. The directory itself must belong to obsd's user and be writable by nobody else.
// The result is the directory with every symlink resolved, so that what is opened in it afterwards
// is not reached through a link at all (SQLite's SQLITE_OPEN_NOFOLLOW refuses any).
import Glibc

/// Why a directory cannot be used: the message names the path and the rule it breaks.
struct UnsafePathError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

enum SafeDirectory {
    /// A directory that passed the rules.
    struct Prepared {
        /// The directory's path with every symlink resolved.
        var path: String
        /// Whether obsd created the directory itself just now.
        var created: Bool
        /// The directory's lstat.
        var info: stat
    }

    /// Most symlinks followed on one path, as the kernel's limit for path resolution.
    static let maxSymlinks = 40

    /// Checks `path` (a `role` such as "state directory", for messages) under the rules above,
    /// creating it and its missing parents. `allowSymlink`: whether the directory itself may be a
    /// symlink of root or obsd's user.
    static func prepare(_ path: String, role: String, mode: mode_t, parentMode: mode_t,
                        allowSymlink: Bool) throws(UnsafePathError) -> Prepared {
        let me = geteuid()
        var pending = components(of: absolute(path)).reversed() as [String]
        var resolved = ""
        var followed = 0
        var created = false
        while let name = pending.popLast() {
            if name == ".." {
                resolved = parent(of: resolved)
                continue
            }
            let isLast = pending.isEmpty
            let current = resolved + "/" + name
            var info = stat()
            if lstat(current, &info) != 0 {
                guard errno == ENOENT else {
                    throw UnsafePathError("cannot inspect \(current) (\(role) \(path)): \(SystemError("lstat"))")
                }
                let wanted = isLast ? mode : parentMode
                if mkdir(current, wanted) != 0 {
                    guard errno == EEXIST else {
                        throw UnsafePathError("cannot create \(role) \(isLast ? current : "\(path): \(current)"): \(SystemError("mkdir"))")
                    }
                } else {
                    // mkdir's mode went through the umask; chmod gives exactly what was asked.
                    chmod(current, wanted)
                    created = created || isLast
                }
                pending.append(name)
                continue
            }
            let type = info.st_mode & S_IFMT
            if type == S_IFLNK {
                guard !(isLast && !allowSymlink) else {
                    throw UnsafePathError("\(role) \(current) is a symlink; refusing to use it")
                }
                guard info.st_uid == 0 || info.st_uid == me else {
                    throw UnsafePathError("\(current) (on the path of \(role) \(path)) is a symlink of uid \(info.st_uid): only symlinks of root and of this user (uid \(me)) are followed")
                }
                followed += 1
                guard followed <= maxSymlinks, let target = readLink(current) else {
                    throw UnsafePathError("cannot resolve \(current) (on the path of \(role) \(path)): too many symlinks or unreadable")
                }
                if target.hasPrefix("/") { resolved = "" }
                pending.append(contentsOf: components(of: target).reversed())
                continue
            }
            guard type == S_IFDIR else {
                throw UnsafePathError("\(isLast ? "\(role) \(current)" : "\(current) (on the path of \(role) \(path))") is not a directory")
            }
            let permissions = String(info.st_mode & 0o7777, radix: 8)
            if isLast {
                guard info.st_uid == me else {
                    throw UnsafePathError("\(role) \(current) belongs to uid \(info.st_uid), not to this user (uid \(me))")
                }
                guard info.st_mode & 0o022 == 0 else {
                    throw UnsafePathError("\(role) \(current) is writable by others (mode \(permissions)); make it 0700")
                }
                return Prepared(path: current, created: created, info: info)
            }
            guard info.st_uid == 0 || info.st_uid == me else {
                throw UnsafePathError("\(current) (on the path of \(role) \(path)) belongs to uid \(info.st_uid): every directory on the way must belong to root or to this user (uid \(me))")
            }
            guard info.st_mode & 0o022 == 0 || info.st_mode & S_ISVTX != 0 else {
                throw UnsafePathError("\(current) (on the path of \(role) \(path)) is writable by others (mode \(permissions)) and not sticky: they could replace what obsd relies on")
            }
            resolved = current
        }
        // Only "/" itself (or a path of ".." up to it) gets here: a directory of root's.
        throw UnsafePathError("\(role) \(path) cannot be the root directory")
    }

    static func absolute(_ path: String) -> String {
        guard !path.hasPrefix("/") else { return path }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return "/" + path }
        let length = buffer.firstIndex(of: 0) ?? buffer.count
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + path
    }

    static func components(of path: String) -> [String] {
        path.split(separator: "/").map(String.init).filter { $0 != "." }
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return String(path[..<slash])
    }

    static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
