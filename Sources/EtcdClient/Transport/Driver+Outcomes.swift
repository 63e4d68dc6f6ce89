// What becomes of a finished transfer: an answer for the loop, or another attempt.
//
// Failover: an operation goes to the preferred endpoint (the last that answered), then to the
// next ones in turn, round after round, until its deadline. It moves on when the endpoint cannot
// be reached, when the member has no leader (it proposed nothing: an election is under way, or
// the quorum is lost), and, for operations that may be sent twice (reads, keepalives, watches not
// yet created), when the connection broke before the answer. After each full round it rests a
// little (50 ms, doubling up to 500 ms), so that a brief election or a member's restart costs
// latency, not an error. A write cut after it was sent (over a new connection or one reused from
// the pool), or that a member answered with a timeout of its own, is not sent again: it may have
// been applied, so it fails `unavailable`, saying so. At the deadline it fails `unavailable` with the
// last reason of each endpoint. The preferred endpoint moves on whenever it failed.
import CCurl

extension Driver {
    func finished(_ transfer: Transfer, _ code: CURLcode?) {
        let operation = transfer.operation
        switch transfer.verdict {
        case .ended?:
            return
        case .tryNext(let reason)?:
            failOver(operation, at: transfer, reason)
            return
        case .reauthenticate?:
            reauthenticate(operation)
            return
        case nil:
            break
        }
        guard let code, code == CURLE_OK else {
            transportFailed(transfer, code ?? CURLE_OK)
            return
        }
        if operation.isWatch {
            // The stream ended without a message that ends the watch.
            if operation.watchCreated {
                fail(operation, .unavailable("the watch stream from \(transfer.endpoint) ended"))
            } else {
                failOver(operation, at: transfer, "the watch stream ended before the watch was created")
            }
            return
        }
        let object: GatewayObject
        do throws(EtcdError) {
            object = try GatewayObject(parsing: transfer.body)
        } catch {
            answered(at: transfer)
            fail(operation, transfer.httpStatus == 200
                ? error : .etcd(code: 0, message: "HTTP \(transfer.httpStatus) from \(transfer.endpoint)"))
            return
        }
        if let failure = GatewayFailure(object) {
            refused(transfer, failure)
            return
        }
        answered(at: transfer)
        succeed(operation, object)
    }

    /// etcd refused the operation.
    private func refused(_ transfer: Transfer, _ failure: GatewayFailure) {
        let operation = transfer.operation
        if failure.isNoLeader {
            failOver(operation, at: transfer, failure.message)
        } else if failure.isInvalidToken, !operation.reauthenticated, !isAuthentication(operation),
                  !isNotNeeded(token) {
            reauthenticate(operation)
        } else if !operation.mayRepeat,
                  failure.code == GatewayFailure.Code.unavailable || failure.code == GatewayFailure.Code.deadlineExceeded {
            // "request timed out", "leader changed": the member proposed the write and does not
            // know what became of it.
            notPreferred(transfer.endpointIndex)
            operation.recordFailure("\(transfer.endpoint): \(failure.message) (the request may have been applied)",
                                    endpoints: configuration.endpoints.count)
            fail(operation, .unavailable(operation.failures.joined(separator: "; ")))
        } else {
            answered(at: transfer)
            fail(operation, failure.error)
        }
    }

    /// libcurl could not carry the transfer through.
    private func transportFailed(_ transfer: Transfer, _ code: CURLcode) {
        let operation = transfer.operation
        let message = transfer.errorMessage(code)
        if transfer.tooLarge {
            fail(operation, .responseTooLarge(limit: configuration.maxResponseBytes))
            return
        }
        if isTLSFailure(code, message) {
            fail(operation, .tlsFailed("\(transfer.endpoint): \(message)"))
            return
        }
        if operation.isWatch, operation.watchCreated {
            fail(operation, .unavailable("the watch stream from \(transfer.endpoint) broke: \(message)"))
            return
        }
        if !transfer.connected || operation.mayRepeat {
            failOver(operation, at: transfer, message)
            return
        }
        notPreferred(transfer.endpointIndex)
        operation.recordFailure("\(transfer.endpoint): \(message) (the request may have been applied)",
                                endpoints: configuration.endpoints.count)
        fail(operation, .unavailable(operation.failures.joined(separator: "; ")))
    }

    private func isTLSFailure(_ code: CURLcode, _ message: String) -> Bool {
        switch code {
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_PEER_FAILED_VERIFICATION,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_CLIENTCERT, CURLE_SSL_ENGINE_NOTFOUND,
             CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_CRL_BADFILE:
            return true
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR:
            // A server that wants a client certificate refuses after the handshake (TLS 1.3):
            // the first read fails with OpenSSL's alert.
            return message.contains("SSL")
        default:
            return false
        }
    }

    /// Tries the operation's next endpoint (after a rest at the end of a round), or fails it
    /// `unavailable` when its time is up.
    func failOver(_ operation: Operation, at transfer: Transfer, _ reason: String) {
        let count = configuration.endpoints.count
        operation.recordFailure("\(transfer.endpoint): \(reason)", endpoints: count)
        operation.attempts += 1
        notPreferred(transfer.endpointIndex)
        let now = Monotonic.now
        let round = operation.attempts / count
        let rest: Duration = operation.attempts % count == 0 ? .milliseconds(min(500, 50 << min(round - 1, 4))) : .zero
        guard now + rest < operation.deadline else {
            fail(operation, .unavailable(operation.failures.joined(separator: "; ")))
            return
        }
        if rest == .zero {
            attempt(operation)
        } else {
            operation.retryAt = now + rest
            resting.append(operation)
        }
    }

    private func answered(at transfer: Transfer) {
        preferred = transfer.endpointIndex
    }

    private func notPreferred(_ index: Int) {
        guard preferred == index else { return }
        preferred = (index + 1) % configuration.endpoints.count
    }

    func succeed(_ operation: Operation, _ object: GatewayObject) {
        switch operation.kind {
        case .request(let request):
            let result: Result<EtcdResponse, EtcdError>
            do throws(EtcdError) {
                result = .success(try request.decodeResponse(object))
            } catch {
                result = .failure(error)
            }
            deliver(.response(operation.id, result))
        case .authenticate:
            do throws(EtcdError) {
                authenticated(.success(try object.string("token") ?? ""))
            } catch {
                authenticated(.failure(error))
            }
        case .watch:
            break
        }
    }

    func fail(_ operation: Operation, _ error: EtcdError) {
        switch operation.kind {
        case .request: deliver(.response(operation.id, .failure(error)))
        case .watch: deliver(.watch(operation.id, .failed(error)))
        case .authenticate: authenticated(.failure(error))
        }
    }

    // MARK: - Authentication

    /// Fetches a token with the configured user and password; operations wait for it.
    func authenticate() {
        guard let user = configuration.user, let password = configuration.password else { return }
        token = .fetching
        let operation = Operation(id: EtcdRequestID(0), kind: .authenticate,
                                  call: authenticateCall(user: user, password: password),
                                  deadline: .now + configuration.requestTimeout)
        operation.firstEndpoint = preferred
        attempt(operation)
    }

    private func authenticated(_ result: Result<String, EtcdError>) {
        let waiting = waitingForToken
        waitingForToken.removeAll()
        switch result {
        case .success(let value):
            token = .have(value)
            for operation in waiting {
                if operation.deadline < Monotonic.now {
                    fail(operation, .unavailable("no token from etcd within the timeout"))
                } else {
                    start(operation)
                }
            }
        case .failure(let error):
            token = .missing
            for operation in waiting { fail(operation, error) }
        }
    }

    private func reauthenticate(_ operation: Operation) {
        operation.reauthenticated = true
        if case .have = token { token = .missing }
        start(operation)
    }

    private func isNotNeeded(_ state: TokenState) -> Bool {
        if case .notNeeded = state { return true }
        return false
    }

    // MARK: - Watch messages (called from libcurl's write callback)

    func watchMessage(_ bytes: [UInt8], from transfer: Transfer) {
        let operation = transfer.operation
        do throws(EtcdError) {
            let object = try GatewayObject(parsing: bytes)
            if let failure = GatewayFailure(object) {
                watchRefused(transfer, failure)
                return
            }
            guard let result = try object.object("result") else {
                throw .malformedResponse("a watch message without result: \(object.fields.keys.sorted())")
            }
            let header = try ResponseHeader(result.object("header"))
            if try result.bool("canceled") {
                let compactRevision = try result.int64("compact_revision")
                if compactRevision > 0 {
                    endWatch(transfer, .compacted(compactRevision: compactRevision))
                } else {
                    let reason = try result.string("cancel_reason") ?? "etcd canceled the watch"
                    watchRefused(transfer, GatewayFailure(cancelReason: reason))
                }
                return
            }
            if try result.bool("created") {
                operation.watchCreated = true
                answered(at: transfer)
                deliver(.watch(operation.id, .created(revision: header.revision)))
                return
            }
            var events: [WatchEvent] = []
            for event in try result.objects("events") { events.append(try WatchEvent(event)) }
            deliver(.watch(operation.id, events.isEmpty
                ? .progress(revision: header.revision) : .events(revision: header.revision, events)))
        } catch {
            endWatch(transfer, .failed(error))
        }
    }

    private func watchRefused(_ transfer: Transfer, _ failure: GatewayFailure) {
        let operation = transfer.operation
        if !operation.watchCreated, failure.isNoLeader {
            decide(transfer, .tryNext(failure.message))
        } else if !operation.watchCreated, failure.isInvalidToken, !operation.reauthenticated, !isNotNeeded(token) {
            decide(transfer, .reauthenticate)
        } else {
            endWatch(transfer, .failed(failure.error))
        }
    }

    /// Reports the watch's last update; the transfer is removed once libcurl returns.
    func endWatch(_ transfer: Transfer, _ update: WatchUpdate) {
        deliver(.watch(transfer.operation.id, update))
        decide(transfer, .ended)
    }

    private func decide(_ transfer: Transfer, _ verdict: Transfer.Verdict) {
        transfer.verdict = verdict
        decided.append(transfer)
    }
}
