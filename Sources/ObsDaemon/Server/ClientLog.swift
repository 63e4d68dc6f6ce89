// The log lines a client can cause (refused connections, lines over the limit, timeouts, accept
// failures): a client that connects ten thousand times a second must not make obsd write ten
// thousand lines a second. Each kind of line is written at most once per `interval`; the next one
// written says how many were left out meanwhile.
final class ClientLog {
    enum Kind: Hashable {
        case acceptFailed, outOfDescriptors, overConnectionLimit, peerCredentials, notAllowed, registration
        case lineTooLong, epoll, clientTimeout
    }

    enum Level { case info, warn }

    private let log: Logger
    private let interval: Double
    private var last: [Kind: (at: Double, left: Int)] = [:]

    init(_ log: Logger, interval: Double = 10) {
        self.log = log
        self.interval = interval
    }

    func warn(_ kind: Kind, now: Double = monotonicSeconds(), _ message: @autoclosure () -> String) {
        write(.warn, kind, now: now, message())
    }

    func info(_ kind: Kind, now: Double = monotonicSeconds(), _ message: @autoclosure () -> String) {
        write(.info, kind, now: now, message())
    }

    private func write(_ level: Level, _ kind: Kind, now: Double, _ message: @autoclosure () -> String) {
        if let previous = last[kind], now - previous.at < interval {
            last[kind] = (previous.at, previous.left + 1)
            return
        }
        let left = last[kind]?.left ?? 0
        last[kind] = (now, 0)
        let line = message() + (left > 0 ? " (and \(left) more like it since the last one)" : "")
        switch level {
        case .info: log.info(line)
        case .warn: log.warn(line)
        }
    }
}
