// The one blocking use of the client: `obsd --check`, which runs before any loop exists.
import Glibc

/// What a check learned of etcd: who answered, its status, and the keys under the prefix.
public struct EtcdCheck: Sendable, Hashable {
    /// The endpoint that answered.
    public var endpoint: String
    public var status: StatusResponse
    /// The store's revision when the keys were counted.
    public var revision: Int64
    /// The number of keys under the prefix.
    public var keys: Int64
}

extension EtcdClient {
    /// Connects, asks a member for its status and counts the keys under `prefix` (a linearizable
    /// read, so it needs a quorum), waiting for each answer. It blocks: for `obsd --check` and
    /// tools, never for the daemon's loop.
    public static func check(_ configuration: EtcdConfiguration, prefix: [UInt8]) throws(EtcdError) -> EtcdCheck {
        let client = try EtcdClient(configuration)
        defer { client.close() }
        guard case .status(let status) = try client.waitForAnswer(client.submit(.status)) else {
            throw .malformedResponse("a status answered with another kind")
        }
        let count = client.submit(.range(.prefix(prefix, countOnly: true)))
        guard case .range(let range) = try client.waitForAnswer(count) else {
            throw .malformedResponse("a range answered with another kind")
        }
        return EtcdCheck(endpoint: client.currentEndpoint, status: status, revision: range.header.revision,
                         keys: range.count)
    }

    /// Waits for the answer to `id`; the request's own timeout bounds the wait.
    private func waitForAnswer(_ id: EtcdRequestID) throws(EtcdError) -> EtcdResponse {
        while true {
            var descriptor = pollfd(fd: completionFD, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, -1)
            for case .response(id, let result) in takeCompletions() {
                return try result.get()
            }
        }
    }
}
