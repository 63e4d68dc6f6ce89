// What the `obsctl web` tests drive: a real `obsctl web` on a port the system picks, headless
// Chromium through Tests/Browser/driver.py (Debian's python3-selenium and chromium-driver), and
// plain HTTP requests for what a browser would not show (status codes, headers).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import TestSupport
import XCTest

/// A running `obsctl web --listen 127.0.0.1:0` and the URL it printed.
final class WebProcess {
    let process: Obsctl
    let url: String

    init(_ daemon: Daemon, _ arguments: [String] = []) throws {
        process = try Obsctl(daemon, ["web", "--listen", "127.0.0.1:0"] + arguments)
        guard let line = process.readLine(), line.hasPrefix("http://127.0.0.1:") else {
            throw XCTSkip("obsctl web printed no URL; stderr: \(process.stderr)")
        }
        url = line
    }

    /// `http://127.0.0.1:PORT`
    var base: String { String(url[..<url.range(of: "/?token=")!.lowerBound]) }
    var token: String { String(url[url.range(of: "?token=")!.upperBound...]) }
    var port: String { String(base.split(separator: ":").last!) }
    var cookie: String { "obsctl_web_\(port)=\(token)" }

    /// Stops it as Ctrl-C would; returns how it ended.
    func stop() -> Result {
        kill(process.process.processIdentifier, SIGINT)
        return process.finish()
    }
}

/// One HTTP exchange, redirects not followed, cookies only as given.
struct HTTPExchange {
    var status: Int
    var headers: [String: String]
    var body: String

    static func send(_ method: String, _ url: String, cookie: String? = nil, contentType: String? = nil, body: String? = nil) -> HTTPExchange {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = method
        request.httpShouldHandleCookies = false
        if let cookie { request.setValue(cookie, forHTTPHeaderField: "Cookie") }
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

/// Headless Chromium, driven by Tests/Browser/driver.py: one JSON command a line each way.
/// Starting it takes a second or two, so the tests share one.
final class Browser {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer: [UInt8] = []
    private let errorPath = NSTemporaryDirectory() + "obsctl-web-driver.\(getpid()).\(UUID().uuidString.prefix(8)).err"

    /// Starts the driver. Chromium, chromedriver and python3-selenium are installed by
    /// scripts/test; in CI their absence fails the test, elsewhere the test is skipped.
    init() throws {
        let missing = ["/usr/bin/chromium", "/usr/bin/chromedriver", "/usr/bin/python3"].filter { !FileManager.default.isExecutableFile(atPath: $0) }
        if !missing.isEmpty { try Self.unavailable("\(missing.joined(separator: ", ")) not installed") }
        let driver = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Browser/driver.py").path
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [driver]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: errorPath)
        try process.run()
        guard let ready = readAnswer(timeout: 90), ready["ok"] as? Bool == true else {
            let log = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
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

    func quit() {
        guard process.isRunning else { return }
        input.fileHandleForWriting.write(Data("{\"do\":\"quit\"}\n".utf8))
        let deadline = Date().addingTimeInterval(20)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: errorPath)
    }

    /// Sends one command; returns its value, or fails the test (and returns nil) with its error.
    @discardableResult
    func run(_ command: [String: Any], timeout: Double = 60, file: StaticString = #filePath, line: UInt = #line) -> Any? {
        let data = try! JSONSerialization.data(withJSONObject: command)
        input.fileHandleForWriting.write(data + Data("\n".utf8))
        guard let answer = readAnswer(timeout: timeout) else {
            XCTFail("the browser driver did not answer \(command)", file: file, line: line)
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

    func screenshot(_ path: String) { run(["do": "screenshot", "path": path]) }

    private func readAnswer(timeout: Double) -> [String: Any]? {
        let fd = output.fileHandleForReading.fileDescriptor
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = Data(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return (try? JSONSerialization.jsonObject(with: line)) as? [String: Any]
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000) + 1) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = read(fd, &chunk, chunk.count)
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }
}
