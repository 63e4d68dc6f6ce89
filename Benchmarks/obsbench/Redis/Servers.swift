// Starting and stopping the two servers under test, each in its own temporary directory, and
// reading their resident size and CPU time from /proc.
import Foundation

final class ServerProcess {
    let wire: Wire
    let socketPath: String
    let directory: String
    private let process = Process()

    /// Starts obsd (`durability`: "memory", "normal" or "strict") or redis-server (`durability`:
    /// "memory" is no persistence at all, "normal" is appendonly with appendfsync no (written before
    /// the reply, never fsynced by the command), "strict" is appendonly with appendfsync always).
    /// `core`: the CPU the server is pinned to (with taskset), or nil to let it run anywhere.
    init(_ wire: Wire, durability: String, obsdPath: String, core: Int? = nil) throws(BenchError) {
        self.wire = wire
        directory = NSTemporaryDirectory() + "obsbench-\(wire.rawValue)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        socketPath = directory + "/\(wire.rawValue).sock"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw BenchError("cannot create \(directory): \(error)")
        }
        switch wire {
        case .obsd:
            // Enough connections for the 1,000-watcher rows; everything else stays at its default.
            let config = directory + "/obsd.conf"
            _ = FileManager.default.createFile(atPath: config, contents: Data("max_connections = 4096\n".utf8))
            process.executableURL = URL(fileURLWithPath: obsdPath)
            var arguments = ["--config", config, "--socket", socketPath, "--log-level", "warn"]
            arguments += durability == "memory" ? ["--memory"] : ["--state-dir", directory + "/state", "--durability", durability]
            process.arguments = arguments
        case .redis:
            process.executableURL = URL(fileURLWithPath: Self.which("redis-server") ?? "/usr/bin/redis-server")
            var arguments = ["--port", "0", "--unixsocket", socketPath, "--unixsocketperm", "700", "--dir", directory,
                             "--save", "", "--maxclients", "4096", "--loglevel", "warning"]
            switch durability {
            case "strict": arguments += ["--appendonly", "yes", "--appendfsync", "always"]
            case "normal": arguments += ["--appendonly", "yes", "--appendfsync", "no"]
            default: arguments += ["--appendonly", "no"]
            }
            process.arguments = arguments
        }
        if let core, let taskset = Self.which("taskset") {
            // taskset execs the server, so the process (and its pid) is the server's own.
            process.arguments = ["-c", String(core), process.executableURL!.path] + (process.arguments ?? [])
            process.executableURL = URL(fileURLWithPath: taskset)
        }
        process.standardOutput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw BenchError("cannot start \(process.executableURL!.path): \(error)")
        }
        let deadline = benchNow() + 10
        while benchNow() < deadline {
            // A connection that succeeds (and closes again at once) means it listens.
            if (try? ClientConnection(path: socketPath, wire: wire)) != nil { return }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        stop()
        throw BenchError("\(wire.rawValue) did not start listening on \(socketPath)")
    }

    var pid: Int32 { process.processIdentifier }

    /// VmRSS in bytes.
    var residentBytes: Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Int(line.split(separator: " ")[1]) else { return 0 }
        return kilobytes * 1024
    }

    /// User plus system CPU seconds the server has used (all its threads).
    var cpuSeconds: Double { processCPUSeconds(pid) }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    static func which(_ name: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":") {
            let path = "\(directory)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }
}

/// User plus system CPU seconds a process has used (all its threads), from /proc.
func processCPUSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return 0 }
    // Fields after the command name: state is field 3, utime 14, stime 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}
