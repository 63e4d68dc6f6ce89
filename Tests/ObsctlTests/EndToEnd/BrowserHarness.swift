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

    func screenshot(_ path: String) { run(["do": "screenshot", "path": path]) }
}
