// The client's epoll set as libcurl's callbacks drive it, on real sockets and with no transfer:
// the calls below are the ones libcurl makes (MultiSocket.swift's header says why a pooled
// connection stays registered, and how a reused descriptor number is told from the old one).
import CCurl
@testable import EtcdClient
import Glibc
import XCTest

final class MultiSocketTests: XCTestCase {
    private var sockets: MultiSocket!

    override func setUpWithError() throws {
        // Making a client loads libcurl, which MultiSocket needs.
        _ = try EtcdClient(EtcdConfiguration(endpoints: ["http://127.0.0.1:9"]))
        sockets = try MultiSocket()
    }

    override func tearDown() {
        sockets.cleanup()
        sockets = nil
    }

    /// A connection libcurl closed (through its close callback) while pooled and registered: a
    /// socket of another kind (a resolver's, which libcurl makes without the sockopt callback)
    /// that gets its number and asks for the same events is registered anew.
    func test_aNumberFreedByAClosedConnection_isRegisteredForTheNextSocket() throws {
        let old = try pair()
        sockets.made(old.0)
        sockets.watch(old.0, CURL_POLL_IN)
        sockets.watch(old.0, CURL_POLL_REMOVE)
        sockets.closing(old.0)
        let peer = try reuseNumber(of: old)
        defer { close(old.0); close(peer) }
        sockets.watch(old.0, CURL_POLL_IN)
        XCTAssertEqual(write(peer, "x", 1), 1)
        XCTAssertTrue(readable(sockets.fd), "the new socket is not in the epoll set")
    }

    /// A connection's socket gone without the close callback (as a guard: libcurl closes its
    /// connections through it): a new connection's socket with its number is registered anew.
    func test_aNewConnectionsNumber_isRegisteredEvenIfTheOldSocketWasNotSeenClosing() throws {
        let old = try pair()
        sockets.made(old.0)
        sockets.watch(old.0, CURL_POLL_IN)
        sockets.watch(old.0, CURL_POLL_REMOVE)
        let peer = try reuseNumber(of: old)
        defer { close(old.0); close(peer) }
        sockets.made(old.0)
        sockets.watch(old.0, CURL_POLL_IN)
        XCTAssertEqual(write(peer, "x", 1), 1)
        XCTAssertTrue(readable(sockets.fd), "the new socket is not in the epoll set")
    }

    /// A pooled connection the peer closed makes the set readable once: serving it takes the
    /// socket out, and the set is quiet again (level-triggered epoll would report it forever).
    func test_aPooledConnectionClosedByThePeer_isTakenOutOfTheSet() throws {
        let connection = try pair()
        defer { close(connection.0) }
        sockets.made(connection.0)
        sockets.watch(connection.0, CURL_POLL_IN)
        sockets.watch(connection.0, CURL_POLL_REMOVE)
        XCTAssertFalse(readable(sockets.fd, milliseconds: 0))

        close(connection.1)
        XCTAssertTrue(readable(sockets.fd))
        sockets.serveReady()
        XCTAssertFalse(readable(sockets.fd, milliseconds: 0), "the closed pooled socket is still in the set")
    }

    private func pair() throws -> (Int32, Int32) {
        var descriptors: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &descriptors) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        return (descriptors[0], descriptors[1])
    }

    /// Closes the socket `old.0` and its peer, and gives its number to a new socket at once (dup2:
    /// no other thread can take the number in between); returns the new socket's peer.
    private func reuseNumber(of old: (Int32, Int32)) throws -> Int32 {
        let new = try pair()
        guard dup2(new.0, old.0) == old.0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        close(new.0)
        close(old.1)
        return new.1
    }

    /// Whether `descriptor` becomes readable within the time given (generous by default).
    private func readable(_ descriptor: Int32, milliseconds: Int32 = 10_000) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, milliseconds) > 0
    }
}
