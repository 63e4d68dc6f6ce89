import Glibc

/// Where the daemon's socket is, by the rules obsd and obsctl share (docs/cli.md): `--socket`, then
/// `$OBSD_SOCKET`, then `/run/obsd/obsd.sock` for root, `$XDG_RUNTIME_DIR/obsd/obsd.sock`, or
/// `/tmp/obsd-$UID/obsd.sock`.
public func defaultSocketPath(explicit: String? = nil, environment: [String: String], uid: uid_t = getuid()) -> String {
    if let explicit { return explicit }
    if let path = environment["OBSD_SOCKET"], !path.isEmpty { return path }
    if uid == 0 { return "/run/obsd/obsd.sock" }
    if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/obsd/obsd.sock" }
    return "/tmp/obsd-\(uid)/obsd.sock"
}
