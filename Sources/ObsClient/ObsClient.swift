import Foundation
import Dispatch
import ObsCore
import Synchronization

/// The async face of the client library, for Swift programs: requests are awaited, watches are
/// AsyncSequences. Requests share one connection (opened on first use, reopened after it drops)
/// and run in order on a private queue; each watch has its own connection.
///
/// ```swift
/// let obs = ObsClient()                        // the default socket, as obsctl finds it
/// try await obs.set("volume", 0.4)
/// for try await event in obs.watch(["volume"]) { print(event.value ?? .null) }
/// ```
public final class ObsClient: Sendable {
    public let path: String
    private let queue = DispatchQueue(label: "obsd.client")
    private let connection = Mutex<ObsConnection?>(nil)

    public init(socketPath: String? = nil, environment: [String: String] = currentEnvironment()) {
        path = defaultSocketPath(explicit: socketPath, environment: environment)
    }

    /// Sends `op` with `fields` and returns the daemon's answer; an error answer throws `.server`.
    /// `timeout` counts from this call: a request that waits its turn behind others (they run one
    /// at a time) spends its own time waiting, and is not sent once it is up.
    public func request(_ op: String, _ fields: [String: JSONValue] = [:], timeout: Double? = nil) async throws(ClientError) -> Response {
        let deadline = timeout.map { monotonicNow() + $0 }
        let result: Result<Response, ClientError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: self.requestNow(op, fields, deadline: deadline))
            }
        }
        switch result {
        case .success(let response): return response
        case .failure(let error): throw error
        }
    }

    private func requestNow(_ op: String, _ fields: [String: JSONValue], deadline: Double?) -> Result<Response, ClientError> {
        // Only the queue's thread gets here, so the connection is used by one thread at a time.
        if let deadline, monotonicNow() >= deadline { return .failure(.timedOut) }
        return connection.withLock { current in
            // A connection kept from an earlier request may have been closed by the daemon since
            // (it restarted). A request that found it closed before a byte went out reached no
            // one: it goes again, once, on a new one.
            var mayRetry = current != nil
            while true {
                var open: ObsConnection?
                do throws(ClientError) {
                    let connection: ObsConnection
                    if let current { connection = current } else { connection = try ObsConnection(path: path, deadline: deadline) }
                    open = connection
                    current = connection
                    return .success(try connection.request(op, fields, deadline: deadline))
                } catch {
                    // Only an error answer leaves the connection in step. After a timeout the
                    // answer may still come (and would be taken for the next request's), or the
                    // request went out in part: a connection in doubt is closed, and the next
                    // request opens another. So is one answered `too_large`: a line over the
                    // daemon's limit is answered so, and the daemon closes it then, maybe only
                    // after the next request went out (taken by the socket, never read).
                    if case .server(let failure) = error, failure.code != .tooLarge {} else { current = nil }
                    if mayRetry, case .connectionLost = error, open?.lastSendReachedNoOne == true {
                        mayRetry = false
                        continue
                    }
                    return .failure(error)
                }
            }
        }
    }

    /// The value of `key`.
    public func get(_ key: String) async throws(ClientError) -> JSONValue {
        try await request("get", ["key": .string(key)])["value"] ?? .null
    }

    /// Sets `key` to `value`; returns the revision.
    @discardableResult
    public func set(_ key: String, _ value: JSONValue) async throws(ClientError) -> UInt64 {
        UInt64(try await request("set", ["key": .string(key), "value": value])["rev"]?.intValue ?? 0)
    }

    /// Events of a watch on `keys`, as an AsyncSequence that ends with an error if the connection
    /// is lost (unless `options.reconnect`). Stopping the iteration ends the watch.
    public func watch(_ keys: [String], options: WatchOptions? = nil) -> AsyncThrowingStream<WatchEvent, any Error> {
        var chosen = options ?? WatchOptions(keys: keys)
        chosen.keys = keys
        let options = chosen
        let path = self.path
        return AsyncThrowingStream { continuation in
            // Raised when the iteration stops: it ends the stream's waits for the daemon at once,
            // also those of a stream still connecting (not made yet, so not in `stream`).
            let cancellation = Cancellation()
            let stream = Mutex<WatchStream?>(nil)
            continuation.onTermination = { _ in
                cancellation.cancel()
                stream.withLock { $0?.cancel() }
            }
            // A thread of its own: the stream blocks in poll, which must not hold a Swift
            // concurrency thread.
            let thread = Thread {
                do throws(ClientError) {
                    let watch = try WatchStream(path: path, options: options, cancellation: cancellation)
                    stream.withLock { $0 = watch }
                    if cancellation.isCancelled { watch.cancel() }
                    while let event = try watch.next() { continuation.yield(event) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: cancellation.isCancelled ? nil : error)
                }
            }
            thread.start()
        }
    }
}

/// The process environment, as a dictionary.
public func currentEnvironment() -> [String: String] { ProcessInfo.processInfo.environment }
