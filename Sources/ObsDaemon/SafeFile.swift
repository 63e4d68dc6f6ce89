// The files obsd reads but does not write: the configuration file, the definitions file, and the
// TLS certificates and key for etcd. Whoever can change one of them can change what obsd does
// (grant themselves access in `allow`, define keys, make obsd trust their etcd), and a key or a
// password in one is a secret; so each is read under the rules SafeDirectory.swift applies to the
// directories obsd keeps its state in (docs/operations.md, Security):
// 1. The path is walked from `/` with lstat; every directory on the way belongs to root or to
//    obsd's user, and one that others can write must have the sticky bit.
// 2. A symlink on the way, the file's own name included, is followed only when it belongs to root
//    or to obsd's user (certbot's `live/NAME/privkey.pem`, Kubernetes' `..data` links).
// 3. The file is a regular file (a FIFO or a device is refused before it is opened, so nothing
//    blocks), belongs to root or to obsd's user, and nobody else can write it.
//    On a file system mounted read-only nobody can write, whatever the modes say (Kubernetes
//    mounts ConfigMap volumes read-only with directories of mode 0777): there 1 and 3 ask only
//    for the owners.
// 4. A file that holds a secret (etcd's client key; the configuration file when it holds
//    etcd_password) is not readable by every user: 0600 or 0640.
// 5. It is opened without following a link, checked to be the file that was inspected, and read
//    up to a bound in bytes; a larger one is refused rather than read whole.
// `/dev/null` reads as an empty file: `--config /dev/null` runs on the embedded defaults.
// obsd then hands libcurl the certificates' bytes, never their paths, so no file is opened
// outside these rules.
import Glibc

enum SafeFile {
    /// What was read, and the file's mode (for a secret found in it afterwards: `requireSecret`).
    struct Contents {
        var bytes: [UInt8]
        var mode: mode_t
        /// The path with every symlink resolved.
        var path: String
    }

    /// Reads the file at `path` (a `role` such as "configuration file", for messages) under the
    /// rules above, refusing one larger than `maxBytes`. nil when it does not exist.
    static func read(_ path: String, role: String, maxBytes: Int, secret: Bool = false) throws(UnsafePathError) -> Contents? {
        let me = geteuid()
        var pending = SafeDirectory.components(of: SafeDirectory.absolute(path)).reversed() as [String]
        var resolved = ""
        var followed = 0
        // A trailing slash names a directory (open(2) says ENOTDIR for a file), in the path or in
        // the target of a symlink that is its last component.
        var namesDirectory = path.hasSuffix("/")
        // The symlink the last component came from, and its target: a missing file behind it is
        // an error (`/dev/stdin` on a pipe leads to `pipe:[N]`), not a file that is not there.
        var lastLink: (name: String, target: String)?
        while let name = pending.popLast() {
            if name == ".." {
                resolved = SafeDirectory.parent(of: resolved)
                continue
            }
            let isLast = pending.isEmpty
            let current = resolved + "/" + name
            var info = stat()
            if lstat(current, &info) != 0 {
                if errno == ENOENT || errno == ENOTDIR {
                    guard let lastLink else { return nil }
                    throw UnsafePathError("\(role) \(path) leads through the symlink \(lastLink.name) to \(lastLink.target), which does not exist or is not a regular file")
                }
                throw UnsafePathError("cannot inspect \(current) (\(role) \(path)): \(SystemError("lstat"))")
            }
            let type = info.st_mode & S_IFMT
            let permissions = String(info.st_mode & 0o7777, radix: 8)
            if type == S_IFLNK {
                guard info.st_uid == 0 || info.st_uid == me else {
                    throw UnsafePathError("\(current) (on the path of \(role) \(path)) is a symlink of uid \(info.st_uid): only symlinks of root and of this user (uid \(me)) are followed")
                }
                followed += 1
                guard followed <= SafeDirectory.maxSymlinks, let target = SafeDirectory.readLink(current) else {
                    throw UnsafePathError("cannot resolve \(current) (on the path of \(role) \(path)): too many symlinks or unreadable")
                }
                if target.hasPrefix("/") { resolved = "" }
                if isLast {
                    lastLink = (current, target)
                    namesDirectory = namesDirectory || target.hasSuffix("/")
                }
                pending.append(contentsOf: SafeDirectory.components(of: target).reversed())
                continue
            }
            if isLast {
                guard !namesDirectory || type == S_IFDIR else {
                    throw UnsafePathError("\(role) \(path) ends in a slash, which names a directory, and \(current) is not one")
                }
                if isNullDevice(info) { return Contents(bytes: [], mode: info.st_mode, path: current) }
                guard type == S_IFREG else {
                    throw UnsafePathError("\(role) \(current) is not a regular file")
                }
                guard info.st_uid == 0 || info.st_uid == me else {
                    throw UnsafePathError("\(role) \(current) belongs to uid \(info.st_uid): only files of root and of this user (uid \(me)) are read")
                }
                guard info.st_mode & 0o022 == 0 || onReadOnlyMount(current) else {
                    throw UnsafePathError("\(role) \(current) is writable by others (mode \(permissions)): they could change what obsd does; make it \(secret ? "0600" : "0644")")
                }
                if secret { try requireSecret(info.st_mode, path: current, role: role, holding: "it holds a private key") }
                return Contents(bytes: try contents(of: current, inspected: info, role: role, maxBytes: maxBytes),
                                mode: info.st_mode, path: current)
            }
            guard type == S_IFDIR else {
                throw UnsafePathError("\(current) (on the path of \(role) \(path)) is not a directory")
            }
            guard info.st_uid == 0 || info.st_uid == me else {
                throw UnsafePathError("\(current) (on the path of \(role) \(path)) belongs to uid \(info.st_uid): every directory on the way must belong to root or to this user (uid \(me))")
            }
            guard info.st_mode & 0o022 == 0 || info.st_mode & S_ISVTX != 0 || onReadOnlyMount(current) else {
                throw UnsafePathError("\(current) (on the path of \(role) \(path)) is writable by others (mode \(permissions)) and not sticky: they could replace what obsd reads")
            }
            resolved = current
        }
        throw UnsafePathError("\(role) \(path) is a directory, not a file")
    }

    /// Refuses a file that every user can read, for one that holds a secret (`holding` says which).
    static func requireSecret(_ mode: mode_t, path: String, role: String, holding: String) throws(UnsafePathError) {
        guard mode & S_IFMT == S_IFREG, mode & 0o004 != 0 else { return }
        throw UnsafePathError("\(role) \(path) is readable by every user (mode \(String(mode & 0o7777, radix: 8))) and \(holding): make it 0600, or 0640 for a group of its readers")
    }

    /// Whether `path` is on a file system mounted read-only, where nobody can write, whatever the
    /// modes say: Kubernetes mounts ConfigMap volumes so, their directories at mode 0777.
    private static func onReadOnlyMount(_ path: String) -> Bool {
        var info = statvfs()
        return statvfs(path, &info) == 0 && info.f_flag & UInt(ST_RDONLY) != 0
    }

    private static func isNullDevice(_ info: stat) -> Bool {
        guard info.st_mode & S_IFMT == S_IFCHR else { return false }
        var null = stat()
        return stat("/dev/null", &null) == 0 && null.st_mode & S_IFMT == S_IFCHR && null.st_rdev == info.st_rdev
    }

    /// Opens `path` without following a link, makes sure it is still the file `inspected`, and
    /// reads it whole, up to `maxBytes`.
    private static func contents(of path: String, inspected: stat, role: String, maxBytes: Int) throws(UnsafePathError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw UnsafePathError("cannot open \(role) \(path): \(SystemError("open"))") }
        defer { close(fd) }
        var opened = stat()
        guard fstat(fd, &opened) == 0, opened.st_dev == inspected.st_dev, opened.st_ino == inspected.st_ino,
              opened.st_mode & S_IFMT == S_IFREG else {
            throw UnsafePathError("\(role) \(path) changed while it was being opened; refusing to read it")
        }
        guard opened.st_size <= maxBytes else {
            throw UnsafePathError("\(role) \(path) is \(opened.st_size) bytes, more than the \(maxBytes) bytes read at most")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(opened.st_size))
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw UnsafePathError("cannot read \(role) \(path): \(SystemError("read"))")
            }
            if count == 0 { return bytes }
            // A file growing while it is read is held to the same bound.
            guard bytes.count + count <= maxBytes else {
                throw UnsafePathError("\(role) \(path) is more than the \(maxBytes) bytes read at most")
            }
            bytes.append(contentsOf: chunk[..<count])
        }
    }
}
