// `make install` and `make uninstall` as a packager runs them, the installed units checked by
// systemd-analyze, and the socket-activated pair run under a real systemd (booted in a
// systemd-nspawn container) where the machine allows it.
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import ObsDaemon

final class InstallTests: XCTestCase {
    private var repository: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// Runs `command` with `arguments`; returns its status and what it printed (stdout and stderr).
    @discardableResult
    private func run(_ command: String, _ arguments: [String], environment: [String: String] = [:],
                     directory: String? = nil, timeout: Double = 300) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [command] + arguments
        var env = ProcessInfo.processInfo.environment
        for (name, value) in environment { env[name] = value }
        process.environment = env
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let outputPath = NSTemporaryDirectory() + "install-test-\(UUID().uuidString).out"
        FileManager.default.createFile(atPath: outputPath, contents: nil)
        defer { unlink(outputPath) }
        let output = FileHandle(forWritingAtPath: outputPath)!
        process.standardOutput = output
        process.standardError = output
        try process.run()
        waitFor("\(command) to finish", timeout: timeout) { !process.isRunning }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        return (process.terminationStatus, (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "")
    }

    private func temporaryDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "obsd-install-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
        chmod(made, 0o755)
        return String(cString: made)
    }

    /// `make install-files` with the binaries this test run built (`make install` builds release
    /// binaries first, which is too slow for the suite; the recipes are the same).
    private func install(_ variables: [String]) throws {
        let builtDirectory = URL(fileURLWithPath: try builtExecutable("obsd")).deletingLastPathComponent().path
        let result = try run("make", ["--no-print-directory", "-C", repository, "install-files", "BUILDDIR=\(builtDirectory)"] + variables)
        XCTAssertEqual(result.status, 0, result.output)
    }

    private func files(under root: String) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: root)
        var found: [String] = []
        while let path = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                found.append(path)
            }
        }
        return found.sorted()
    }

    func test_makeInstall_honoursPrefixAndDestdir_andUninstallRemovesEverything() throws {
        let stage = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: stage) }
        try install(["DESTDIR=\(stage)", "PREFIX=/usr"])
        XCTAssertEqual(files(under: stage), [
            "usr/bin/obsctl", "usr/bin/obsd",
            "usr/lib/systemd/system/obsd.service", "usr/lib/systemd/system/obsd.socket",
            "usr/lib/systemd/user/obsd.service", "usr/lib/systemd/user/obsd.socket",
            "usr/share/bash-completion/completions/obsctl",
            "usr/share/doc/obsd/CHANGELOG.md", "usr/share/doc/obsd/LICENSE", "usr/share/doc/obsd/NOTICE",
            "usr/share/doc/obsd/README.md", "usr/share/doc/obsd/config/obsd.conf.example",
            "usr/share/doc/obsd/docs/architecture.md", "usr/share/doc/obsd/docs/cli.md",
            "usr/share/doc/obsd/docs/expressions.md", "usr/share/doc/obsd/docs/library.md",
            "usr/share/doc/obsd/docs/operations.md", "usr/share/doc/obsd/docs/performance.md",
            "usr/share/doc/obsd/docs/protocol.md",
            "usr/share/fish/vendor_completions.d/obsctl.fish",
            "usr/share/man/man1/obsctl.1", "usr/share/man/man5/obsd.conf.5", "usr/share/man/man8/obsd.8",
            "usr/share/zsh/site-functions/_obsctl",
        ])
        // Every file of the docs the README links to is installed, so its links still resolve.
        for document in ["docs/cli.md", "docs/operations.md", "docs/protocol.md", "docs/library.md", "docs/expressions.md",
                         "docs/architecture.md", "docs/performance.md"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: stage + "/usr/share/doc/obsd/" + document), document)
        }
        let unit = try String(contentsOfFile: stage + "/usr/lib/systemd/system/obsd.service", encoding: .utf8)
        XCTAssertTrue(unit.contains("\nExecStart=/usr/bin/obsd\n"), unit)
        XCTAssertTrue(unit.contains("\nDocumentation=man:obsd(8) man:obsd.conf(5) file:/usr/share/doc/obsd/docs/operations.md\n"), unit)
        XCTAssertFalse(unit.split(separator: "\n").contains { !$0.hasPrefix("#") && $0.contains("/usr/local") }, "every path follows PREFIX")
        var info = stat()
        XCTAssertEqual(stat(stage + "/usr/bin/obsd", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o755)
        XCTAssertEqual(stat(stage + "/usr/share/man/man8/obsd.8", &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o644)

        // The completion files load in their shells.
        let bash = try run("bash", ["-c", "source \(stage)/usr/share/bash-completion/completions/obsctl && complete -p obsctl"])
        XCTAssertEqual(bash.output, "complete -F _obsctl obsctl\n")
        XCTAssertEqual(try run("zsh", ["-n", stage + "/usr/share/zsh/site-functions/_obsctl"]).status, 0)
        XCTAssertEqual(try run("fish", ["--no-execute", stage + "/usr/share/fish/vendor_completions.d/obsctl.fish"]).status, 0)
        // ... and are where the shells look: fish's vendor directory under each of XDG_DATA_DIRS,
        // zsh's site-functions on fpath (Debian's zsh has /usr/local/share/zsh/site-functions there).
        let home = stage + "/home"
        mkdir(home, 0o700)
        let path = "\(stage)/usr/bin:" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let fish = try run("fish", ["-c", "complete -C'obsctl wat'"], environment: ["XDG_DATA_DIRS": stage + "/usr/share", "PATH": path, "HOME": home])
        XCTAssertEqual(fish.output, "watch\tStream events of keys and channels.\n")
        let zsh = try run("zsh", ["-f", "-c", "fpath=(\(stage)/usr/share/zsh/site-functions $fpath); autoload -U compinit; compinit -u -D; print $_comps[obsctl]"],
                          environment: ["HOME": home])
        XCTAssertEqual(zsh.output, "_obsctl\n")

        try run("make", ["--no-print-directory", "-C", repository, "uninstall", "DESTDIR=\(stage)", "PREFIX=/usr"])
        XCTAssertEqual(files(under: stage), [], "uninstall removes every file install wrote")
    }

    /// The man pages render without a warning and list exactly what the tables behind --help list.
    func test_manPages_renderCleanly_andCoverEveryCommandOptionAndSetting() throws {
        let stage = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: stage) }
        try install(["PREFIX=\(stage)"])
        for page in ["man1/obsctl.1", "man8/obsd.8", "man5/obsd.conf.5"] {
            let rendered = try run("groff", ["-man", "-Tutf8", "-ww", "-z", stage + "/share/man/" + page])
            XCTAssertEqual(rendered.status, 0, page)
            XCTAssertEqual(rendered.output, "", "\(page) renders without warnings")
        }
        let manual = try run("man", ["obsctl"], environment: ["MANPATH": stage + "/share/man", "MANWIDTH": "200", "MAN_KEEP_FORMATTING": ""])
        XCTAssertEqual(manual.status, 0, manual.output)
        let help = try run(try builtExecutable("obsctl"), ["--help"]).output
        let commands = help.components(separatedBy: "SUBCOMMANDS:\n")[1].split(separator: "\n")
            .compactMap { $0.hasPrefix("  ") && !$0.hasPrefix("   ") ? $0.split(separator: " ").first.map(String.init) : nil }
            .filter { $0 != "See" }
        XCTAssertGreaterThan(commands.count, 15)
        for command in commands {
            XCTAssertTrue(manual.output.contains("\n   obsctl \(command)"), "obsctl(1) has \(command)")
            let commandHelp = try run(try builtExecutable("obsctl"), ["help", command]).output
            for option in commandHelp.split(separator: "\n").filter({ $0.hasPrefix("  -") }).map({ String($0.split(separator: " ")[0]) }) {
                XCTAssertTrue(manual.output.contains(option.trimmingCharacters(in: CharacterSet(charactersIn: ","))), "\(command) \(option)")
            }
        }
        let daemon = try run("man", ["8", "obsd"], environment: ["MANPATH": stage + "/share/man", "MANWIDTH": "200"]).output
        let daemonHelp = try run(try builtExecutable("obsd"), ["--help"]).output
        for flag in daemonHelp.split(separator: "\n").filter({ $0.hasPrefix("  -") }).map({ String($0.split(separator: " ")[0]) }) {
            XCTAssertTrue(daemon.contains("       " + flag), "obsd(8) has \(flag)")
        }
        let conf = try run("man", ["5", "obsd.conf"], environment: ["MANPATH": stage + "/share/man", "MANWIDTH": "200"]).output
        let example = try String(contentsOfFile: repository + "/config/obsd.conf.example", encoding: .utf8)
        let settings = example.split(separator: "\n").filter { $0.hasPrefix("# ") && $0.contains(" = ") && !$0.contains("`") }
            .map { String($0.dropFirst(2).prefix { $0 != " " }) }
        XCTAssertEqual(settings.count, ConfigFile.specs.count)
        for setting in settings { XCTAssertTrue(conf.contains("\n       \(setting)\n") || conf.contains("\n       \(setting) "), setting) }
    }

    /// systemd-analyze verify accepts the installed units (ExecStart exists, every man: page of
    /// Documentation= is found by man), and the file: documentation exists.
    func test_installedUnits_passSystemdAnalyzeVerify() throws {
        let stage = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: stage) }
        try install(["PREFIX=\(stage)"])
        let runtime = stage + "/xdg-runtime"
        mkdir(runtime, 0o700)
        let environment = ["MANPATH": stage + "/share/man", "XDG_RUNTIME_DIR": runtime]
        for (scope, directory) in [([], "system"), (["--user"], "user")] {
            let units = ["obsd.service", "obsd.socket"].map { "\(stage)/lib/systemd/\(directory)/\($0)" }
            let verify = try run("systemd-analyze", scope + ["verify"] + units, environment: environment)
            XCTAssertEqual(verify.status, 0, verify.output)
            XCTAssertEqual(verify.output, "", directory)
            for unit in units {
                let text = try String(contentsOfFile: unit, encoding: .utf8)
                for line in text.split(separator: "\n") where line.hasPrefix("Documentation=") {
                    for link in line.dropFirst("Documentation=".count).split(separator: " ") where link.hasPrefix("file:") {
                        XCTAssertTrue(FileManager.default.fileExists(atPath: String(link.dropFirst(5))), String(link))
                    }
                }
            }
        }
        let security = try run("systemd-analyze", ["security", "--offline=true", "--threshold=20", stage + "/lib/systemd/system/obsd.service"],
                               environment: environment)
        XCTAssertEqual(security.status, 0, security.output)
        XCTAssertTrue(security.output.contains("Overall exposure level for obsd.service: 0."), security.output)
    }

    /// obsd.socket and obsd.service under a real systemd: the installed tree is bound into a
    /// container booted from this machine's /usr (systemd-nspawn --volatile=yes), where a test unit
    /// starts the socket, connects, and then restarts, kills and stops the service. The socket
    /// must still lead to obsd after each (the service's RuntimeDirectory= is removed when it stops).
    func test_socketActivatedPair_underARealSystemd() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to boot a container")
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-nspawn"),
                          "systemd-nspawn is not installed (Debian's systemd-container; scripts/test installs it)")
        let stage = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: stage) }
        try install(["DESTDIR=\(stage)", "PREFIX=/usr/local"])
        let e2e = stage + "/e2e", results = stage + "/results"
        mkdir(e2e, 0o755)
        mkdir(results, 0o777)
        try """
            #!/bin/sh
            exec > /results/log 2>&1
            step() { echo "== $1"; obsctl --timeout 20s get k || echo "get failed"; }
            systemctl start obsd.socket
            obsctl --timeout 20s set k 1
            step activated
            systemctl restart obsd.service
            step restarted
            systemctl kill -s KILL obsd.service
            while [ "$(systemctl show -P NRestarts obsd.service)" = 0 ] || ! systemctl is-active -q obsd.service; do sleep 0.1; done
            step killed
            # (systemctl may warn that the socket can still activate the service, depending on
            # when it looks: PartOf= stops the socket too, which the line below checks.)
            systemctl stop obsd.service 2>/dev/null
            echo "== stopped: socket $(systemctl is-active obsd.socket), service $(systemctl is-active obsd.service)"
            systemctl start obsd.socket
            step started-again
            systemctl stop obsd.socket obsd.service
            systemctl mask --runtime obsd.socket 2>/dev/null
            systemctl start obsd.service
            step without-the-socket-unit
            echo "== done"
            exec >/dev/null 2>&1
            systemctl poweroff

            """.write(toFile: e2e + "/run.sh", atomically: true, encoding: .utf8)
        chmod(e2e + "/run.sh", 0o755)
        try """
            [Unit]
            Description=obsd end-to-end test
            [Service]
            Type=oneshot
            ExecStart=/e2e/run.sh

            """.write(toFile: e2e + "/obsd-e2e.service", atomically: true, encoding: .utf8)
        var binds = ["--bind-ro=\(stage)/usr/local:/usr/local", "--bind-ro=\(e2e):/e2e", "--bind=\(results):/results",
                     "--bind-ro=\(e2e)/obsd-e2e.service:/etc/systemd/system/obsd-e2e.service"]
        // Binaries linked to the toolchain's Swift runtime (a debug build) need it in the container;
        // the container's /usr is this machine's, but a toolchain in /opt is not.
        let libraries = try run("ldd", [stage + "/usr/local/bin/obsd"]).output
        if let line = libraries.split(separator: "\n").first(where: { $0.contains("libswiftCore.so => ") }),
           let path = line.split(separator: " ").dropFirst(2).first, let range = path.range(of: "/usr/lib/swift/"),
           !path[..<range.lowerBound].isEmpty {
            binds.append("--bind-ro=\(path[..<range.lowerBound])")
        }
        let boot = try run("systemd-nspawn", ["--quiet", "--register=no", "--keep-unit", "--directory=/", "--volatile=yes"] + binds
                           + ["--boot", "systemd.firstboot=off", "systemd.unit=basic.target", "systemd.wants=obsd-e2e.service"],
                           timeout: 240)
        let log = (try? String(contentsOfFile: results + "/log", encoding: .utf8)) ?? ""
        guard log.contains("== activated") else {
            throw XCTSkip("systemd-nspawn could not boot a container here (status \(boot.status)): \(boot.output.suffix(2000))")
        }
        XCTAssertEqual(log, """
            == activated
            1
            == restarted
            1
            == killed
            1
            == stopped: socket inactive, service inactive
            == started-again
            1
            == without-the-socket-unit
            1
            == done

            """)
    }
}
