import Foundation
import TestSupport
import XCTest

/// `obsctl apply` and obsd's `definitions` setting: one format, one transaction, idempotent.
final class ApplyTests: XCTestCase {
    static let statusBar = """
        # status bar
        set volume 0.4
        define volume.label 'format("{}%", round($volume * 100))'
        define battery.low '$battery.percent < 20'
        set battery.percent 55

        set net.wifi.ssid home   # trailing comment
        bind net.wifi.ssid bar.wifi --map 'value ?? "offline"'
        """

    func test_apply_oneTransaction_andTwiceChangesNothing() throws {
        let daemon = try Daemon()
        let file = daemon.write(Self.statusBar, to: "bar.obs")
        XCTAssertEqual(try obsctl(daemon, ["apply", file]), Result(status: 0, stdout: "\(file): applied at revision 1\n", stderr: ""))
        XCTAssertEqual(try obsctl(daemon, ["get", "volume.label", "battery.low", "bar.wifi"]).stdout, "40%\nfalse\nhome\n")
        XCTAssertEqual(try obsctl(daemon, ["apply", file]), Result(status: 0, stdout: "\(file): unchanged\n", stderr: ""))
        XCTAssertEqual(daemon.stat("rev"), 1)
        XCTAssertEqual(try obsctl(daemon, ["apply", "-"], stdin: "unbind bar.wifi\ndel volume\n").stdout, "-: applied at revision 2\n")
        XCTAssertEqual(try obsctl(daemon, ["apply", "-"], stdin: "unbind bar.wifi\ndel volume\n").stdout, "-: unchanged\n")
    }

    /// A file saved with CRLF line ends (a Windows editor, git's autocrlf): Swift takes "\r\n"
    /// as one character, so the file was split on no line at all and refused as one line
    /// (`bar.obs:1: unexpected argument ... for 'set'`). Lines now end at "\n" and lose a "\r"
    /// before it, as request lines and `set KEY -` lines do; and a failing line is named by its
    /// own number.
    func test_apply_aFileWithCRLFLineEnds_appliesAsWritten() throws {
        let daemon = try Daemon()
        let file = daemon.write(Self.statusBar.replacingOccurrences(of: "\n", with: "\r\n") + "\r\n", to: "bar.obs")
        XCTAssertEqual(try obsctl(daemon, ["apply", file]), Result(status: 0, stdout: "\(file): applied at revision 1\n", stderr: ""))
        XCTAssertEqual(try obsctl(daemon, ["get", "--json", "volume.label", "battery.low", "bar.wifi"]).stdout,
                       "\"40%\"\nfalse\n\"home\"\n")
        let bad = daemon.write("set a 1\r\nset b 'open\r\n", to: "bad.obs")
        XCTAssertEqual(try obsctl(daemon, ["apply", bad]),
                       Result(status: 64, stdout: "", stderr: "obsctl: \(bad):2: unterminated single quote\nSee 'obsctl --help'.\n"))
    }

    func test_apply_failingLine_appliesNothing_andNamesTheLine() throws {
        let daemon = try Daemon()
        let file = daemon.write("set a 1\n\n# fine so far\ndefine b '$a +'\n", to: "bad.obs")
        XCTAssertEqual(try obsctl(daemon, ["apply", file]),
                       Result(status: 1, stdout: "", stderr: "obsctl: \(file):4: parse_error: expected an expression at 4\n  $a +\n      ^\n"))
        XCTAssertEqual(try obsctl(daemon, ["get", "a"]).status, 1)
        let syntax = daemon.write("set a 1\nset b 'open\n", to: "syntax.obs")
        XCTAssertEqual(try obsctl(daemon, ["apply", syntax]),
                       Result(status: 64, stdout: "", stderr: "obsctl: \(syntax):2: unterminated single quote\nSee 'obsctl --help'.\n"))
        let command = daemon.write("publish a 1\n", to: "command.obs")
        XCTAssertEqual(try obsctl(daemon, ["apply", command]).stderr,
                       "obsctl: \(command):1: unknown command 'publish' (a definitions file holds set, define, bind, unbind and del)\nSee 'obsctl --help'.\n")
        XCTAssertEqual(try obsctl(daemon, ["apply", daemon.root + "/missing.obs"]).status, 64)
    }

    /// A file with no size to read up front is read to its end: a process substitution, a FIFO.
    /// What cannot be read says why, and a directory on stdin does not crash obsctl.
    func test_apply_fromPipesAndFIFOs_andUnreadableInputSaysWhy() throws {
        let daemon = try Daemon()
        let substituted = try Obsctl(daemon, [], shell: "\"$OBSCTL\" apply <(echo 'set a 1'); echo \"status $?\"").finish()
        XCTAssertEqual(substituted.stdout, "/dev/fd/63: applied at revision 1\nstatus 0\n", substituted.description)
        let fifo = daemon.root + "/defs.fifo"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        let viaFIFO = try Obsctl(daemon, [], shell: "echo 'set b 2' > '\(fifo)' & \"$OBSCTL\" apply '\(fifo)'; echo \"status $?\"; wait").finish()
        XCTAssertEqual(viaFIFO.stdout, "\(fifo): applied at revision 2\nstatus 0\n", viaFIFO.description)
        XCTAssertEqual(try obsctl(daemon, ["get", "a", "b"]).stdout, "1\n2\n")

        let missing = daemon.root + "/missing.obs"
        XCTAssertEqual(try obsctl(daemon, ["apply", missing]).stderr,
                       "obsctl: apply: cannot read \(missing): No such file or directory\nSee 'obsctl --help'.\n")
        XCTAssertEqual(try obsctl(daemon, ["apply", daemon.root]).stderr,
                       "obsctl: apply: cannot read \(daemon.root): Is a directory\nSee 'obsctl --help'.\n")
        for command in ["apply -", "restore"] {
            let result = try Obsctl(daemon, [], shell: "\"$OBSCTL\" \(command) < /; echo \"status $?\"").finish()
            XCTAssertEqual(result, Result(status: 0, stdout: "status 64\n", stderr: "obsctl: \(command.prefix { $0 != " " }): cannot read stdin: Is a directory\nSee 'obsctl --help'.\n"))
        }
    }

    func test_daemonDefinitionsSetting_appliesAtStart_andOnReload() throws {
        let probe = try Daemon()
        let file = probe.write("set greeting hello\ndefine shout 'upper($greeting)'\n", to: "defs.obs")
        let config = probe.write("definitions = \(file)\n", to: "obsd.conf")
        let daemon = try Daemon(arguments: ["--config", config])
        XCTAssertEqual(try obsctl(daemon, ["get", "shout"]).stdout, "HELLO\n")
        probe.write("set greeting bye\ndefine shout 'upper($greeting)'\n", to: "defs.obs")
        kill(daemon.process!.processIdentifier, SIGHUP)
        waitFor("the reload to apply the file") { (try? obsctl(daemon, ["get", "shout"]).stdout) == "BYE\n" }
        XCTAssertTrue(daemon.log.contains("definitions: \(file) applied at revision 1"), daemon.log)
    }

    func test_daemonDefinitionsSetting_aFailingLineIsLogged_andAppliesNothing() throws {
        let probe = try Daemon()
        let file = probe.write("set a 1\ndefine b '$a +'\n", to: "defs.obs")
        let config = probe.write("definitions = \(file)\n", to: "obsd.conf")
        let daemon = try Daemon(arguments: ["--config", config])
        XCTAssertEqual(try obsctl(daemon, ["get", "a"]).status, 1)
        XCTAssertTrue(daemon.log.contains("definitions: \(file):2: parse_error: expected an expression at 4; nothing applied"), daemon.log)
    }

    /// A definitions file others can write is refused like any file obsd reads (they could define
    /// keys and bindings through it): logged, nothing applied; made safe, it applies at the reload.
    func test_daemonDefinitionsSetting_aFileOthersCanWrite_isRefused() throws {
        let probe = try Daemon()
        let file = probe.write("set a 1\n", to: "defs.obs")
        chmod(file, 0o666)
        let config = probe.write("definitions = \(file)\n", to: "obsd.conf")
        let daemon = try Daemon(arguments: ["--config", config])
        XCTAssertEqual(try obsctl(daemon, ["get", "a"]).status, 1)
        XCTAssertTrue(daemon.log.contains("definitions: definitions file \(file) is writable by others (mode 666)"), daemon.log)
        chmod(file, 0o644)
        kill(daemon.process!.processIdentifier, SIGHUP)
        waitFor("the reload to apply the file") { (try? obsctl(daemon, ["get", "a"]).stdout) == "1\n" }
    }
}
