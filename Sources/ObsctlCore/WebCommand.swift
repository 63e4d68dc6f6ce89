import Foundation
import Glibc
import ObsClient
import ObsWeb

let webSpec = CommandSpec(
    "web", summary: "Serve a live view of keys and the graph to a browser.",
    overview: """
        Prints a URL with a random token; requests for data without it get 403. The page acts with your \
        access to obsd, and so does anyone who has the URL: it reads every key and, unless \
        --read-only, sets value keys. Everything it needs is built into obsctl. Runs until interrupted.
        """,
    options: [
        OptionSpec(["--listen"], value: "HOST:PORT", "Listen on HOST:PORT (default \(ListenAddress.defaultText); port 0 picks a free one)."),
        OptionSpec(["--read-only"], "Refuse every write from the page."),
        OptionSpec(["--open"], "Open the URL in the default browser (xdg-open)."),
        OptionSpec(["--timeout"], value: "DURATION", "Answer the page with an error when obsd takes longer than DURATION (default 5s)."),
    ])

/// `obsctl web`: the server lives in ObsWeb; this checks the daemon is there, prints the URL and
/// serves until SIGINT or SIGTERM.
enum WebCommand {
    static func run(_ context: Context, _ parsed: ParsedArguments) throws -> Int32 {
        let text = parsed.value("--listen") ?? ListenAddress.defaultText
        guard let address = ListenAddress(text) else {
            throw UsageError("invalid address '\(text)' for --listen (expected HOST:PORT, e.g. \(ListenAddress.defaultText))")
        }
        // As `watch --reconnect` does: no daemon at the start is an error (exit 2), a daemon that
        // goes away later is waited for.
        _ = try context.request("hello")

        // Taken by sigwait below; blocked before the server starts its threads, which inherit the mask.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        defer { pthread_sigmask(SIG_UNBLOCK, &signals, nil) }

        let server: WebServer
        do {
            server = try WebServer(socketPath: context.socketPath, address: address, readOnly: parsed.has("--read-only"),
                                   version: obsctlVersion, requestTimeout: context.timeout)
        } catch {
            context.output.error(error.message)
            return 1
        }
        context.output.line(server.url)
        if !server.isLoopback {
            context.output.error("warning: \(server.address) can be reached from other machines, over plain HTTP")
        }
        context.output.error("open the URL above in a browser; anyone who has it has your access to obsd. Ctrl-C stops.")
        if parsed.has("--open") {
            let url = server.url, output = context.output
            Thread.detachNewThread {
                if case .cannotStart(let reason) = ChildProcess.run(["xdg-open", url], input: "", environment: [:], discardOutput: true) {
                    output.error("cannot run xdg-open: \(reason)")
                }
            }
        }
        var received: Int32 = 0
        sigwait(&signals, &received)
        server.stop()
        return 0
    }
}
