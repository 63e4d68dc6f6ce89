// A private temporary directory per test, and the real obsd executable run in it: the one daemon
// launcher of the end-to-end tests. Every wait is for a condition with a generous deadline, never
// a fixed sleep.
import Foundation
import Glibc
import XCTest

/// A temporary directory for one test: socket, state, config, logs. Removed at the end.
public final class Sandbox {
    public let root: String

    public init() throws {
        var template = Array((NSTemporaryDirectory() + "obsd-e2e-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
        root = String(cString: made)
        // Other uids (the permission tests) must be able to reach the socket directory inside.
        chmod(root, 0o711)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    public var socket: String { root + "/run/obsd.sock" }
    public var state: String { root + "/state" }
    public var config: String { root + "/obsd.conf" }

    public func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }
}

/// One running obsd process.
public final class ObsdProcess {
    public let process = Process()
    public let sandbox: Sandbox
    public let logPath: String
    public let outputPath: String

    /// Starts obsd with `arguments`; unless told otherwise, the sandbox's socket and state. Its
    /// stderr goes to a new log file, or is appended to `logPath` (one log across restarts).
    public init(_ sandbox: Sandbox, arguments: [String]? = nil, environment: [String: String] = [:],
                executable: String? = nil, name: String = "obsd", logPath: String? = nil) throws {
        self.sandbox = sandbox
        self.logPath = logPath ?? sandbox.root + "/\(name).\(UUID().uuidString.prefix(8)).log"
        outputPath = self.logPath + ".out"
        if !FileManager.default.fileExists(atPath: self.logPath) {
            _ = FileManager.default.createFile(atPath: self.logPath, contents: nil)
        }
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: try executable ?? builtExecutable("obsd"))
        process.arguments = arguments ?? ["--socket", sandbox.socket, "--state-dir", sandbox.state]
        var env = ProcessInfo.processInfo.environment
        for name in ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM", "WATCHDOG_USEC", "OBSD_SOCKET",
                     "STATE_DIRECTORY"] { env[name] = nil }
        env["XDG_CONFIG_HOME"] = sandbox.root + "/xdg-config"
        for (name, value) in environment { env[name] = value }
        process.environment = env
        let log = FileHandle(forWritingAtPath: self.logPath)
        log?.seekToEndOfFile()
        process.standardError = log
        process.standardOutput = FileHandle(forWritingAtPath: outputPath)
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    public var pid: Int32 { process.processIdentifier }
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
    public var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Waits until the socket at `path` accepts connections.
    @discardableResult
    public func waitUntilListening(_ path: String? = nil) -> Bool {
        let path = path ?? sandbox.socket
        return waitFor("obsd to listen on \(path); log:\n\(log)") {
            guard process.isRunning else { return true }
            return (try? Client(path)) != nil
        } && process.isRunning
    }

    public func signal(_ number: Int32) { kill(pid, number) }

    /// Waits for the process to exit and returns its status.
    public func waitForExit(timeout: Double = 30) -> Int32? {
        guard waitFor("obsd to exit", timeout: timeout, { !process.isRunning }) else { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Resident memory in KiB, from /proc.
    public var residentKiB: Int { processStatusKiB(pid, "VmRSS:") }

    /// Resident anonymous memory (the heap, stacks: what obsd holds, without the pages of files it
    /// maps, such as a commit log file being folded, which the kernel can drop) in KiB.
    public var anonymousKiB: Int { processStatusKiB(pid, "RssAnon:") }
}

/// A field of /proc/PID/status given in KiB (`VmRSS:`, `VmHWM:`, ...); 0 if it cannot be read.
public func processStatusKiB(_ pid: Int32, _ field: String) -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix(field) } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}
