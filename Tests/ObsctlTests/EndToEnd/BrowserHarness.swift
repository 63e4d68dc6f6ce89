// What the `obsctl web` tests drive: a real `obsctl web` on a port the system picks, headless
// Chromium through Tests/Browser/driver.py (Debian's python3-selenium and chromium-driver), and
// plain HTTP requests for what a browser would not show (status codes, headers).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import ObsClient
import TestSupport
import XCTest

/// A running `obsctl web --listen 127.0.0.1:PORT` (by default a port the system picks) and the URL it printed.
final class WebProcess {
    let process: Obsctl
    let url: String

    init(_ daemon: Daemon, _ arguments: [String] = [], port: String = "0", environment: [String: String] = [:]) throws {
        process = try Obsctl(daemon, ["web", "--listen", "127.0.0.1:\(port)"] + arguments, environment: environment)
        guard let line = process.readLine(), line.hasPrefix("http://127.0.0.1:") else {
            throw XCTSkip("obsctl web printed no URL; stderr: \(process.stderr)")
        }
        url = line
    }

    /// `http://127.0.0.1:PORT`
    var base: String { String(url[..<url.range(of: "/[#?]token=", options: .regularExpression)!.lowerBound]) }
    var token: String { String(url[url.range(of: "[#?]token=", options: .regularExpression)!.upperBound...]) }
    var port: String { String(base.split(separator: ":").last!) }

    /// Stops it as Ctrl-C would; returns how it ended.
    func stop() -> Result {
        kill(process.process.processIdentifier, SIGINT)
        return process.finish()
    }
}

/// One HTTP exchange, redirects not followed, no cookies.
struct HTTPExchange {
    var status: Int
    var headers: [String: String]
    var body: String

    /// `token`, if given, goes in `Authorization: Bearer`, as the page sends it.
    static func send(_ method: String, _ url: String, token: String? = nil, headers: [String: String] = [:],
                     contentType: String? = nil, body: String? = nil) -> HTTPExchange {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.httpShouldHandleCookies = false
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        request.httpBody = body.map { Data($0.utf8) }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        let session = URLSession(configuration: configuration, delegate: NoRedirects(), delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var exchange = HTTPExchange(status: 0, headers: [:], body: "")
        session.dataTask(with: request) { data, response, error in
            if let response = response as? HTTPURLResponse {
                exchange.status = response.statusCode
                for (name, value) in response.allHeaderFields {
                    exchange.headers[String(describing: name).lowercased()] = String(describing: value)
                }
            }
            exchange.body = data.map { String(decoding: $0, as: UTF8.self) } ?? "\(error.map { "\($0)" } ?? "")"
            done.signal()
        }.resume()
        done.wait()
        return exchange
    }

    private final class NoRedirects: NSObject, URLSessionTaskDelegate {
        func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
            completionHandler(nil)
        }
    }
}

/// A plain TCP connection to 127.0.0.1:`port`, for what no HTTP client does: send nothing, or
/// read a response as it streams. Every read waits at most `timeout` seconds, so a test cannot hang.
final class TCPConnection {
    let fd: Int32
    /// Everything read so far.
    private(set) var received: [UInt8] = []

    init(port: String, timeout: Int = 60) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)!).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        fd = try connectedSocket(AF_INET, to: address, timeout: timeout)
    }

    deinit { close(fd) }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    enum ReadResult: Equatable { case data, eof, timedOut, failed(Int32) }

    /// Reads once (what is there, or waits for it, up to the timeout).
    func read() -> ReadResult {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &chunk, chunk.count, 0)
            if count > 0 {
                received += chunk[..<count]
                return .data
            }
            if count == 0 { return .eof }
            if errno == EINTR { continue }
            return errno == EAGAIN || errno == EWOULDBLOCK ? .timedOut : .failed(errno)
        }
    }

    /// Reads until what was received contains `text`; false if the connection ended or a read
    /// timed out first.
    func read(until text: String) -> Bool {
        while !String(decoding: received, as: UTF8.self).contains(text) {
            guard read() == .data else { return false }
        }
        return true
    }

    /// Reads until the peer closes the connection: what the last read gave (`.eof` if it did).
    func readToEnd() -> ReadResult {
        while true {
            let result = read()
            if result != .data { return result }
        }
    }

    /// Whether the peer has closed (or reset) the connection, without waiting; what it sent is kept.
    func peerClosed() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if count > 0 {
                received += chunk[..<count]
                continue
            }
            if count == 0 { return true }
            if errno == EINTR { continue }
            return errno != EAGAIN && errno != EWOULDBLOCK
        }
    }

    var text: String { String(decoding: received, as: UTF8.self) }
}

/// Connections to 127.0.0.1:`port` that send a request's head a byte a second and never end it
/// (a slowloris), as any local user could: never idle, they would hold their connections for as
/// long as the server lets them. With `reopen`, each one the server closes is opened again at once.
final class Tricklers: @unchecked Sendable {
    // @unchecked: the counts and `stopping` are guarded by `lock`; the connections are only
    // touched by the thread that trickles.
    let port: String
    let reopen: Bool
    private let lock = NSLock()
    private var connections: [(connection: TCPConnection, sent: Int)?]
    private var counts = (open: 0, closedByServer: 0, reopened: 0, rounds: 0)
    private var stopping = false
    private let done = DispatchSemaphore(value: 0)
    private let head: [UInt8]

    init(count: Int, port: String, reopen: Bool) throws {
        self.port = port
        self.reopen = reopen
        head = Array("GET /info HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nX-Trickle: ".utf8)
        connections = try (0..<count).map { _ in (try TCPConnection(port: port, timeout: 5), 0) }
        counts.open = count
        Thread { [self] in run() }.start()
    }

    /// How many are open, how many the server closed, how many were opened again, and how many
    /// bytes each has been sent (rounds of one byte each).
    var open: Int { lock.withLock { counts.open } }
    var closedByServer: Int { lock.withLock { counts.closedByServer } }
    var reopened: Int { lock.withLock { counts.reopened } }
    var rounds: Int { lock.withLock { counts.rounds } }

    /// Waits until `condition` holds, at most `timeout` seconds; whether it does.
    func wait(timeout: Double, until condition: (Tricklers) -> Bool) -> Bool {
        let end = monotonicNow() + timeout
        while !condition(self) {
            if monotonicNow() > end { return false }
            usleep(50_000)
        }
        return true
    }

    /// Stops trickling and closes every connection.
    func stop() {
        let first = lock.withLock {
            defer { stopping = true }
            return !stopping
        }
        if first { done.wait() }
    }

    deinit { stop() }

    private func run() {
        var nextRound = monotonicNow()
        while !lock.withLock({ stopping }) {
            for index in connections.indices {
                guard let entry = connections[index], entry.connection.peerClosed() else { continue }
                connections[index] = nil
                if reopen, let again = try? TCPConnection(port: port, timeout: 5) { connections[index] = (again, 0) }
                let open = connections.count { $0 != nil }
                lock.withLock {
                    counts.closedByServer += 1
                    if connections[index] != nil { counts.reopened += 1 }
                    counts.open = open
                }
            }
            if monotonicNow() >= nextRound {
                for index in connections.indices {
                    guard let (connection, sent) = connections[index].map({ ($0.connection, $0.sent) }) else { continue }
                    connection.send(String(decoding: [sent < head.count ? head[sent] : UInt8(ascii: "a")], as: UTF8.self))
                    connections[index] = (connection, sent + 1)
                }
                nextRound += 1
                lock.withLock { counts.rounds += 1 }
            }
            usleep(10_000)
        }
        connections = []
        done.signal()
    }
}

/// Another local user (nobody) who reopens connections to obsctl web as fast as they are closed:
/// Tests/Browser/storm.py keeps `count` connections open, sending nothing, run with setpriv. The
/// tests run as root; another user's connections need root to be made.
final class Storm {
    private let client: Obsctl

    init(port: String, count: Int = 64) throws {
        guard geteuid() == 0 else { throw XCTSkip("connections of another user need root (setpriv --reuid)") }
        for tool in ["/usr/bin/setpriv", "/usr/bin/python3"] where !FileManager.default.isExecutableFile(atPath: tool) {
            if ProcessInfo.processInfo.environment["CI"] != nil { XCTFail("\(tool) not installed (scripts/test installs it)") }
            throw XCTSkip("\(tool) not installed (scripts/test installs util-linux and python3)")
        }
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Browser/storm.py").path
        // Its text, not its path: nobody may not be able to read the work tree.
        let script = try String(contentsOfFile: path, encoding: .utf8)
        client = try Obsctl(nil, [], environment: ["STORM": script],
                            shell: "exec /usr/bin/setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3 -c \"$STORM\" 127.0.0.1 \(port) \(count)")
        guard client.readLine(timeout: 30) == "ready" else {
            throw XCTSkip("the storm did not start: \(client.stderr.suffix(2000))")
        }
    }

    deinit { stop() }

    /// How many connections it has opened again so far (each one the server closed).
    var reopened: Int {
        client.send("\n")
        return client.readLine().flatMap { Int($0) } ?? -1
    }

    /// Waits until the server has closed `count` more of its connections (at most `timeout` s).
    func waitForReopened(_ count: Int, timeout: Double = 60) -> Bool {
        let target = reopened + count
        let end = monotonicNow() + timeout
        while reopened < target {
            if monotonicNow() > end { return false }
            usleep(10_000)
        }
        return true
    }

    func stop() {
        guard client.process.isRunning else { return }
        _ = client.finish()
    }
}

/// Another server on 127.0.0.1, on a port the system picks: any local user could run one. It
/// answers every request with a small page and records what it received, the request line and
/// headers, byte for byte.
final class OtherLocalServer: @unchecked Sendable {
    // @unchecked: `requests` is guarded by `lock`; `listener` is closed once, by `stop`.
    let port: String
    private let listener: Int32
    private let lock = NSLock()
    private var requests: [String] = []
    private let done = DispatchSemaphore(value: 0)

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            let error = errno
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
        }
        listener = fd
        port = String(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    /// The requests received so far, each its head (request line and headers).
    var received: [String] { lock.withLock { requests } }

    private func serve() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                break
            }
            // A thread each: a browser may open a connection ahead of time and send nothing on it.
            Thread { [self] in answer(client) }.start()
        }
        done.signal()
    }

    private func answer(_ client: Int32) {
        defer { close(client) }
        var time = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var head: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !String(decoding: head, as: UTF8.self).contains("\r\n\r\n") {
            let count = recv(client, &chunk, chunk.count, 0)
            guard count > 0 else { break }
            head += chunk[..<count]
        }
        guard !head.isEmpty else { return }
        lock.withLock { requests.append(String(decoding: head, as: UTF8.self)) }
        let page = "<!doctype html><title>another local server</title><p>hello</p>"
        let answer = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: \(page.utf8.count)\r\nConnection: close\r\n\r\n" + page
        _ = Array(answer.utf8).withUnsafeBytes { Glibc.send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Stops accepting and waits for the thread to end.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        done.wait()
        close(listener)
    }
}

/// A socket in front of a daemon, for a daemon that answers some requests and never others (a
/// stuck daemon, or one stopped with Ctrl-Z, answers none): every connection is passed on to the
/// daemon byte for byte, except one whose first line asks for `op`, which is read and never
/// answered.
final class DaemonThatIgnores: @unchecked Sendable {
    // @unchecked: `sockets` and `ignored` are guarded by `lock`; `listener` is closed once, by `stop`.
    let path: String
    private let daemonPath: String
    private let op: String
    private let listener: Int32
    private let lock = NSLock()
    private var sockets: [Int32] = []
    private var ignored = 0
    private let done = DispatchSemaphore(value: 0)

    init(daemon: Daemon, op: String) throws {
        path = daemon.root + "/ignoring.sock"
        daemonPath = daemon.socket
        self.op = op
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = Self.address(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
        guard bound, listen(listener, 16) == 0 else {
            let error = errno
            close(listener)
            throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
        }
        Thread { [self] in serve() }.start()
    }

    /// How many requests for `op` it has read (and left unanswered) so far.
    var requestsIgnored: Int { lock.withLock { ignored } }

    /// Stops accepting and closes every connection.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        done.wait()
        close(listener)
        lock.withLock { for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) } }
    }

    /// Closes `fds`, which their thread is done with (under the lock, so that `stop` never shuts
    /// down a descriptor number that was reused).
    private func close(_ fds: Int32...) {
        lock.withLock {
            sockets.removeAll { fds.contains($0) }
            for fd in fds { Glibc.close(fd) }
        }
    }

    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        return address
    }

    private func serve() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                break
            }
            lock.withLock { sockets.append(client) }
            Thread { [self] in relay(client) }.start()
        }
        done.signal()
    }

    /// Reads the connection's first line; passes it and the rest on to the daemon, or keeps it
    /// unanswered until the client closes.
    private func relay(_ client: Int32) {
        var first: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while !first.contains(0x0A) {
            let count = recv(client, &chunk, chunk.count, 0)
            guard count > 0 else { return close(client) }
            first += chunk[..<count]
        }
        let line = String(decoding: first.prefix { $0 != 0x0A }, as: UTF8.self)
        if line.contains(#""op":"\#(op)""#) {
            lock.withLock { ignored += 1 }
            while recv(client, &chunk, chunk.count, 0) > 0 {}
            return close(client)
        }
        guard let daemon = try? connectedSocket(AF_UNIX, to: Self.address(daemonPath), timeout: 0) else { return close(client) }
        lock.withLock { sockets.append(daemon) }
        _ = first.withUnsafeBytes { send(daemon, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let answered = DispatchSemaphore(value: 0)
        Thread {
            Self.pump(from: daemon, to: client)
            answered.signal()
        }.start()
        Self.pump(from: client, to: daemon)
        answered.wait()
        close(client, daemon)
    }

    /// Copies until `from` ends, then ends what is written to `to`.
    private static func pump(from: Int32, to: Int32) {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(from, &chunk, chunk.count, 0)
            if count < 0, errno == EINTR { continue }
            guard count > 0, chunk[..<count].withUnsafeBytes({ send(to, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == count else { break }
        }
        shutdown(to, Int32(SHUT_WR))
    }
}

/// Headless Chromium, driven by Tests/Browser/driver.py: one JSON command a line each way.
/// Starting it takes a second or two, so the tests share one.
final class Browser {
    /// The driver, run as a pipeline of the obsctl harness (for its pipes and line reading).
    private let driver: Obsctl

    /// Starts the driver. Chromium, chromedriver and python3-selenium are installed by
    /// scripts/test; in CI their absence fails the test, elsewhere the test is skipped.
    init() throws {
        let missing = ["/usr/bin/chromium", "/usr/bin/chromedriver", "/usr/bin/python3"].filter { !FileManager.default.isExecutableFile(atPath: $0) }
        if !missing.isEmpty { try Self.unavailable("\(missing.joined(separator: ", ")) not installed") }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Browser/driver.py").path
        driver = try Obsctl(nil, [], shell: "exec /usr/bin/python3 '\(script)'")
        guard let ready = driver.readLine(timeout: 90), ready.contains("\"ok\": true") else {
            let log = driver.stderr
            quit()
            try Self.unavailable("the browser driver did not start: \(log.suffix(2000))")
            return
        }
    }

    deinit { quit() }

    private static func unavailable(_ reason: String) throws {
        if ProcessInfo.processInfo.environment["CI"] != nil { XCTFail(reason + " (scripts/test installs it)") }
        throw XCTSkip(reason + " (scripts/test installs chromium, chromium-driver and python3-selenium)")
    }

    /// Closes Chromium (the driver quits it at the end of its input).
    func quit() {
        guard driver.process.isRunning else { return }
        _ = driver.finish()
    }

    /// Sends one command; returns its value, or fails the test (and returns nil) with its error.
    @discardableResult
    func run(_ command: [String: Any], timeout: Double = 60, file: StaticString = #filePath, line: UInt = #line) -> Any? {
        let data = try! JSONSerialization.data(withJSONObject: command)
        driver.send(String(decoding: data, as: UTF8.self) + "\n")
        guard let text = driver.readLine(timeout: timeout),
              let answer = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else {
            XCTFail("the browser driver did not answer \(command); stderr: \(driver.stderr.suffix(2000))", file: file, line: line)
            return nil
        }
        guard answer["ok"] as? Bool == true else {
            XCTFail("\(command["do"]!): \(answer["error"] ?? "")", file: file, line: line)
            return nil
        }
        return answer["value"]
    }

    func open(_ url: String, file: StaticString = #filePath, line: UInt = #line) {
        run(["do": "open", "url": url], file: file, line: line)
    }

    /// Runs `js`, a function body, in the page.
    @discardableResult
    func eval(_ js: String, file: StaticString = #filePath, line: UInt = #line) -> Any? {
        run(["do": "eval", "js": js], file: file, line: line)
    }

    /// Waits until `js` returns something truthy (a generous deadline: the machine may be busy).
    @discardableResult
    func wait(_ js: String, timeout: Double = 20, file: StaticString = #filePath, line: UInt = #line) -> Any? {
        run(["do": "wait", "js": js, "timeout": timeout], timeout: timeout + 30, file: file, line: line)
    }

    func click(_ css: String, file: StaticString = #filePath, line: UInt = #line) {
        run(["do": "click", "css": css], file: file, line: line)
    }

    func type(_ css: String, _ text: String, file: StaticString = #filePath, line: UInt = #line) {
        run(["do": "type", "css": css, "text": text], file: file, line: line)
    }

    func clearCookies() { run(["do": "clear_cookies"]) }

    /// Every cookie the browser holds, for any site (Chrome DevTools' Network.getAllCookies).
    func allCookies() -> [[String: Any]] { run(["do": "all_cookies"]) as? [[String: Any]] ?? [] }

    func screenshot(_ path: String) { run(["do": "screenshot", "path": path]) }
}
