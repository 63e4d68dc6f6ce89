import Glibc

/// Where `obsctl web` listens: `HOST:PORT` (`[::1]:PORT` for an IPv6 address; port 0 lets the
/// system choose), resolved once and bound by `listen()`.
public struct ListenAddress: Sendable, CustomStringConvertible {
    /// `--listen`'s default: loopback, so that only this machine can reach the page.
    public static let defaultText = "127.0.0.1:8047"

    public let host: String
    public let port: UInt16

    /// Parses `HOST:PORT`; nil when it is not one.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            return nil
        }
        guard !host.isEmpty else { return nil }
        self.host = host
        self.port = port
    }

    public var description: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }

    /// A listening TCP socket (close-on-exec, SO_REUSEADDR so a restart can take the port back at once).
    func listen() throws(WebError) -> (fd: Int32, address: sockaddr_storage) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &found)
        guard status == 0, let first = found else {
            throw WebError("cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(found) }
        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw WebError("cannot listen on \(self): \(String(cString: strerror(errno)))") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0, Glibc.listen(fd, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw WebError("cannot listen on \(self): \(reason)")
        }
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
        }
        return (fd, bound)
    }

    /// The port of a bound address.
    static func port(of address: sockaddr_storage) -> UInt16 {
        var copy = address
        return withUnsafePointer(to: &copy) { pointer in
            if address.ss_family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
    }

    /// Whether a bound address is loopback (127.0.0.0/8 or ::1): only this machine can connect.
    static func isLoopback(_ address: sockaddr_storage) -> Bool {
        var copy = address
        return withUnsafePointer(to: &copy) { pointer in
            if address.ss_family == sa_family_t(AF_INET6) {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    let bytes = withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) }
                    let mappedV4 = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
                    return bytes == Array(repeating: 0, count: 15) + [1] || mappedV4 && bytes[12] == 127
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt32(bigEndian: $0.pointee.sin_addr.s_addr) >> 24 == 127
            }
        }
    }
}

/// Why `obsctl web` cannot serve (it cannot listen where it was told to).
public struct WebError: Error, Sendable, CustomStringConvertible {
    public let message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}
