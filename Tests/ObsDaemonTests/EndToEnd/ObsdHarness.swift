// Runs the real obsd executable in a private temporary directory, and talks to it over its real
// socket. Every wait is for a condition with a generous deadline, never a fixed sleep.
import Foundation
import Glibc
import TestSupport
import XCTest

/// A temporary directory for one test: socket, state, config, logs. Removed at the end.
final class Sandbox {
    let root: String

    init() throws {
        var template = Array((NSTemporaryDirectory() + "obsd-e2e-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
        root = String(cString: made)
        // Other uids (the permission tests) must be able to reach the socket directory inside.
        chmod(root, 0o711)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    var socket: String { root + "/run/obsd.sock" }
    var state: String { root + "/state" }
    var config: String { root + "/obsd.conf" }

    func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }
}

/// One running obsd process.
final class ObsdProcess {
    let process = Process()
    let sandbox: Sandbox
    let logPath: String
    let outputPath: String

    /// Starts obsd with `arguments`; unless told otherwise, the sandbox's socket and state.
    init(_ sandbox: Sandbox, arguments: [String]? = nil, environment: [String: String] = [:],
         executable: String? = nil, name: String = "obsd") throws {
        self.sandbox = sandbox
        logPath = sandbox.root + "/\(name).\(UUID().uuidString.prefix(8)).log"
        outputPath = logPath + ".out"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: try executable ?? builtExecutable("obsd"))
        process.arguments = arguments ?? ["--socket", sandbox.socket, "--state-dir", sandbox.state]
        var env = ProcessInfo.processInfo.environment
        for name in ["NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM", "WATCHDOG_USEC", "OBSD_SOCKET",
                     "STATE_DIRECTORY"] { env[name] = nil }
        env["XDG_CONFIG_HOME"] = sandbox.root + "/xdg-config"
        for (name, value) in environment { env[name] = value }
        process.environment = env
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle(forWritingAtPath: outputPath)
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    var pid: Int32 { process.processIdentifier }
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Waits until the socket at `path` accepts connections.
    @discardableResult
    func waitUntilListening(_ path: String? = nil) -> Bool {
        let path = path ?? sandbox.socket
        return waitFor("obsd to listen on \(path); log:\n\(log)") {
            guard process.isRunning else { return true }
            return (try? Client(path)) != nil
        } && process.isRunning
    }

    func signal(_ number: Int32) { kill(pid, number) }

    /// Waits for the process to exit and returns its status.
    func waitForExit(timeout: Double = 30) -> Int32? {
        guard waitFor("obsd to exit", timeout: timeout, { !process.isRunning }) else { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Resident memory in KiB, from /proc.
    var residentKiB: Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}

/// A blocking client on the daemon's socket, with a read timeout so a test can never hang.
/// Used by one thread at a time.
final class Client: @unchecked Sendable {
    let fd: Int32
    private var buffer: [UInt8] = []
    private var atEOF = false

    init(_ path: String, timeout: Int = 20) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let error = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
        }
        var time = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Sends all of `text`; false if the connection broke.
    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return false }
            offset += sent
        }
        return true
    }

    /// The next line without its newline; nil at EOF, on error or after the read timeout.
    func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = recv(fd, &chunk, chunk.count, 0)
            if count < 0, errno == EINTR { continue }
            if count == 0 { atEOF = true }
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }

    /// Whether the daemon closed the connection (EOF) with nothing more to read.
    func readsEOF() -> Bool {
        buffer.isEmpty && readLine() == nil && atEOF
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }
}

/// A JSON object line decoded for assertions.
func json(_ line: String?) -> [String: Any] {
    guard let line, let data = line.data(using: .utf8),
          let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return [:] }
    return object
}

/// The error code of a response line, if it is an error.
func errorCode(_ line: String?) -> String? {
    (json(line)["error"] as? [String: Any])?["code"] as? String
}

/// Writes acknowledged by the daemon, recorded by the writer thread.
final class AcknowledgedWrites: @unchecked Sendable {
    private let lock = NSLock()
    private var indexes: [Int] = []
    private var lastRev = 0

    func add(index: Int, rev: Int) {
        lock.withLock {
            indexes.append(index)
            lastRev = max(lastRev, rev)
        }
    }

    var count: Int { lock.withLock { indexes.count } }
    var snapshot: ([Int], Int) { lock.withLock { (indexes, lastRev) } }
}

extension XCTestCase {
    /// Kills `obsd` with SIGKILL once `minimum` writes are acknowledged, waits for the writers to
    /// stop, restarts obsd on the same state, and checks that every acknowledged write (key `k.N`
    /// with value N) is there and that revisions go on after the last acknowledged one.
    func killAndCheckAcknowledgedWrites(_ obsd: ObsdProcess, _ sandbox: Sandbox, arguments: [String],
                                        acknowledged: AcknowledgedWrites, minimum: Int, writing: DispatchGroup,
                                        file: StaticString = #filePath, line: UInt = #line) throws {
        waitFor("some acknowledged writes") { acknowledged.count >= minimum }
        obsd.signal(SIGKILL)
        XCTAssertEqual(writing.wait(timeout: .now() + 60), .success, file: file, line: line)
        _ = obsd.waitForExit()
        let (indexes, lastRev) = acknowledged.snapshot
        XCTAssertGreaterThanOrEqual(indexes.count, minimum, file: file, line: line)

        let restarted = try ObsdProcess(sandbox, arguments: arguments)
        XCTAssertTrue(restarted.waitUntilListening(), restarted.log, file: file, line: line)
        let checker = try Client(sandbox.socket)
        var lost: [Int] = []
        for chunk in stride(from: 0, to: indexes.count, by: 1000) {
            let part = indexes[chunk..<min(chunk + 1000, indexes.count)]
            checker.send(part.map { "{\"op\":\"get\",\"key\":\"k.\($0)\"}\n" }.joined())
            for index in part where json(checker.readLine())["value"] as? Int != index { lost.append(index) }
        }
        XCTAssertEqual(lost, [], "acknowledged writes lost after kill -9", file: file, line: line)
        checker.send("{\"op\":\"set\",\"key\":\"after\",\"value\":1}\n")
        XCTAssertGreaterThan(json(checker.readLine())["rev"] as? Int ?? 0, lastRev, "revisions continue from the stored counter",
                             file: file, line: line)
        restarted.signal(SIGTERM)
        XCTAssertEqual(restarted.waitForExit(), 0, file: file, line: line)
    }
}
