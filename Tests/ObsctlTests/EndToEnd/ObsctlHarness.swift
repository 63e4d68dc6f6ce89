// Runs a real obsd in a private temporary directory (TestSupport's launcher) and the real obsctl
// binary against it. Every wait is for a condition with a generous deadline.
import Foundation
import Glibc
import ObsClient
import TestSupport
import XCTest

/// A temporary directory with one obsd (memory or a state directory) on a private socket, which
/// can be stopped and started again on the same state and socket.
final class Daemon {
    let sandbox: Sandbox
    private(set) var obsd: ObsdProcess?
    var persistent: Bool
    var extraArguments: [String]

    /// `config`: the text of a configuration file for obsd (its settings, as in obsd.conf).
    init(persistent: Bool = false, arguments: [String] = [], config: String? = nil) throws {
        sandbox = try Sandbox()
        self.persistent = persistent
        extraArguments = arguments
        if let config {
            try sandbox.write(config, to: sandbox.config)
            extraArguments += ["--config", sandbox.config]
        }
        try start()
    }

    deinit { stop(signal: SIGKILL) }

    var root: String { sandbox.root }
    var socket: String { root + "/obsd.sock" }
    var process: Process? { obsd?.process }
    /// What every run of obsd here wrote to stderr.
    var logPath: String { root + "/obsd.log" }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    func start() throws {
        let arguments = ["--socket", socket] + (persistent ? ["--state-dir", root + "/state"] : ["--memory"]) + extraArguments
        let obsd = try ObsdProcess(sandbox, arguments: arguments, logPath: logPath)
        self.obsd = obsd
        obsd.waitUntilListening(socket)
    }

    /// Stops obsd and waits until it is gone.
    func stop(signal: Int32 = SIGTERM) {
        guard let obsd, obsd.process.isRunning else { return }
        obsd.signal(signal)
        obsd.process.waitUntilExit()
        self.obsd = nil
    }

    /// A connection that holds one of the daemon's `max_connections`: retried until the daemon
    /// has seen obsctl's go (until then it answers `limit`, as the slot of the obsctl that set
    /// things up is not free yet).
    func holdAConnection() throws -> ObsConnection? {
        for _ in 0..<100 {
            let connection = try ObsConnection(path: socket)
            if (try? connection.request("ping", [:], deadline: monotonicNow() + 10)) != nil { return connection }
            usleep(50_000)
        }
        return nil
    }

    @discardableResult
    func write(_ text: String, to name: String) -> String {
        let path = root + "/" + name
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        return path
    }
}

/// What a finished obsctl printed, and its status.
struct Result: Equatable, CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String
    var description: String { "status \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
}

/// One obsctl process, started with pipes on stdin and stdout (for streaming tests).
final class Obsctl {
    let process = Process()
    let input = Pipe()
    let output = Pipe()
    let errorPath: String
    private var buffer: [UInt8] = []

    init(_ daemon: Daemon?, _ arguments: [String], environment: [String: String] = [:], socket: Bool = true,
         shell: String? = nil) throws {
        errorPath = (daemon?.root ?? NSTemporaryDirectory()) + "/obsctl.\(UUID().uuidString.prefix(8)).err"
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        var env = ProcessInfo.processInfo.environment
        env["OBSD_SOCKET"] = nil
        if socket, let daemon { env["OBSD_SOCKET"] = daemon.socket }
        for (name, value) in environment { env[name] = value }
        let obsctl = try builtExecutable("obsctl")
        if let shell {
            // A pipeline: OBSCTL in the shell command is the binary under test.
            env["OBSCTL"] = obsctl
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-c", shell]
        } else {
            process.executableURL = URL(fileURLWithPath: obsctl)
            process.arguments = arguments
        }
        process.environment = env
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: errorPath)
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    var stderr: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    /// Writes `text` to obsctl's stdin, as much of it as obsctl reads: one that stops reading
    /// first (a line over its bound) makes the write fail with EPIPE. The SIGPIPE that comes with
    /// it, which would end the test process, is blocked on this thread meanwhile and taken off.
    func send(_ text: String) {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
        defer {
            var pending = sigset_t()
            var now = timespec(tv_sec: 0, tv_nsec: 0)
            if sigpending(&pending) == 0, sigismember(&pending, SIGPIPE) == 1 { _ = sigtimedwait(&pipeSignal, nil, &now) }
            pthread_sigmask(SIG_SETMASK, &previous, nil)
        }
        let bytes = Array(text.utf8)
        let fd = input.fileHandleForWriting.fileDescriptor
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
    func closeInput() { try? input.fileHandleForWriting.close() }

    /// The next stdout line, waiting at most `timeout` seconds; nil at EOF or timeout.
    func readLine(timeout: Double = 30) -> String? {
        let fd = output.fileHandleForReading.fileDescriptor
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000) + 1) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(fd, &chunk, chunk.count)
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }

    /// `count` lines.
    func readLines(_ count: Int, timeout: Double = 30) -> [String] {
        (0..<count).compactMap { _ in readLine(timeout: timeout) }
    }

    /// Waits for exit; returns the status and whatever stdout still holds.
    func finish(timeout: Double = 30) -> Result {
        closeInput()
        var rest = ""
        while let line = readLine(timeout: timeout) { rest += line + "\n" }
        rest += String(decoding: buffer, as: UTF8.self)
        waitFor("obsctl to exit", timeout: timeout) { !process.isRunning }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        return Result(status: status, stdout: rest, stderr: stderr)
    }
}

/// Runs obsctl to completion with `stdin`, and returns what it printed.
@discardableResult
func obsctl(_ daemon: Daemon?, _ arguments: [String], stdin: String = "", environment: [String: String] = [:],
            socket: Bool = true) throws -> Result {
    let run = try Obsctl(daemon, arguments, environment: environment, socket: socket)
    run.send(stdin)
    return run.finish()
}

extension Daemon {
    /// The backup tests' state (a persistent daemon): `kept` 0 at revision 1, copied as a backup
    /// after a clean stop (operations.md's way), then `gone` 1 and `kept` 1 and 2, revisions 2 to 4,
    /// written past it.
    func writtenPastABackup() throws {
        try obsctl(self, ["set", "kept", "0"])
        stop()
        try FileManager.default.copyItem(atPath: database, toPath: root + "/backup.db")
        try start()
        try obsctl(self, ["set", "gone", "1"])
        for value in ["1", "2"] { try obsctl(self, ["set", "kept", value]) }
    }

    /// Stops obsd, puts the backup `writtenPastABackup` made back, starts obsd, and writes `kept`
    /// "a" to "d", to revision 5: past the revision a watcher of the state before saw.
    func restoreTheBackupAndWritePastIt() throws {
        stop()
        try FileManager.default.removeItem(atPath: database)
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: database + suffix) }
        try FileManager.default.copyItem(atPath: root + "/backup.db", toPath: database)
        try start()
        for value in ["\"a\"", "\"b\"", "\"c\"", "\"d\""] { try obsctl(self, ["set", "kept", value]) }
    }

    var database: String { root + "/state/obsd.db" }

    /// Waits until the daemon counts `count` watches: a watch started in another process is live.
    func waitForWatches(_ count: Int) {
        waitFor("\(count) watches") { stat("watches") == count }
    }

    /// One of the daemon's counters (-1 if it cannot be read).
    func stat(_ name: String) -> Int {
        guard let line = try? obsctl(self, ["stats", "--json"]).stdout,
              let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return -1 }
        return object[name] as? Int ?? -1
    }
}
