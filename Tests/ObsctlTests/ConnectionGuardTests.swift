import Foundation
import Glibc
@testable import ObsWeb
import XCTest

/// `ConnectionGuard`'s rules on real sockets (pairs of connected Unix stream sockets: the guard
/// shuts down one end, the test reads the other) and a clock the test gives.
final class ConnectionGuardTests: XCTestCase {
    /// One connection: `server` is the end the guard may shut down, `client` the peer's.
    struct Pair {
        let server: Int32
        let client: Int32

        init() throws {
            var ends: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            server = ends[0]
            client = ends[1]
        }

        /// Whether the guard shut the server's end down: the client reads the end at once.
        var isShutDown: Bool {
            var byte: UInt8 = 0
            return recv(client, &byte, 1, Int32(MSG_DONTWAIT)) == 0
        }

        func close() {
            Glibc.close(server)
            Glibc.close(client)
        }
    }

    func pairs(_ count: Int) throws -> [Pair] { try (0..<count).map { _ in try Pair() } }

    func test_pastTheLimit_theConnectionThatWaitedLongestWithoutAHeadIsClosed() throws {
        let connections = ConnectionGuard(maxWithoutToken: 3, secondsWithoutToken: 10)
        let pairs = try pairs(6)
        defer { pairs.forEach { $0.close() } }
        for id in 0..<3 { connections.started(UInt(id), socket: pairs[id].server, now: 100) }
        XCTAssertEqual(pairs.map(\.isShutDown), [false, false, false, false, false, false])
        // 0 has sent a request's head (without the token): 1, the oldest that has sent none, goes.
        connections.headReceived(0, withToken: false)
        connections.started(3, socket: pairs[3].server, now: 101)
        XCTAssertEqual(pairs.map(\.isShutDown), [false, true, false, false, false, false])
        // A connection that sent the token is no longer counted, nor ever closed here.
        connections.headReceived(2, withToken: true)
        connections.started(4, socket: pairs[4].server, now: 102)
        XCTAssertEqual(pairs.map(\.isShutDown), [false, true, false, false, false, false])
        XCTAssertEqual(connections.openWithoutToken, 3)
        // 3 and 4 sent heads too: now the oldest of all goes.
        connections.headReceived(3, withToken: false)
        connections.headReceived(4, withToken: false)
        connections.started(5, socket: pairs[5].server, now: 103)
        XCTAssertEqual(pairs.map(\.isShutDown), [true, true, false, false, false, false])
        XCTAssertEqual(connections.openWithoutToken, 3)
    }

    /// A client that sends whole heads (a request it never reads the answer of, a body it
    /// trickles) and opens a connection as soon as one is closed: every connection of its has sent
    /// a head, so the page's new connection, whose head has not been read yet, was the one the next
    /// arrival closed, every time. It is not: the oldest goes, as long as the new one has not
    /// waited `headGrace` for its head.
    func test_aNewConnectionWithoutItsHeadYet_isNotClosedFirst_whenEveryOtherHasSentOne() throws {
        let connections = ConnectionGuard(maxWithoutToken: 3, secondsWithoutToken: 10)
        let pairs = try pairs(6)
        defer { pairs.forEach { $0.close() } }
        for id in 0..<3 {
            connections.started(UInt(id), socket: pairs[id].server, now: 100)
            connections.headReceived(UInt(id), withToken: false)
        }
        // The page's connection (3), its head not read yet, and at once another arrival (4).
        connections.started(3, socket: pairs[3].server, now: 101)
        connections.started(4, socket: pairs[4].server, now: 101.001)
        XCTAssertEqual(pairs.map(\.isShutDown), [true, true, false, false, false, false])
        // One that has sent no head for a second trickles it: it goes first.
        connections.headReceived(4, withToken: false)
        connections.started(5, socket: pairs[5].server, now: 102.5)
        XCTAssertEqual(pairs.map(\.isShutDown), [true, true, false, true, false, false])
    }

    func test_aConnectionWithoutTheToken_isClosedItsSecondsAfterItWasAccepted_busyOrNot() throws {
        let connections = ConnectionGuard(maxWithoutToken: 10, secondsWithoutToken: 10)
        let pairs = try pairs(3)
        defer { pairs.forEach { $0.close() } }
        connections.started(0, socket: pairs[0].server, now: 100)
        connections.started(1, socket: pairs[1].server, now: 100)
        connections.started(2, socket: pairs[2].server, now: 105)
        connections.headReceived(0, withToken: true)
        connections.headReceived(1, withToken: false)
        XCTAssertEqual(connections.closeOverdue(now: 109.9), 0)
        XCTAssertEqual(connections.closeOverdue(now: 110), 1)
        XCTAssertEqual(pairs.map(\.isShutDown), [false, true, false])
        XCTAssertEqual(connections.closeOverdue(now: 110), 0)
        XCTAssertEqual(connections.closeOverdue(now: 1000), 1)
        XCTAssertEqual(pairs.map(\.isShutDown), [false, true, true])
    }

    /// The owners of connections, as the kernel would tell them: the user's own sockets, and how
    /// many times each was asked about.
    final class Owners: @unchecked Sendable {
        // @unchecked: guarded by `lock`.
        private let lock = NSLock()
        private var own: Set<Int32> = []
        private var asked: [Int32: Int] = [:]

        func markOwn(_ socket: Int32) { lock.withLock { _ = own.insert(socket) } }
        var questions: [Int32: Int] { lock.withLock { asked } }

        @Sendable func isOwnUser(_ socket: Int32) -> Bool {
            lock.withLock {
                asked[socket, default: 0] += 1
                return own.contains(socket)
            }
        }
    }

    /// Another user reopens connections as fast as they are closed: the user's own connection,
    /// accepted before 32 more of theirs, was the oldest and closed before its head was read. It
    /// is closed only once no other user's is open; each owner is asked once at most.
    func test_theUsersOwnConnection_isClosedOnlyAfterEveryOtherUsers() throws {
        let owners = Owners()
        let connections = ConnectionGuard(maxWithoutToken: 3, secondsWithoutToken: 10, isOwnUser: owners.isOwnUser)
        let pairs = try pairs(10)
        defer { pairs.forEach { $0.close() } }
        for own in [0, 7, 8] { owners.markOwn(pairs[own].server) }
        connections.started(0, socket: pairs[0].server, now: 100)
        // The storm: 1 to 6, a millisecond apart; each arrival past 3 closes the oldest of theirs.
        for id in 1...6 { connections.started(UInt(id), socket: pairs[id].server, now: 100 + Double(id) / 1000) }
        XCTAssertEqual(pairs.map(\.isShutDown), [false, true, true, true, true, false, false, false, false, false])
        // With every other connection the user's own, a new one of another user's is the one to go.
        for id in 1...6 { connections.closed(UInt(id)) }
        connections.started(7, socket: pairs[7].server, now: 101)
        connections.started(8, socket: pairs[8].server, now: 101.001)
        connections.started(9, socket: pairs[9].server, now: 101.002)
        XCTAssertEqual(pairs.map(\.isShutDown), [false, true, true, true, true, false, false, false, false, true])
        XCTAssertEqual(owners.questions.values.max(), 1, "an owner asked twice: \(owners.questions)")
    }

    /// With every connection the user's own (more than 32 of the browser's), or no owner known
    /// (the lookup failed: every connection counts as another user's), the order is as before.
    func test_amongTheUsersOwnConnections_orWithNoOwnerKnown_theOrderIsAsBefore() throws {
        for ownAll in [true, false] {
            let connections = ConnectionGuard(maxWithoutToken: 2, secondsWithoutToken: 10, isOwnUser: { _ in ownAll })
            let pairs = try pairs(4)
            defer { pairs.forEach { $0.close() } }
            for id in 0..<3 { connections.started(UInt(id), socket: pairs[id].server, now: 100 + Double(id)) }
            XCTAssertEqual(pairs.map(\.isShutDown), [true, false, false, false], "own: \(ownAll)")
            connections.headReceived(1, withToken: false)
            connections.started(3, socket: pairs[3].server, now: 103.5)
            XCTAssertEqual(pairs.map(\.isShutDown), [true, false, true, false], "own: \(ownAll)")
        }
    }

    /// The kernel's answer for real loopback connections, on IPv4 and IPv6: the test's own
    /// connection is the user's; one made by nobody (setpriv) is not, and neither is a socket
    /// whose peer is not TCP.
    func test_theOwnerOfALoopbackPeer_isTold_onIPv4AndIPv6() throws {
        guard geteuid() == 0 else { throw XCTSkip("a connection of another user needs root (setpriv --reuid)") }
        for tool in ["/usr/bin/setpriv", "/usr/bin/python3"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw XCTSkip("\(tool) not installed")
        }
        for host in ["127.0.0.1", "::1"] {
            let (listener, bound) = try ListenAddress(host.contains(":") ? "[\(host)]:0" : "\(host):0")!.listen()
            defer { close(listener) }
            let port = ListenAddress.port(of: bound)
            let own = try ConnectedTCP(host: host, port: port)
            defer { close(own.fd) }
            let mine = accept(listener, nil, nil)
            defer { close(mine) }
            XCTAssertTrue(PeerOwner.isOwnUser(mine), host)

            let nobody = Process()
            nobody.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            nobody.arguments = ["--reuid", "65534", "--regid", "65534", "--clear-groups", "/usr/bin/python3", "-c",
                                "import socket, sys; s = socket.create_connection((sys.argv[1], int(sys.argv[2]))); sys.stdin.read()",
                                host, String(port)]
            let input = Pipe()
            nobody.standardInput = input
            try nobody.run()
            let theirs = accept(listener, nil, nil)
            defer { close(theirs) }
            XCTAssertFalse(PeerOwner.isOwnUser(theirs), host)
            try input.fileHandleForWriting.close()
            nobody.waitUntilExit()
        }
        let pair = try Pair()
        defer { pair.close() }
        XCTAssertFalse(PeerOwner.isOwnUser(pair.server))
    }

    /// A TCP connection to `host`:`port` (an IPv6 address has a colon).
    struct ConnectedTCP {
        let fd: Int32

        init(host: String, port: UInt16) throws {
            var hints = addrinfo()
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV
            var found: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, String(port), &hints, &found) == 0, let first = found else { throw POSIXError(.EINVAL) }
            defer { freeaddrinfo(found) }
            fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
                close(fd)
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
        }
    }

    /// Once libmicrohttpd has said a connection closed, its descriptor may be another socket's:
    /// the guard never touches it again.
    func test_aClosedConnectionsSocket_isNeverTouched() throws {
        let connections = ConnectionGuard(maxWithoutToken: 1, secondsWithoutToken: 10)
        let pairs = try pairs(2)
        defer { pairs.forEach { $0.close() } }
        connections.started(0, socket: pairs[0].server, now: 100)
        connections.closed(0)
        connections.started(1, socket: pairs[1].server, now: 101)
        XCTAssertEqual(connections.closeOverdue(now: 1000), 1)
        XCTAssertEqual(pairs.map(\.isShutDown), [false, true])
    }

    /// The watch's thread wakes only for a deadline: with no connection without the token it
    /// waits (an idle obsctl web woke four times a second), and the first connection accepted
    /// wakes it, to be closed when due. (The waits are hang guards or lower bounds: a slow machine
    /// only waits longer, and a pass counted where none was due fails.)
    func test_theWatch_sleepsWithNoConnectionWithoutTheToken_andWakesForTheNextOne() throws {
        let connections = ConnectionGuard(maxWithoutToken: 10, secondsWithoutToken: 0.5)
        connections.watch()
        defer { connections.stop() }
        XCTAssertTrue(waitUntil(timeout: 30) { connections.watchPasses >= 1 })
        usleep(1_500_000)
        XCTAssertEqual(connections.watchPasses, 1, "passes with no connection at all")

        let pair = try Pair()
        defer { pair.close() }
        connections.started(0, socket: pair.server)
        XCTAssertTrue(waitUntil(timeout: 30) { pair.isShutDown }, "the connection was not closed when due")
        // Closed, it is no longer waited for: the thread sleeps again.
        XCTAssertTrue(waitUntil(timeout: 30) { connections.openWithoutToken == 0 })
        let passes = connections.watchPasses
        usleep(1_500_000)
        XCTAssertEqual(connections.watchPasses, passes, "passes once every connection was closed")
    }

    private func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }
}
