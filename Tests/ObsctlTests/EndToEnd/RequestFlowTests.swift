import Foundation
import Glibc
import ObsClient
import ObsCore
import TestSupport
import XCTest

/// Requests a daemon does not take as fast as they come. obsd stops reading a connection whose
/// answers wait unread past `output_buffer_bytes`, and a stopped obsd reads nothing: a client
/// that writes without looking at what comes back, or without a deadline, waits for ever.
final class RequestFlowTests: XCTestCase {
    /// `obsctl get` of many keys sends its requests pipelined. It used to send them all before
    /// reading an answer: past the daemon's output bound the daemon stopped reading, obsctl's
    /// send blocked, and both waited until the daemon dropped the client (`client_timeout`, 60 s
    /// here; the harness gives up after 30 s). Now answers are read as requests go out.
    func test_getOfManyLargeValues_pastTheDaemonsOutputBound_printsEveryAnswer() throws {
        let daemon = try Daemon(config: "output_buffer_bytes = 64K\n")
        let value = String(repeating: "v", count: 10_000)
        XCTAssertEqual(try obsctl(daemon, ["set", "big", "\"\(value)\""]).status, 0)
        let keys = 400
        let result = try obsctl(daemon, ["get"] + Array(repeating: "big", count: keys))
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.count, keys + 1)
        XCTAssertEqual(lines.filter { $0 == value }.count, keys)
    }

    /// `del` (and define, bind, unbind) are pipelined the same way; a key that is refused does
    /// not stop the others, and the first refusal is the command's error.
    func test_delOfManyKeys_deletesEveryOne_andReportsTheFirstRefusal() throws {
        let daemon = try Daemon(config: "output_buffer_bytes = 64K\n")
        let keys = (0..<20_000).map { "k\($0)" }
        let batch = keys.map { #"{"op":"set","key":"\#($0)","value":1}"# }.joined(separator: ",")
        let client = try Client(daemon.socket)
        XCTAssertTrue(client.send(#"{"op":"batch","ops":[\#(batch)]}"# + "\n"))
        XCTAssertEqual(json(client.readLine())["ok"] as? Bool, true)
        // An invalid name in the middle: refused by the daemon, and the keys after it still go.
        let result = try obsctl(daemon, ["del", "k0", "a b"] + keys.dropFirst())
        XCTAssertEqual(result.status, 1)
        XCTAssertEqual(result.stderr, "obsctl: bad_key: invalid key name 'a b'\n")
        XCTAssertTrue(client.send(#"{"op":"stats"}"# + "\n"))
        let stats = json(client.readLine())
        XCTAssertEqual(stats["keys"] as? Int, 0, "\(stats)")
    }

    /// A reader of obsctl's stdout that stops reading for a while (`obsctl get ... | less`, left
    /// on its first page). obsctl, blocked writing, used to leave the daemon's answers to the
    /// requests under way unread: past `output_buffer_bytes` the daemon stopped reading it, and
    /// after `client_timeout` dropped it (`lost the connection`, exit 2, most keys unprinted).
    /// Lines are now written by a thread of their own while the answers are taken off the socket.
    func test_getOfManyLargeValues_toAReaderThatPauses_printsEveryAnswer() throws {
        let daemon = try Daemon(config: "output_buffer_bytes = 64K\nclient_timeout = 3s\n")
        let value = String(repeating: "v", count: 20_000)
        XCTAssertEqual(try obsctl(daemon, ["set", "big", "\"\(value)\""]).status, 0)
        let keys = 200
        let get = try Obsctl(daemon, ["get"] + Array(repeating: "big", count: keys))
        XCTAssertEqual(get.readLine(), value)
        // Longer than client_timeout without reading (a pause, not a bound: a slower machine
        // only makes it longer).
        sleep(5)
        let result = get.finish()
        XCTAssertEqual(result.status, 0, result.description)
        XCTAssertEqual(result.stderr, "")
        XCTAssertEqual(result.stdout.split(separator: "\n").filter { $0 == value }.count, keys - 1)
    }

    /// A daemon that closes the connection while obsctl still sends (here after answering a
    /// request line over its `max_line_bytes` with `too_large`) has answered the requests before
    /// it. Those answers used to be read and dropped when a send failed, the first error among
    /// them (a missing key's `not_found`) taken for the command's: `get` printed nothing at all.
    /// Now each answer is printed in its place, the one the daemon refused too, and then obsctl
    /// says the connection was lost (the keys after it have no answer).
    func test_getPipeline_daemonClosesWhileObsctlSends_printsEveryAnswerItGave() throws {
        let daemon = try Daemon(config: "max_line_bytes = 4096\n")
        XCTAssertEqual(try obsctl(daemon, ["set", "present", "1"]).status, 0)
        // Keys far over the daemon's line, together more than the socket holds: a send is under
        // way when the daemon closes.
        let long = String(repeating: "k", count: 100_000)
        let result = try obsctl(daemon, ["get", "present", "missing"] + Array(repeating: long, count: 5))
        XCTAssertEqual(result.stdout, "1\n\n\n", result.description)
        XCTAssertEqual(result.status, 2, result.description)
        XCTAssertEqual(result.stderr, """
            obsctl: not_found: no key 'missing'
            obsctl: too_large: request line longer than 4096 bytes
            obsctl: lost the connection to \(daemon.socket): is obsd running?

            """)
    }

    /// A daemon that stops reads nothing more, but answers what it had read: a request sent
    /// after that fails to go out while an earlier one's answer is still to come. That send used
    /// to read and drop the answer, and throw. Now it returns, and the answer comes to
    /// `response`, then the loss.
    func test_aSendToAStoppingDaemon_leavesTheEarlierAnswerToResponse() throws {
        let daemon = try Daemon()
        let connection = try ObsConnection(path: daemon.socket, deadline: monotonicNow() + 30)
        try connection.request("set", ["key": "a", "value": 1], deadline: monotonicNow() + 30)
        daemon.suspend()
        try connection.send("get", ["key": "a"], deadline: monotonicNow() + 30)
        let obsd = try XCTUnwrap(daemon.obsd)
        obsd.signal(SIGTERM)
        daemon.resume()
        obsd.process.waitUntilExit()
        try connection.send("ping", deadline: monotonicNow() + 30)
        // Read before the daemon stopped: answered, either way (its value, or `shutting_down`).
        do throws(ClientError) {
            let answer = try connection.response(deadline: monotonicNow() + 30)
            XCTAssertEqual(answer["value"], 1)
        } catch {
            guard case .server(let failure) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.code, .shuttingDown)
        }
        XCTAssertThrowsError(try connection.response(deadline: monotonicNow() + 30)) { error in
            guard case .connectionLost = error as? ClientError else { return XCTFail("\(error)") }
        }
    }

    /// A request line larger than the socket holds, to a stopped obsd (which the kernel still
    /// connects to): the send waits for room, until the request's deadline. It used to block in
    /// send(2) for ever (the call here never returned).
    func test_aLongRequestToAStoppedDaemon_timesOut() throws {
        let daemon = try Daemon()
        XCTAssertEqual(try obsctl(daemon, ["set", "k", "1"]).status, 0)
        daemon.suspend()
        defer { daemon.resume() }
        let path = daemon.socket
        let value = JSONValue.string(String(repeating: "v", count: 900_000))
        let call = BlockingCall { () throws(ClientError) in
            let connection = try ObsConnection(path: path, deadline: monotonicNow() + 30)
            try connection.request("set", ["key": "k", "value": value], deadline: monotonicNow() + 1)
        }
        XCTAssertEqual(call.error(within: 1 + 30), .timedOut)
    }

    /// A peer that ended its side of the connection (end of file) and reads nothing: the wait to
    /// send sleeps until the deadline. (Its end reads ready for ever: waiting on it as on answers
    /// would spin a CPU until the deadline.) CPU time is bounded from above only: a slower machine
    /// spends less of it, never more.
    func test_sendingToAPeerThatEndedItsSide_waitsWithoutSpinning() throws {
        let sandbox = try Sandbox()
        let path = sandbox.root + "/peer.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
        XCTAssertTrue(bound && listen(listener, 4) == 0)
        let value = JSONValue.string(String(repeating: "v", count: 2_000_000))
        let call = BlockingCall { () throws(ClientError) in
            let connection = try ObsConnection(path: path, deadline: monotonicNow() + 30)
            try connection.request("set", ["key": "k", "value": value], deadline: monotonicNow() + 2)
        }
        let peer = accept(listener, nil, nil)
        XCTAssertGreaterThanOrEqual(peer, 0)
        defer { close(peer) }
        shutdown(peer, Int32(SHUT_WR))
        let before = cpuSeconds()
        XCTAssertEqual(call.error(within: 2 + 30), .timedOut)
        XCTAssertLessThan(cpuSeconds() - before, 1.0, "the wait to send spun")
    }

    private func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }

    /// `sensor | obsctl set temp -` and `publish -` outlive a restart of obsd between two lines:
    /// the line that finds the connection closed (before a byte of it went out) goes again on a
    /// new one. They used to exit 2 at that line, which reached no daemon.
    func test_setAndPublishFromStdin_goOnAcrossARestartOfObsd() throws {
        let daemon = try Daemon()
        let set = try Obsctl(daemon, ["set", "temp", "-"])
        let publish = try Obsctl(daemon, ["publish", "alerts", "-"])
        set.send("20\n")
        publish.send("\"first\"\n")
        waitFor("the first line") { (try? obsctl(daemon, ["get", "temp"]).stdout) == "20\n" }
        daemon.stop()
        try daemon.start()
        let watch = try Obsctl(daemon, ["watch", "alerts", "--no-initial", "-n", "1"])
        daemon.waitForWatches(1)
        set.send("21\n")
        publish.send("\"second\"\n")
        waitFor("the line after the restart") { (try? obsctl(daemon, ["get", "temp"]).stdout) == "21\n" }
        XCTAssertEqual(watch.finish().stdout.split(separator: "\n").last, #"{"event":"publish","channel":"alerts","payload":"second"}"#)
        set.closeInput()
        publish.closeInput()
        XCTAssertEqual(set.finish(), Result(status: 0, stdout: "", stderr: ""))
        XCTAssertEqual(publish.finish(), Result(status: 0, stdout: "", stderr: ""))
    }

    /// The library's `request(timeout:)`: after a timeout the answer may still come, and was read
    /// as the next request's answer on the same connection. Now a connection in doubt is closed.
    func test_theLibrary_afterATimeout_theNextRequestGetsItsOwnAnswer() async throws {
        let daemon = try Daemon()
        let obs = ObsClient(socketPath: daemon.socket)
        try await obs.set("x", "X")
        try await obs.set("y", "Y")
        daemon.suspend()
        do {
            _ = try await obs.request("get", ["key": "y"], timeout: 0.5)
            XCTFail("a stopped daemon answered")
        } catch {
            XCTAssertEqual(error, .timedOut)
        }
        daemon.resume()
        let x = try await obs.get("x")
        XCTAssertEqual(x, "X")
    }

    /// Requests run one at a time; a request's timeout counts from its call, so one that waited
    /// its whole time behind another is not sent at all once its turn comes (it used to get its
    /// whole time again then, and a write could land long after its caller was told it timed out).
    func test_theLibrary_aRequestWhoseTimeoutPassedWhileItWaitedItsTurn_isNotSent() async throws {
        let daemon = try Daemon()
        let obs = ObsClient(socketPath: daemon.socket)
        try await obs.set("a", 0)
        daemon.suspend()
        let first = Task { () async -> ClientError? in
            do throws(ClientError) {
                _ = try await obs.request("set", ["key": "a", "value": 1], timeout: 4)
                return nil
            } catch { return error }
        }
        // The first is on its way (it waits 4 s): this one waits behind it, past its own second.
        try await Task.sleep(nanoseconds: 1_000_000_000)
        do {
            _ = try await obs.request("set", ["key": "b", "value": 1], timeout: 1)
            XCTFail("a stopped daemon answered")
        } catch {
            XCTAssertEqual(error, .timedOut)
        }
        let firstError = await first.value
        XCTAssertEqual(firstError, ClientError.timedOut)
        daemon.resume()
        do {
            let b = try await obs.request("get", ["key": "b"], timeout: 30)
            XCTFail("the request that timed out in the queue was sent: \(b.line)")
        } catch {
            guard case .server(let failure) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.code, .notFound)
        }
    }
}
