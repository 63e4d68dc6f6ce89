import Glibc
import Synchronization

/// Writes one line per message to stderr. Under systemd (`JOURNAL_STREAM` set) each line starts
/// with the syslog priority `<N>` so journald records the level; otherwise with the level's name.
public final class Logger: @unchecked Sendable {
    // Only the daemon's loop thread changes the level (on reload); the lock keeps the tests'
    // concurrent readers correct.
    private let minimum: Mutex<LogLevel>
    private let journal: Bool
    private let sink: (String) -> Void

    public init(level: LogLevel, journal: Bool, sink: @escaping (String) -> Void = Logger.standardError) {
        minimum = Mutex(level)
        self.journal = journal
        self.sink = sink
    }

    public var level: LogLevel {
        get { minimum.withLock { $0 } }
        set { minimum.withLock { $0 = newValue } }
    }

    public func debug(_ message: @autoclosure () -> String) { log(.debug, message()) }
    public func info(_ message: @autoclosure () -> String) { log(.info, message()) }
    public func warn(_ message: @autoclosure () -> String) { log(.warn, message()) }
    public func error(_ message: @autoclosure () -> String) { log(.error, message()) }

    private func log(_ level: LogLevel, _ message: String) {
        guard level >= self.level else { return }
        let flat = message.replacingNewlines()
        if journal {
            sink("<\(Self.priority(level))>\(flat)\n")
        } else {
            sink("obsd: \(level.rawValue): \(flat)\n")
        }
    }

    /// syslog(3) priorities: err 3, warning 4, info 6, debug 7.
    static func priority(_ level: LogLevel) -> Int {
        switch level {
        case .error: 3
        case .warn: 4
        case .info: 6
        case .debug: 7
        }
    }

    /// Writes the whole line with one write(2), so lines from a crash path are never interleaved.
    public static func standardError(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
        }
    }
}

extension String {
    /// The message on one line: newlines become spaces.
    func replacingNewlines() -> String {
        String(map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}
