// Reading the protocol's lines in assertions.
import Foundation
import Glibc

/// A JSON object line decoded for assertions.
public func json(_ line: String?) -> [String: Any] {
    guard let line, let data = line.data(using: .utf8),
          let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return [:] }
    return object
}

/// The error code of a response line, if it is an error.
public func errorCode(_ line: String?) -> String? {
    (json(line)["error"] as? [String: Any])?["code"] as? String
}

/// Whether something accepts connections on the Unix socket at `path`.
public func canConnect(_ path: String) -> Bool {
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    } == 0
}
