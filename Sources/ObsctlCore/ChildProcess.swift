import CLinux
import Glibc

/// Runs `-- COMMAND ARGS` for one event: `input` on its stdin, `environment` added to obsctl's,
/// stdout and stderr shared with obsctl. Signals obsctl ignores (SIGPIPE) are reset to their
/// defaults in the child, so a pipeline inside COMMAND behaves as it does in a shell.
enum ChildProcess {
    enum Outcome: Equatable {
        case exited(Int32)
        case signalled(Int32)
        case cannotStart(String)
    }

    /// Why `name` cannot be run, or nil if it can: a path must be an executable file; a bare name
    /// must be one in a directory of `PATH` (as posix_spawnp looks for it).
    static func cannotRun(_ name: String, environment: [String: String]) -> String? {
        func executable(_ path: String) -> Bool {
            var info = stat()
            return stat(path, &info) == 0 && info.st_mode & S_IFMT != S_IFDIR && access(path, X_OK) == 0
        }
        if name.contains("/") {
            if executable(name) { return nil }
            return access(name, F_OK) == 0 ? "not an executable file" : String(cString: strerror(ENOENT))
        }
        let directories = (environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false)
        if directories.contains(where: { executable(($0.isEmpty ? "." : String($0)) + "/" + name) }) { return nil }
        return "command not found in PATH"
    }

    /// `discardOutput`: the child's stdout is /dev/null, not obsctl's (`web --open`: a browser that
    /// xdg-open starts may outlive obsctl, and would hold a pipe on obsctl's stdout open, so that
    /// whatever reads it never saw its end; nor does anything of the browser's belong there).
    static func run(_ arguments: [String], input: String, environment: [String: String], discardOutput: Bool = false) -> Outcome {
        // Close-on-exec, like every descriptor obsctl opens (the daemon's socket is SOCK_CLOEXEC,
        // files O_CLOEXEC): a COMMAND gets what obsctl's own parent gave it, and the copy of the
        // read end made its stdin by the dup2 below (which clears the flag on the copy), nothing
        // else of obsctl's. The file actions close both ends as well; the flag keeps them out of
        // a process another thread spawns meanwhile (`web --open` runs xdg-open on one).
        var fds: [Int32] = [0, 0]
        guard pipe2(&fds, O_CLOEXEC) == 0 else { return .cannotStart(String(cString: strerror(errno))) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_addclose(&actions, fds[1])
        if discardOutput { posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var merged: [String: String] = [:]
        var index = 0
        while let entry = environ[index] {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                merged[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            index += 1
        }
        for (name, value) in environment { merged[name] = value }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        forwardTerminatingSignals()
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, arguments[0], &actions, &attributes, argv, envp)
        runningChild = spawned == 0 ? pid : 0
        defer { runningChild = 0 }
        close(fds[0])
        guard spawned == 0 else {
            close(fds[1])
            return .cannotStart(String(cString: strerror(spawned)))
        }
        // A command that does not read its stdin closes the pipe early: EPIPE, not a signal.
        let bytes = Array(input.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { break }
            offset += written
        }
        close(fds[1])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        if status & 0x7f == 0 { return .exited((status >> 8) & 0xff) }
        return .signalled(status & 0x7f)
    }
}

/// The COMMAND running now (0: none), for the signal handler below.
nonisolated(unsafe) private var runningChild: pid_t = 0

/// SIGTERM, SIGINT, SIGHUP end obsctl as they would by default (status 128 + the signal), but
/// first pass the signal to a COMMAND that is running: `timeout 60 obsctl watch k -- CMD`, or a
/// supervisor that signals obsctl alone, would otherwise leave CMD running with nobody waiting
/// for it. Installed before the first run, for the signals left at their default (one ignored,
/// as under nohup, stays ignored); only async-signal-safe calls in the handler.
private func forwardTerminatingSignals() {
    for number in [SIGTERM, SIGINT, SIGHUP] {
        var current = sigaction()
        guard sigaction(number, nil, &current) == 0, current.__sigaction_handler.sa_handler == nil else { continue }
        signal(number) { number in
            if runningChild > 0 { kill(runningChild, number) }
            signal(number, SIG_DFL)
            raise(number)
        }
    }
}
