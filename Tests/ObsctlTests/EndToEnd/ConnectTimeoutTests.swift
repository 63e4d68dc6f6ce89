import Foundation
import Glibc
import ObsClient
import ObsCore
import Synchronization
import TestSupport
import XCTest

/// A daemon that accepts no connection: obsd stopped (SIGSTOP, Ctrl-Z), stuck, or swamped, whose
/// queue of connections waiting to be accepted is full. A blocking connect(2) to a Unix socket
/// waits for such a daemon for ever (there is no timeout, unlike TCP); obsctl and the client
/// library wait until the caller's deadline, or a bounded time without one, and a cancellation
/// ends the wait at once. (Before they did, each call here waited for ever: the harness killed
/// obsctl after 30 s, status 137, and a library call failed `BlockingCall`'s wait.)
final class ConnectTimeoutTests: XCTestCase {
    func test_obsctlWithATimeout_givesUpOnADaemonThatAcceptsNoConnection() throws {
        let sandbox = try Sandbox()
        let full = try FullBacklog(listeningAt: sandbox.root + "/obsd.sock")
        for arguments in [["get", "k"], ["set", "k", "1"], ["wait", "$k"], ["watch", "k"], ["watch", "k", "--reconnect"]] {
            XCTAssertEqual(try obsctl(nil, ["--socket", full.path, "--timeout", "1s"] + arguments),
                           Result(status: 3, stdout: "", stderr: "obsctl: timed out\n"), "\(arguments)")
        }
    }

    /// Without `--timeout`, obsctl waits `ObsConnection.connectTimeout` (10 s), then says why it
    /// could not connect (exit 2).
    func test_obsctlWithoutATimeout_givesUpAfterTheDefaultBound_sayingWhy() throws {
        let sandbox = try Sandbox()
        let full = try FullBacklog(listeningAt: sandbox.root + "/obsd.sock")
        let result = try Obsctl(nil, ["--socket", full.path, "get", "k"]).finish(timeout: ObsConnection.connectTimeout + 30)
        XCTAssertEqual(result, Result(status: 2, stdout: "", stderr: """
            obsctl: cannot connect to \(full.path): obsd accepted no connection for 10 s: its queue of new connections \
            is full (is it stopped or stuck?)

            """))
    }

    /// The real thing: obsd stopped with SIGSTOP, its queue (512) filled. Once it runs again, it
    /// accepts again.
    func test_aStoppedObsdWithItsQueueFull_timesOut_andAnswersOnceItRunsAgain() throws {
        let daemon = try Daemon()
        try obsctl(daemon, ["set", "k", "1"])
        daemon.suspend()
        do {
            let full = try FullBacklog(filling: daemon.socket)
            XCTAssertEqual(try obsctl(nil, ["--socket", full.path, "--timeout", "1s", "get", "k"]),
                           Result(status: 3, stdout: "", stderr: "obsctl: timed out\n"))
        }
        daemon.resume()
        XCTAssertEqual(try obsctl(daemon, ["--timeout", "60s", "get", "k"]), Result(status: 0, stdout: "1\n", stderr: ""))
    }

    func test_theLibrary_withADeadline_timesOut() throws {
        let sandbox = try Sandbox()
        let full = try FullBacklog(listeningAt: sandbox.root + "/obsd.sock")
        let path = full.path
        let connection = BlockingCall { () throws(ClientError) in _ = try ObsConnection(path: path, deadline: monotonicNow() + 1) }
        XCTAssertEqual(connection.error(within: 1 + 30), .timedOut)
        var options = WatchOptions(keys: ["k"])
        options.reconnect = true
        let watch = BlockingCall { [options] () throws(ClientError) in
            _ = try WatchStream(path: path, options: options, deadline: monotonicNow() + 1)
        }
        XCTAssertEqual(watch.error(within: 1 + 30), .timedOut)
        let obs = ObsClient(socketPath: path)
        let request = BlockingCall { () throws(ClientError) in
            let outcome = Mutex<ClientError?>(nil)
            let done = DispatchSemaphore(value: 0)
            Task {
                do throws(ClientError) { _ = try await obs.request("ping", timeout: 1) } catch { outcome.withLock { $0 = error } }
                done.signal()
            }
            done.wait()
            if let error = outcome.withLock({ $0 }) { throw error }
        }
        XCTAssertEqual(request.error(within: 1 + 30), .timedOut)
    }

    /// A `Cancellation` raised from another thread ends a connection under way at once, however
    /// far its deadline; and a `WatchStream` that waits for the daemon with `reconnect`.
    func test_theLibrary_cancelled_stopsWaitingAtOnce() throws {
        let sandbox = try Sandbox()
        let full = try FullBacklog(listeningAt: sandbox.root + "/obsd.sock")
        let path = full.path
        let before = unconnectedUnixSockets()
        let cancellation = Cancellation()
        let connection = BlockingCall { () throws(ClientError) in
            _ = try ObsConnection(path: path, deadline: monotonicNow() + 3600, cancellation: cancellation)
        }
        waitFor("the connection to be under way") { unconnectedUnixSockets() > before }
        cancellation.cancel()
        XCTAssertEqual(connection.error(within: 30), .cannotConnect(path: path, reason: .cancelled))

        var options = WatchOptions(keys: ["k"])
        options.reconnect = true
        let watchCancellation = Cancellation()
        let watch = BlockingCall { [options] () throws(ClientError) in
            _ = try WatchStream(path: path, options: options, cancellation: watchCancellation)
        }
        waitFor("the watch to be connecting") { unconnectedUnixSockets() > before }
        watchCancellation.cancel()
        XCTAssertEqual(watch.error(within: 30), .connectionLost(path: path, reason: nil))
    }
}

/// A blocking client call on a thread of its own, so that one that never returns fails the test
/// rather than hanging the run.
final class BlockingCall: Sendable {
    /// nil while it runs; then what it threw (nil inside: nothing).
    private let outcome = Mutex<ClientError??>(nil)

    init(_ body: @escaping @Sendable () throws(ClientError) -> Void) {
        Thread { [self] in
            var thrown: ClientError?
            do throws(ClientError) { try body() } catch { thrown = error }
            outcome.withLock { $0 = .some(thrown) }
        }.start()
    }

    /// The error the call threw; nil, and a failure, when it did not return within `seconds` or
    /// threw nothing.
    func error(within seconds: Double) -> ClientError? {
        guard waitFor("the call to return", timeout: seconds, { outcome.withLock { $0 != nil } }) else { return nil }
        guard let thrown = outcome.withLock({ $0 }) ?? nil else {
            XCTFail("the call returned without an error")
            return nil
        }
        return thrown
    }
}
