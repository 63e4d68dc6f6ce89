import Foundation
import Glibc
import TestSupport
import XCTest
@testable import ObsDaemon

/// The daemon embedded in the test process and driven through DaemonControl: shutdown and reload
/// are testable without a real signal.
final class InProcessDaemonTests: XCTestCase {
    func test_control_reloadsAndStops_withoutSignals() throws {
        let sandbox = try Sandbox()
        try sandbox.write("max_connections = 50\n", to: sandbox.config)
        var options = CommandLineOptions()
        options.config = sandbox.config
        options.socket = sandbox.socket
        options.memory = true
        let fixedOptions = options
        let environment = DaemonEnvironment(variables: [:], uid: geteuid())
        let settings = try Configuration.resolve(options, environment: environment, readFile: Configuration.readFile)
        let control = DaemonControl()
        let finished = DispatchSemaphore(value: 0)
        let outcome = LastLines(count: 1)
        let log = LogCapture()
        let thread = Thread {
            let daemon = Daemon(options: fixedOptions, environment: environment, settings: settings,
                                log: Logger(level: .debug, journal: false) { log.append($0) },
                                control: control, handleSignals: false)
            do {
                try daemon.run()
                outcome.set(0, "stopped")
            } catch {
                outcome.set(0, "\(error)")
            }
            finished.signal()
        }
        thread.start()
        waitFor("the daemon to listen") { (try? Client(sandbox.socket)) != nil }

        let client = try Client(sandbox.socket)
        client.send("{\"op\":\"set\",\"key\":\"a\",\"value\":1}\n")
        XCTAssertEqual(json(client.readLine())["rev"] as? Int, 1)

        try sandbox.write("max_connections = 50\nhistory = 5\n", to: sandbox.config)
        control.requestReload()
        waitFor("the reload") { log.text.contains("reloaded the configuration") }
        XCTAssertTrue(log.text.contains("reload: a new history takes effect at the next start"), log.text)

        control.requestStop()
        XCTAssertEqual(json(client.readLine())["event"] as? String, "goodbye")
        XCTAssertEqual(finished.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(outcome.get(0), "stopped")
        XCTAssertFalse(FileManager.default.fileExists(atPath: sandbox.socket))
        XCTAssertTrue(log.text.hasSuffix("obsd: info: stopped\n"), log.text)
    }
}

/// Log lines captured from the daemon's thread.
final class LogCapture: @unchecked Sendable {
    private let lock = NSLock()
    private var lines = ""

    func append(_ line: String) { lock.withLock { lines += line } }
    var text: String { lock.withLock { lines } }
}
