import Foundation
import XCTest

/// Help on stdout with status 0, pinned; version.
final class HelpTests: XCTestCase {
    func test_help_isPinned_andTheSameFromEveryEntry() throws {
        let main = try obsctl(nil, ["--help"])
        XCTAssertEqual(main.status, 0)
        XCTAssertEqual(main.stdout, Self.mainHelp)
        XCTAssertEqual(try obsctl(nil, ["-h"]).stdout, Self.mainHelp)
        XCTAssertEqual(try obsctl(nil, ["help"]).stdout, Self.mainHelp)
        let set = try obsctl(nil, ["help", "set"])
        XCTAssertEqual(set, Result(status: 0, stdout: Self.setHelp, stderr: ""))
        XCTAssertEqual(try obsctl(nil, ["set", "--help"]).stdout, Self.setHelp)
        XCTAssertEqual(try obsctl(nil, ["set", "-h"]).stdout, Self.setHelp)
        XCTAssertEqual(try obsctl(nil, ["watch", "--help"]).stdout, Self.watchHelp)
        XCTAssertEqual(try obsctl(nil, ["help", "web"]).stdout, Self.webHelp)
        XCTAssertEqual(try obsctl(nil, ["help", "nope"]).status, 64)
        let missing = NSTemporaryDirectory() + "obsctl-none-\(getpid())/obsd.sock"
        XCTAssertEqual(try obsctl(nil, ["--version", "--socket", missing]),
                       Result(status: 0, stdout: "obsctl 0.1.0\nobsd: cannot connect to \(missing): no such file (is obsd running?)\n", stderr: ""))
        let daemon = try Daemon()
        XCTAssertEqual(try obsctl(daemon, ["--version"]), Result(status: 0, stdout: "obsctl 0.1.0\nobsd 0.1.0 (\(daemon.socket))\n", stderr: ""))
    }

    func test_everyCommand_hasHelpWithItsSections() throws {
        for name in ["get", "set", "del", "incr", "define", "bind", "unbind", "publish", "watch", "wait", "eval", "list",
                     "web", "describe", "graph", "stats", "dump", "restore", "apply", "ping", "completion", "help"] {
            let help = try obsctl(nil, ["help", name])
            XCTAssertEqual(help.status, 0, name)
            XCTAssertTrue(help.stdout.hasPrefix("OVERVIEW: "), name)
            XCTAssertTrue(help.stdout.contains("\nUSAGE: obsctl \(name)"), name)
            XCTAssertTrue(help.stdout.contains("\nOPTIONS:\n"), name)
            XCTAssertTrue(Self.mainHelp.contains("\n  \(name) "), name)
        }
    }

    static let mainHelp = """
        OVERVIEW: obsctl, the command-line client of obsd

        Reads and writes keys, streams changes, and manages computed keys and bindings over the
        daemon's Unix socket. Made for shells and pipelines: every line is flushed at once, and the
        exit status says what happened (0 success, 1 the daemon answered an error, 2 cannot connect,
        3 timed out, 64 usage error).

        USAGE: obsctl [--socket PATH] [--timeout DURATION] COMMAND [ARGS]

        OPTIONS:
          --socket PATH           The daemon's socket (default: $OBSD_SOCKET, then /run/obsd/obsd.sock for
                                  root, $XDG_RUNTIME_DIR/obsd/obsd.sock or /tmp/obsd-$UID/obsd.sock).
          --timeout DURATION      Give up after DURATION (250ms, 5s, 2m, 1h, or seconds) and exit 3.
          -h, --help              Print help and exit.
          --version               Print the version and exit.

        SUBCOMMANDS:
          get                     Print each value, one per line.
          set                     Set a value.
          del                     Delete keys.
          incr                    Add to a number; print the new value.
          define                  Define a computed key.
          bind                    Bind FROM into TO.
          unbind                  Remove TO's binding.
          publish                 Publish an event on a channel.
          watch                   Stream events of keys and channels.
          wait                    Exit 0 as soon as EXPR is truthy.
          eval                    Evaluate an expression once and print the result.
          list                    List keys with their kind.
          web                     Serve a live view of keys and the graph to a browser.
          describe                Show a key's kind, expression, dependencies, dependents, binding,
                                  revisions and TTL.
          graph                   Print the dependency graph.
          stats                   Print the daemon's counters.
          dump                    Write the whole state as JSON to stdout.
          restore                 Read a state written by dump from stdin.
          apply                   Apply a definitions file in one transaction.
          ping                    Measure a round trip to the daemon; print the time taken.
          completion              Print a shell completion script.
          help                    Print help for obsctl or one command.

          See 'obsctl help COMMAND' for a command's arguments and options.

        """

    static let setHelp = """
        OVERVIEW: Set a value.

        VALUE that parses as JSON is that JSON (42, true, null, "x", [1], {"a":1}); anything else is a
        string. VALUE - reads stdin and sets each line in turn, as it arrives.

        USAGE: obsctl set KEY VALUE [--string] [--json] [--if-rev N] [--ttl DURATION] [--ephemeral] [--hold]
                          [--always]

        ARGUMENTS:
          KEY                     The key to set.
          VALUE                   The value, or - to read lines from stdin.

        OPTIONS:
          --string                Take VALUE as a string, even if it parses as JSON.
          --json                  Require VALUE to be valid JSON.
          --if-rev N              Set only if the key's revision is N (0: only if missing).
          --ttl DURATION          Delete the key after DURATION.
          --ephemeral             Keep the key only while this obsctl runs (until stdin closes or a signal).
          --hold                  With --ephemeral: hold the key until a signal, not reading stdin.
          --always                Notify watchers even if the value is unchanged.
          --timeout DURATION      Give up after DURATION (250ms, 5s, 2m, 1h, or seconds) and exit 3.
          -h, --help              Print this help and exit.

        """

    static let watchHelp = """
        OVERVIEW: Stream events of keys and channels.

        Prints one JSON object per event, as the daemon sent it minus the watch field: the current value of
        every matching key (initial), then synced, then every change, delete, error and publish. PATTERN
        segments: * matches one segment, ** any number.

        USAGE: obsctl watch PATTERN... [--no-initial] [--since REV] [--run RUN] [--latest] [--throttle
                            DURATION] [--debounce DURATION] [-n COUNT] [--timeout DURATION] [--initial-only]
                            [--reconnect] [--json] [--values] [--format FMT] [-- COMMAND [ARGS...]]

        ARGUMENTS:
          PATTERN                 Keys, patterns or channels to watch.

        OPTIONS:
          --no-initial            Skip the current values; only what changes from now.
          --since REV             Replay every change after revision REV first.
          --run RUN               With --since: the run of obsd REV was seen in ({run}); another state gives
                                  a snapshot, not a replay.
          --latest                Per key, only the latest change when events come faster than they are
                                  taken.
          --throttle DURATION     At most one event per key per DURATION.
          --debounce DURATION     An event only after a key has been quiet for DURATION.
          -n COUNT                Exit after COUNT change, delete, error or publish events.
          --timeout DURATION      Exit 3 if nothing arrives for DURATION (with -n: in all).
          --initial-only          Print the current values and exit.
          --reconnect             Reconnect when the connection drops and resume where it stopped.
          --json                  Print events as JSON (the default).
          --values                Print only the new value per change (strings raw); deletes print an empty
                                  line.
          --format FMT            Print FMT per event: {key} {new} {old} {rev} {event} {channel} {payload}
                                  {time} {run}; {NAME:json} for the field as JSON; {{ for a brace.
          -h, --help              Print this help and exit.

        """

    static let webHelp = """
        OVERVIEW: Serve a live view of keys and the graph to a browser.

        Prints a URL with a random token; requests for data without it get 403. The page acts with your
        access to obsd, and so does anyone who has the URL: it reads every key and, unless --read-only, sets
        value keys. Everything it needs is built into obsctl. Runs until interrupted.

        USAGE: obsctl web [--listen HOST:PORT] [--read-only] [--open] [--timeout DURATION]

        OPTIONS:
          --listen HOST:PORT      Listen on HOST:PORT (default 127.0.0.1:8047; port 0 picks a free one).
          --read-only             Refuse every write from the page.
          --open                  Open the URL in the default browser (xdg-open).
          --timeout DURATION      Answer the page with an error when obsd takes longer than DURATION
                                  (default 5s).
          -h, --help              Print this help and exit.

        """
}
