// The completion scripts, run by the real shells against a real obsd: bash through its completion
// function, fish through `complete -C`, zsh interactively in a pseudo-terminal.
import Foundation
import XCTest

/// `obsctl completion bash|zsh|fish`: commands, options, and key names from the daemon obsctl
/// would talk to (OBSD_SOCKET, or the --socket on the line being completed).
final class CompletionTests: XCTestCase {
    func test_completion_scriptsForBashZshFish() throws {
        let bash = try obsctl(nil, ["completion", "bash"])
        XCTAssertEqual(bash.status, 0)
        XCTAssertTrue(bash.stdout.contains("complete -F _obsctl obsctl"))
        XCTAssertTrue(bash.stdout.contains("watch) opts=\"--no-initial --since --run --latest"))
        XCTAssertTrue(try obsctl(nil, ["completion", "zsh"]).stdout.hasPrefix("#compdef obsctl\n"))
        XCTAssertTrue(try obsctl(nil, ["completion", "fish"]).stdout.contains("-a watch -d 'Stream events of keys and channels.'"))
        XCTAssertEqual(try obsctl(nil, ["completion", "tcsh"]).status, 64)
    }

    func test_bashCompletion_completesCommandsOptionsAndKeysFromTheDaemon() throws {
        let daemon = try Self.daemonWithSensors()
        XCTAssertEqual(try bash(daemon, ["obsctl", "wa"]), "watch wait\n")
        XCTAssertEqual(try bash(daemon, ["obsctl", "--"]), "--socket --timeout --help --version\n")
        XCTAssertEqual(try bash(daemon, ["obsctl", "--socket", daemon.root + "/obsd.s"]), daemon.socket + "\n")
        XCTAssertEqual(try bash(daemon, ["obsctl", "watch", "--no"]), "--no-initial\n")
        XCTAssertEqual(try bash(daemon, ["obsctl", "we"]), "web\n")
        XCTAssertEqual(try bash(daemon, ["obsctl", "web", "--"]), "--listen --read-only --open --timeout --socket --help\n")
        XCTAssertEqual(try bash(daemon, ["obsctl", "get", "sensor."]), "sensor.hall sensor.kitchen\n")
    }

    func test_bashCompletion_listsTheKeysOfTheSocketOnTheLine() throws {
        let daemon = try Self.daemonWithSensors()
        let elsewhere = ["OBSD_SOCKET": daemon.root + "/elsewhere.sock"]
        XCTAssertEqual(try bash(daemon, ["obsctl", "--socket", daemon.socket, "get", "sensor."], environment: elsewhere),
                       "sensor.hall sensor.kitchen\n")
        XCTAssertEqual(try bash(daemon, ["obsctl", "get", "--socket", daemon.socket, "sensor."], environment: elsewhere),
                       "sensor.hall sensor.kitchen\n")
        XCTAssertEqual(try bash(daemon, ["obsctl", "get", "sensor."], environment: elsewhere), "\n")
    }

    func test_fishCompletion_completesCommandsOptionsAndKeysFromTheDaemon() throws {
        let daemon = try Self.daemonWithSensors()
        let fish = try fishCompletion(daemon)
        XCTAssertEqual(try fish("obsctl wat"), ["watch"])
        XCTAssertEqual(try fish("obsctl wa"), ["wait", "watch"])
        XCTAssertEqual(try fish("obsctl --timeout 5s wa"), ["wait", "watch"])
        XCTAssertEqual(try fish("obsctl --"), ["--help", "--socket", "--timeout", "--version"])
        XCTAssertEqual(try fish("obsctl --socket \(daemon.root)/obsd.s"), [daemon.socket])
        XCTAssertEqual(try fish("obsctl watch --"), Self.watchLongOptions)
        XCTAssertEqual(try fish("obsctl w"), ["wait", "watch", "web"])
        XCTAssertEqual(try fish("obsctl web --"), ["--help", "--listen", "--open", "--read-only", "--socket", "--timeout"])
        XCTAssertEqual(try fish("obsctl get sensor."), ["sensor.hall", "sensor.kitchen"])
        XCTAssertEqual(try fish("obsctl watch sensor.hall sensor.k"), ["sensor.kitchen"])
        XCTAssertEqual(try fish("obsctl completion "), ["bash", "fish", "zsh"])
        XCTAssertEqual(try fish("obsctl help wa"), ["wait", "watch"])
    }

    func test_fishCompletion_listsTheKeysOfTheSocketOnTheLine() throws {
        let daemon = try Self.daemonWithSensors()
        let fish = try fishCompletion(daemon, environment: ["OBSD_SOCKET": daemon.root + "/elsewhere.sock"])
        XCTAssertEqual(try fish("obsctl --socket \(daemon.socket) get sensor."), ["sensor.hall", "sensor.kitchen"])
        XCTAssertEqual(try fish("obsctl get --socket \(daemon.socket) sensor."), ["sensor.hall", "sensor.kitchen"])
        XCTAssertEqual(try fish("obsctl get sensor."), [])
    }

    func test_zshCompletion_completesCommandsOptionsAndKeysFromTheDaemon() throws {
        let daemon = try Self.daemonWithSensors()
        let lines = ["obsctl wat", "obsctl wa", "obsctl --timeout 5s wa", "obsctl --", "obsctl --socket \(daemon.root)/obsd.s",
                     "obsctl watch --", "obsctl get sensor.", "obsctl watch sensor.hall sensor.k", "obsctl completion ",
                     "obsctl help wa"]
        let zsh = try zsh(daemon, lines)
        XCTAssertEqual(zsh.lines, [
            ["obsctl watch "],
            ["obsctl wait", "obsctl watch"],
            ["obsctl --timeout 5s wait", "obsctl --timeout 5s watch"],
            ["obsctl --help", "obsctl --socket", "obsctl --timeout", "obsctl --version"],
            ["obsctl --socket \(daemon.socket) "],
            Self.watchLongOptions.map { "obsctl watch \($0)" },
            ["obsctl get sensor.hall", "obsctl get sensor.kitchen"],
            ["obsctl watch sensor.hall sensor.kitchen "],
            ["obsctl completion bash", "obsctl completion fish", "obsctl completion zsh"],
            ["obsctl help wait", "obsctl help watch"],
        ], zsh.terminal)
    }

    func test_zshCompletion_listsTheKeysOfTheSocketOnTheLine() throws {
        let daemon = try Self.daemonWithSensors()
        let socket = daemon.socket
        let lines = ["obsctl --socket \(socket) get sensor.", "obsctl get --socket \(socket) sensor.", "obsctl get sensor."]
        let zsh = try zsh(daemon, lines, environment: ["OBSD_SOCKET": daemon.root + "/elsewhere.sock"])
        XCTAssertEqual(zsh.lines, [
            ["obsctl --socket \(socket) get sensor.hall", "obsctl --socket \(socket) get sensor.kitchen"],
            ["obsctl get --socket \(socket) sensor.hall", "obsctl get --socket \(socket) sensor.kitchen"],
            [],
        ], zsh.terminal)
    }

    /// watch's long options and the global ones it takes too, sorted.
    static let watchLongOptions = ["--debounce", "--format", "--help", "--initial-only", "--json", "--latest", "--no-initial",
                                   "--reconnect", "--run", "--since", "--socket", "--throttle", "--timeout", "--values"]

    static func daemonWithSensors() throws -> Daemon {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "sensor.kitchen", "1"])
        try obsctl(daemon, ["set", "sensor.hall", "2"])
        return daemon
    }

    /// COMPREPLY after bash's completion function ran for `words` (the last one being completed).
    func bash(_ daemon: Daemon, _ words: [String], environment: [String: String] = [:]) throws -> String {
        let script = daemon.write(try obsctl(nil, ["completion", "bash"]).stdout, to: "completion.bash")
        let line = words.map { "'\($0)'" }.joined(separator: " ")
        let run = try Obsctl(daemon, [], environment: environment, shell: """
            PATH="$(dirname "$OBSCTL"):$PATH"; source \(script)
            COMP_WORDS=(\(line)); COMP_CWORD=\(words.count - 1); _obsctl; echo "${COMPREPLY[*]}"
            """)
        return run.finish().stdout
    }

    /// Returns what fish offers for a line: each candidate, sorted (`complete -C` prints each
    /// with a tab and its description).
    func fishCompletion(_ daemon: Daemon, environment: [String: String] = [:]) throws -> (String) throws -> [String] {
        let fish = try shell("fish")
        let script = daemon.write(try obsctl(nil, ["completion", "fish"]).stdout, to: "obsctl.fish")
        return { line in
            var env = self.shellHome(daemon).merging(environment) { $1 }
            env["LINE"] = line
            let run = try Obsctl(daemon, [], environment: env, shell: """
                PATH="$(dirname "$OBSCTL"):$PATH" exec \(fish) --no-config -c 'source $argv[1]; and complete -C"$LINE"' \(script)
                """)
            let result = run.finish()
            XCTAssert(result.status == 0 && result.stderr.isEmpty, "\(line): \(result)")
            return result.stdout.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }.sorted()
        }
    }

    /// What an interactive zsh makes of each line on TAB, after compinit found the script on fpath
    /// as _obsctl. Menu completion inserts one match per TAB, so TAB is pressed once per match and
    /// each list holds the line after each press, sorted (empty: no match). The terminal shows
    /// zsh's errors, such as a parse error in the script.
    ///
    /// Driven through zsh/zpty rather than by calling _obsctl with stub compadd and _describe: the
    /// real completion system runs the script as a user's shell would.
    func zsh(_ daemon: Daemon, _ lines: [String], environment: [String: String] = [:]) throws -> (lines: [[String]], terminal: String) {
        let zsh = try shell("zsh")
        let functions = daemon.root + "/zsh-functions"
        try FileManager.default.createDirectory(atPath: functions, withIntermediateDirectories: true)
        daemon.write(try obsctl(nil, ["completion", "zsh"]).stdout, to: "zsh-functions/_obsctl")
        let log = daemon.root + "/zsh-tab.log"
        let setup = daemon.write(Self.zshSetup(functions: functions, log: log), to: "zsh-setup.zsh")
        let driver = daemon.write(Self.zshDriver, to: "zsh-driver.zsh")
        let arguments = ([driver, setup, log] + lines).map { "'\($0)'" }.joined(separator: " ")
        let run = try Obsctl(daemon, [], environment: shellHome(daemon).merging(environment) { $1 }, shell: """
            PATH="$(dirname "$OBSCTL"):$PATH" exec \(zsh) -f \(arguments)
            """)
        let result = run.finish(timeout: 120)
        XCTAssertEqual(result.status, 0, result.description)
        let completed = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            .map { $0.split(separator: "\t").map(String.init).sorted() }
        return (completed, "the terminal showed:\n" + result.stderr.replacingOccurrences(of: "\r", with: ""))
    }

    /// A home for the shells inside the sandbox, so that they read and write nothing of the user's.
    func shellHome(_ daemon: Daemon) -> [String: String] {
        ["HOME": daemon.root, "XDG_CONFIG_HOME": daemon.root + "/xdg-config", "XDG_DATA_HOME": daemon.root + "/xdg-data"]
    }

    /// Sourced by the interactive zsh: the completion system with _obsctl on fpath, and a TAB that
    /// does menu completion and then logs the number of matches and the line.
    static func zshSetup(functions: String, log: String) -> String {
        #"""
        bindkey -e
        fpath=('\#(functions)' $fpath)
        autoload -Uz compinit && compinit -u -D
        setopt menu_complete
        log-tab() { zle menu-complete; print -r -- "${_lastcomp[nmatches]}"$'\t'"$BUFFER" >> '\#(log)' }
        zle -N log-tab && bindkey '^I' log-tab
        log-clear() { BUFFER=; print cleared >> '\#(log)' }
        zle -N log-clear && bindkey '^Xc' log-clear
        print ready >> '\#(log)'

        """#
    }

    /// `zsh -f DRIVER SETUP LOG LINE...`: starts `zsh -f -i` in a pseudo-terminal, sources SETUP,
    /// types each LINE and TAB, then TAB again until every match was offered. Prints one line per
    /// LINE: what the line became after each TAB, tab-separated (empty: no match); then what the
    /// terminal showed on stderr.
    ///
    /// Keys are sent only while the line editor waits for them: each after the one before was
    /// logged, the first after a logged ^Xc. Typed while zsh still runs a command (the source),
    /// they pass the terminal's line discipline first, and a TAB among them does not complete.
    static let zshDriver = #"""
        zmodload zsh/zpty || exit 1
        setup=$1 log=$2
        shift 2
        : >| $log
        screen=
        logged() {
            local i chunk
            for i in {1..600}; do
                while zpty -r -t shell chunk; do screen+=$chunk; done
                (( $(wc -l < $log) >= $1 )) && return 0
                sleep 0.05
            done
            print -ru2 -- "timed out waiting for line $1 of $log:" "$(<$log)" "the terminal showed:" "$screen"
            zpty -d shell
            exit 1
        }
        zpty -b shell TERM=dumb zsh -f -i
        zpty -w shell "source ${(q)setup}"
        logged 1
        zpty -n -w shell $'\C-xc'
        logged 2
        steps=2
        for line; do
            zpty -n -w shell "$line"$'\t'
            logged $(( ++steps ))
            record=$(tail -n 1 $log)
            matches=${record%%$'\t'*}
            results=()
            (( matches > 0 )) && results+=("${record#*$'\t'}")
            repeat $(( matches - 1 )); do
                zpty -n -w shell $'\t'
                logged $(( ++steps ))
                record=$(tail -n 1 $log)
                results+=("${record#*$'\t'}")
            done
            print -r -- "${(pj:\t:)results}"
            zpty -n -w shell $'\C-xc'
            logged $(( ++steps ))
        done
        while zpty -r -t shell chunk; do screen+=$chunk; done
        zpty -d shell
        print -ru2 -- "$screen"

        """#

    /// The path of a shell the tests need. scripts/test installs it; in CI its absence fails the
    /// test, elsewhere the test is skipped with that reason (as with systemd-socket-activate).
    func shell(_ name: String) throws -> String {
        guard let path = ["/usr/bin/" + name, "/bin/" + name].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            if ProcessInfo.processInfo.environment["CI"] != nil {
                XCTFail("\(name) is not installed: scripts/test installs it")
            }
            throw XCTSkip("\(name) is not installed (scripts/test installs it)")
        }
        return path
    }
}
