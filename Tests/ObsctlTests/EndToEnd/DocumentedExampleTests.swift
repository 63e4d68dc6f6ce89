import Foundation
import Glibc
import TestSupport
import XCTest

/// The examples of docs/cli.md, taken from the page as it is written and run with the real obsctl
/// against a real obsd: a page edited into something that does not work fails here.
final class DocumentedExampleTests: XCTestCase {
    private static let page: String = {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("docs/cli.md").path
        return (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    }()

    /// The fenced code block that contains `marker`, without its fences.
    private func block(containing marker: String) throws -> String {
        var blocks: [String] = []
        var current: [Substring]?
        for line in Self.page.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                if let lines = current { blocks.append(lines.joined(separator: "\n") + "\n") }
                current = current == nil ? [] : nil
            } else {
                current?.append(line)
            }
        }
        return try XCTUnwrap(blocks.first { $0.contains(marker) }, "docs/cli.md has no code block with \(marker)")
    }

    /// The inline code span of the page that starts with `prefix`.
    private func inlineCode(startingWith prefix: String) throws -> String {
        let spans = Self.page.components(separatedBy: "`").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
        return try XCTUnwrap(spans.first { $0.hasPrefix(prefix) }, "docs/cli.md has no `\(prefix)...`")
    }

    /// A directory for PATH holding `obsctl` (the binary under test) and any stand-ins for other
    /// commands the examples call.
    private func commands(_ daemon: Daemon, stubs: [String: String] = [:]) throws -> [String: String] {
        let bin = daemon.root + "/bin"
        mkdir(bin, 0o755)
        symlink(try builtExecutable("obsctl"), bin + "/obsctl")
        for (name, script) in stubs {
            daemon.write(script, to: "bin/" + name)
            chmod(bin + "/" + name, 0o755)
        }
        return ["PATH": bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
    }

    func test_definitionsFileExample_appliesAndItsBindingShowsOfflineWithoutASource() throws {
        let daemon = try Daemon()
        let file = daemon.write(try block(containing: "# status bar"), to: "bar.obs")
        XCTAssertEqual(try obsctl(daemon, ["apply", file]), Result(status: 0, stdout: "\(file): applied at revision 1\n", stderr: ""))
        XCTAssertEqual(try obsctl(daemon, ["get", "volume.label", "bar.wifi"]).stdout, "40%\noffline\n")
        try obsctl(daemon, ["set", "net.wifi.ssid", "home"])
        XCTAssertEqual(try obsctl(daemon, ["get", "bar.wifi"]).stdout, "home\n")
        try obsctl(daemon, ["del", "net.wifi.ssid"])
        XCTAssertEqual(try obsctl(daemon, ["get", "bar.wifi"]).stdout, "offline\n")
        try obsctl(daemon, ["set", "battery.percent", "15"])
        XCTAssertEqual(try obsctl(daemon, ["get", "battery.low"]).stdout, "true\n")
        XCTAssertEqual(try obsctl(daemon, ["apply", file]).stdout, "\(file): unchanged\n")
    }

    func test_statusBarExamples_printOneLinePerUpdate() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["apply", daemon.write(try block(containing: "# status bar"), to: "bar.obs")])
        let environment = try commands(daemon)
        let plain = try block(containing: "--format '{key} {new}'").trimmingCharacters(in: .whitespacesAndNewlines)
        let bar = try Obsctl(daemon, [], environment: environment, shell: plain)
        XCTAssertEqual(bar.readLines(2), ["bar.wifi offline", "volume.label 40%"])
        try obsctl(daemon, ["set", "volume", "0.55"])
        XCTAssertEqual(bar.readLine(), "volume.label 55%")

        // waybar's JSON module: the exec line as waybar would run it, every line a JSON object.
        let module = try block(containing: "\"custom/wifi\"")
        let config = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(("{" + module + "}").utf8)) as? [String: [String: String]])
        XCTAssertEqual(config["custom/wifi"]?["return-type"], "json")
        let exec = try XCTUnwrap(config["custom/wifi"]?["exec"])
        let waybar = try Obsctl(daemon, [], environment: environment, shell: exec)
        daemon.waitForWatches(2)
        try obsctl(daemon, ["set", "--string", "net.wifi.ssid", "say \"hi\"\\\nagain"])
        let lines = waybar.readLines(2)
        XCTAssertEqual(lines.count, 2)
        let texts = try lines.map { line in
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String], line)["text"]
        }
        XCTAssertEqual(texts, ["offline", "say \"hi\"\\\nagain"])
        for watch in [bar, waybar] {
            kill(watch.process.processIdentifier, SIGTERM)
            _ = watch.finish()
        }
    }

    /// `watch -- jq`: the snapshot's `initial` events carry `value`, changes `new`; the example
    /// prints both.
    func test_jqExample_printsTheSnapshotAndTheChanges() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: "/usr/bin/jq"), "jq is not installed (scripts/test installs it)")
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "door.front", "open"])
        let example = try inlineCode(startingWith: "obsctl watch 'door.*' -- jq")
        let watch = try Obsctl(daemon, [], environment: try commands(daemon), shell: example)
        XCTAssertEqual(watch.readLine(), "door.front is now open")
        daemon.waitForWatches(1)
        try obsctl(daemon, ["set", "door.back", "closed"])
        XCTAssertEqual(watch.readLine(), "door.back is now closed")
        kill(watch.process.processIdentifier, SIGTERM)
        _ = watch.finish()
    }

    /// The notifier example, with a stand-in notify-send that records what it was asked to show.
    func test_notifyExample_notifiesOnceTheBatteryIsLow() throws {
        let daemon = try Daemon()
        let shown = daemon.root + "/shown"
        let environment = try commands(daemon, stubs: ["notify-send": "#!/bin/sh\necho \"$1|$2\" >> \(shown)\n"])
        try obsctl(daemon, ["set", "battery.low", "false"])
        let example = try block(containing: "notify-send \"Battery low\"")
        let watch = try Obsctl(daemon, [], environment: environment, shell: example)
        daemon.waitForWatches(1)
        try obsctl(daemon, ["set", "battery.low", "true"])
        waitFor("the notification") { FileManager.default.fileExists(atPath: shown) }
        let rev = try obsctl(daemon, ["describe", "--json", "battery.low"]).stdout
        let keyRev = (try JSONSerialization.jsonObject(with: Data(rev.utf8)) as? [String: Any])?["rev"] as? Int
        XCTAssertEqual(try String(contentsOfFile: shown, encoding: .utf8), "Battery low|was false at revision \(keyRev ?? -1)\n")
        kill(watch.process.processIdentifier, SIGTERM)
        _ = watch.finish()
    }

    /// The systemd unit for an ephemeral key: its `ExecStart` line, run as systemd runs it (stdin
    /// /dev/null), holds the key; `systemctl stop`'s SIGTERM ends it and the key goes; and when
    /// obsd stops, it ends with exit 2 for `Restart=always` to set the key again.
    func test_ephemeralServiceExample_holdsTheKey_untilStopped_andEndsWhenObsdStops() throws {
        let daemon = try Daemon()
        let unit = try block(containing: "ExecStart=/usr/local/bin/obsctl set --ephemeral --hold")
        XCTAssertTrue(unit.contains("Restart=always"), unit)
        let execStart = try XCTUnwrap(unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
            .dropFirst("ExecStart=/usr/local/bin/".count)
        let environment = try commands(daemon)
        func start() throws -> Obsctl {
            let service = try Obsctl(daemon, [], environment: environment, shell: "exec \(execStart) < /dev/null 2>&1")
            waitFor("the key") { (try? obsctl(daemon, ["get", "presence.laptop"]).stdout) == "online\n" }
            // Held, not ended by the stdin that closed at once.
            Thread.sleep(forTimeInterval: 0.3)
            XCTAssertTrue(service.process.isRunning)
            XCTAssertEqual(try obsctl(daemon, ["get", "presence.laptop"]).stdout, "online\n")
            return service
        }

        let stopped = try start()
        kill(stopped.process.processIdentifier, SIGTERM)
        stopped.process.waitUntilExit()
        XCTAssertEqual(stopped.process.terminationReason, .uncaughtSignal)
        waitFor("the key to go") { (try? obsctl(daemon, ["get", "presence.laptop"]))?.status == 1 }

        let service = try start()
        daemon.stop()
        let result = service.finish()
        XCTAssertEqual(result.status, 2, result.stdout)
        XCTAssertTrue(result.stdout.contains("lost the connection"), result.stdout)
    }

    /// `--hold` holds a key set once: without `--ephemeral`, or with `VALUE -`, it is refused
    /// before anything is set; and a definitions file refuses it as it refuses `--ephemeral`.
    func test_hold_isRefusedWhereItMeansNothing() throws {
        let daemon = try Daemon()
        let plain = try obsctl(daemon, ["set", "--hold", "k", "1"])
        XCTAssertEqual(plain.status, 64)
        XCTAssertTrue(plain.stderr.contains("--hold needs --ephemeral"), plain.stderr)
        let fromStdin = try obsctl(daemon, ["set", "--ephemeral", "--hold", "k", "-"], stdin: "1\n")
        XCTAssertEqual(fromStdin.status, 64)
        XCTAssertTrue(fromStdin.stderr.contains("--hold does not go with VALUE -"), fromStdin.stderr)
        let file = daemon.write("set --hold k 1\n", to: "held.obs")
        let applied = try obsctl(daemon, ["apply", file])
        XCTAssertEqual(applied.status, 64, applied.stderr)
        XCTAssertTrue(applied.stderr.contains("--hold has no meaning in a definitions file"), applied.stderr)
        XCTAssertEqual(try obsctl(daemon, ["get", "k"]).status, 1)
    }

    /// The deploy script: it waits until every instance reports the new version, then publishes.
    func test_deployScriptExample_waitsForEveryInstance() throws {
        let daemon = try Daemon()
        mkdir(daemon.root + "/deploy", 0o755)
        daemon.write("set deploy.started true\n", to: "deploy/definitions.obs")
        let script = daemon.write(try block(containing: "#!/bin/sh\nset -e\nobsctl apply"), to: "deploy.sh")
        try obsctl(daemon, ["set", "instances.a.version", "\"1\""])
        try obsctl(daemon, ["set", "instances.b.version", "\"1\""])
        let done = try Obsctl(daemon, ["watch", "deploy.done", "-n", "1"])
        daemon.waitForWatches(1)
        var environment = try commands(daemon)
        environment["VERSION"] = "2"
        let deploy = try Obsctl(daemon, [], environment: environment, shell: "cd \(daemon.root) && sh \(script)")
        waitFor("the deploy to set its version") { (try? obsctl(daemon, ["get", "deploy.version"]).stdout) == "2\n" }
        try obsctl(daemon, ["set", "instances.a.version", "\"2\""])
        XCTAssertTrue(deploy.process.isRunning, "one instance is still on 1")
        try obsctl(daemon, ["set", "instances.b.version", "\"2\""])
        XCTAssertEqual(deploy.finish(), Result(status: 0, stdout: "deploy/definitions.obs: applied at revision 3\n", stderr: ""))
        XCTAssertEqual(done.finish().stdout, """
            {"event":"synced","rev":2}
            {"event":"publish","channel":"deploy.done","payload":"2"}

            """)
    }

    /// The parse-error example: the command and the output the page shows.
    func test_caretExample_isWhatObsctlPrints() throws {
        let daemon = try Daemon()
        let example = try block(containing: "$ obsctl define total")
        let lines = example.split(separator: "\n", omittingEmptySubsequences: false)
        let command = String(lines[0].dropFirst(2))
        let shown = lines.dropFirst().joined(separator: "\n")
        let result = try Obsctl(daemon, [], environment: try commands(daemon), shell: command + " 2>&1").finish()
        XCTAssertEqual(result.stdout, shown)
        XCTAssertEqual(result.status, 1)
    }
}
