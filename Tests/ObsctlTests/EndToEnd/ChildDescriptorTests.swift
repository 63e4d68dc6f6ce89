import Foundation
import Glibc
import TestSupport
import XCTest

/// What the processes obsctl starts (`watch -- COMMAND`, `web --open`'s xdg-open) inherit: the
/// descriptors obsctl's own parent gave it, and none that obsctl opened (its socket to obsd, its
/// pipes). Each listing is compared with the same command started by obsctl's parent shell
/// beside obsctl, which gets exactly what the parent passes on; the parent passes fd 7 on, so
/// that passing the parent's descriptors on is seen to happen too.
final class ChildDescriptorTests: XCTestCase {
    private func descriptors(_ listing: String) -> [String] {
        listing.split(separator: "\n").map(String.init)
    }

    func test_watchCommand_inheritsWhatObsctlsParentPassedOn_andNothingObsctlOpened() throws {
        let daemon = try Daemon()
        let list = "sh -c 'ls /proc/$$/fd'"
        let base = daemon.root + "/base.txt"
        let watch = try Obsctl(daemon, [], shell: """
            exec 7</dev/null
            \(list) > '\(base)'
            exec "$OBSCTL" watch k -n 1 --no-initial -- \(list)
            """)
        daemon.waitForWatches(1)
        try obsctl(daemon, ["set", "k", "1"])
        let result = watch.finish(timeout: 120)
        XCTAssertEqual(result.status, 0, result.description)
        let expected = descriptors(try String(contentsOfFile: base, encoding: .utf8))
        XCTAssertTrue(expected.contains("7"), "\(expected)")
        XCTAssertEqual(descriptors(result.stdout), expected)
    }

    func test_webOpen_xdgOpenInheritsWhatObsctlsParentPassedOn_andNothingObsctlOpened() throws {
        let daemon = try Daemon()
        let bin = daemon.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        let script = bin + "/xdg-open"
        daemon.write("#!/bin/sh\nls /proc/$$/fd > \"$OUT.part\" && mv \"$OUT.part\" \"$OUT\"\n", to: "bin/xdg-open")
        XCTAssertEqual(chmod(script, 0o755), 0)
        let base = daemon.root + "/base.txt", opened = daemon.root + "/opened.txt"
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let web = try Obsctl(daemon, [], environment: ["PATH": bin + ":" + path], shell: """
            exec 7</dev/null
            OUT='\(base)' xdg-open http://example.invalid/
            OUT='\(opened)' exec "$OBSCTL" web --open --listen 127.0.0.1:0
            """)
        XCTAssertTrue(waitFor("xdg-open to have run", timeout: 120) { FileManager.default.fileExists(atPath: opened) })
        kill(web.process.processIdentifier, SIGINT)
        XCTAssertEqual(web.finish(timeout: 120).status, 0)
        let expected = descriptors(try String(contentsOfFile: base, encoding: .utf8))
        XCTAssertTrue(expected.contains("7"), "\(expected)")
        XCTAssertEqual(descriptors(try String(contentsOfFile: opened, encoding: .utf8)), expected)
    }

    /// xdg-open, and a browser it starts (which may outlive obsctl), write nowhere near obsctl's
    /// stdout: it is /dev/null for them, so a pipe reading obsctl's output ends when obsctl does.
    func test_webOpen_xdgOpensStdoutIsNotObsctls() throws {
        let daemon = try Daemon()
        let bin = daemon.root + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        let opened = daemon.root + "/stdout.txt"
        daemon.write("#!/bin/sh\necho from xdg-open\nstdout=$(readlink /proc/$$/fd/1)\necho \"$stdout\" > '\(opened).part' && mv '\(opened).part' '\(opened)'\n",
                     to: "bin/xdg-open")
        XCTAssertEqual(chmod(bin + "/xdg-open", 0o755), 0)
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let web = try Obsctl(daemon, ["web", "--open", "--listen", "127.0.0.1:0"], environment: ["PATH": bin + ":" + path])
        XCTAssertTrue(waitFor("xdg-open to have run", timeout: 120) { FileManager.default.fileExists(atPath: opened) })
        XCTAssertEqual(try String(contentsOfFile: opened, encoding: .utf8), "/dev/null\n")
        kill(web.process.processIdentifier, SIGINT)
        let result = web.finish(timeout: 120)
        XCTAssertEqual(result.status, 0)
        XCTAssertFalse(result.stdout.contains("from xdg-open"), result.stdout)
        XCTAssertTrue(result.stdout.contains("http://127.0.0.1:"), result.stdout)
    }
}
