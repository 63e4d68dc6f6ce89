// Drives an EtcdClient as the daemon's loop does: waits on its completionFD with poll(2), takes
// the completions, and files them by request ID, so that a test can wait for the answer it wants
// with a generous deadline (never a fixed sleep).
import EtcdClient
import Foundation
import Glibc
import TestSupport
import XCTest

final class ClientDriver {
    let client: EtcdClient
    private(set) var responses: [EtcdRequestID: Result<EtcdResponse, EtcdError>] = [:]
    private(set) var updates: [EtcdRequestID: [WatchUpdate]] = [:]
    /// Every completion, in the order takeCompletions returned them.
    private(set) var all: [EtcdCompletion] = []

    init(_ configuration: EtcdConfiguration) throws {
        client = try EtcdClient(configuration)
    }

    /// The API of the clients made for a cluster: the running test class's (APITestCase).
    nonisolated(unsafe) static var defaultAPI = EtcdAPI.grpc

    convenience init(_ cluster: EtcdCluster, configure: (inout EtcdConfiguration) -> Void = { _ in }) throws {
        var configuration = EtcdConfiguration(endpoints: cluster.endpoints)
        configuration.api = ClientDriver.defaultAPI
        configuration.caFile = cluster.caFile
        configuration.certFile = cluster.clientCertFile
        configuration.keyFile = cluster.clientKeyFile
        configure(&configuration)
        try self.init(configuration)
    }

    /// Waits up to `timeout` seconds for the completion FD, then files what is queued.
    func pump(timeout: Double) {
        var descriptor = pollfd(fd: client.completionFD, events: Int16(POLLIN), revents: 0)
        _ = poll(&descriptor, 1, Int32(max(0, timeout * 1000)))
        for completion in client.takeCompletions() {
            all.append(completion)
            switch completion {
            case .response(let id, let result): responses[id] = result
            case .watch(let id, let update): updates[id, default: []].append(update)
            }
        }
    }

    /// Pumps until `condition` holds or `timeout` seconds pass (a test failure).
    @discardableResult
    func wait(_ what: String, timeout: Double = 30, until condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else {
                XCTFail("timed out waiting for \(what)")
                return false
            }
            pump(timeout: min(left, 0.2))
        }
        return true
    }

    /// The answer to `id`, waiting for it.
    func result(_ id: EtcdRequestID, timeout: Double = 30) -> Result<EtcdResponse, EtcdError>? {
        wait("the answer to \(id)", timeout: timeout) { responses[id] != nil }
        return responses[id]
    }

    /// Submits and waits for the answer.
    func perform(_ request: EtcdRequest, timeout: Double = 30) -> Result<EtcdResponse, EtcdError>? {
        result(client.submit(request), timeout: timeout)
    }

    /// Submits and returns the answer, failing the test on an error.
    func succeed(_ request: EtcdRequest, file: StaticString = #filePath, line: UInt = #line) throws -> EtcdResponse {
        switch perform(request) {
        case .success(let response)?: return response
        case .failure(let error)?: throw EtcdTestError("\(request) failed: \(error)")
        case nil: throw EtcdTestError("no answer to \(request)")
        }
    }

    func put(_ key: String, _ value: String, lease: Int64 = 0) throws -> PutResponse {
        guard case .put(let response) = try succeed(.put(PutRequest(key: bytes(key), value: bytes(value), lease: lease))) else {
            throw EtcdTestError("a put answered with another kind")
        }
        return response
    }

    func range(_ request: RangeRequest) throws -> RangeResponse {
        guard case .range(let response) = try succeed(.range(request)) else {
            throw EtcdTestError("a range answered with another kind")
        }
        return response
    }

    func txn(_ txn: Txn) throws -> TxnResponse {
        guard case .txn(let response) = try succeed(.txn(txn)) else { throw EtcdTestError("a txn answered with another kind") }
        return response
    }

    /// The watch's updates once `condition` holds of them.
    @discardableResult
    func watchUpdates(_ id: EtcdRequestID, timeout: Double = 30, until condition: ([WatchUpdate]) -> Bool) -> [WatchUpdate] {
        wait("watch \(id) updates", timeout: timeout) { condition(updates[id] ?? []) }
        return updates[id] ?? []
    }

    /// Waits for the watch's `.created`.
    func created(_ id: EtcdRequestID) -> Bool {
        watchUpdates(id) { updates in updates.contains { if case .created = $0 { true } else { false } } }
            .contains { if case .created = $0 { true } else { false } }
    }
}

struct EtcdTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func bytes(_ string: String) -> [UInt8] { Array(string.utf8) }

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

extension [WatchUpdate] {
    /// Every event of the updates, in order.
    var events: [WatchEvent] {
        flatMap { update -> [WatchEvent] in
            if case .events(_, let events) = update { return events }
            return []
        }
    }

    /// The update that ended the watch, if one did.
    var end: WatchUpdate? {
        last.flatMap { update in
            switch update {
            case .compacted, .failed: update
            default: nil
            }
        }
    }
}
