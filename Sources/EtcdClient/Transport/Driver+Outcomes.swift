// What becomes of a finished transfer: an answer for the loop, or another attempt.
//
// Failover: an operation goes to the preferred endpoint (the last that answered), then to the
// next ones in turn, round after round, until its deadline. It moves on when the endpoint cannot
// be reached, when the member has no leader (it proposed nothing: an election is under way, or
// the quorum is lost), and, for operations that may be sent twice (reads, keepalives, watches not
// yet created), when the connection broke before the answer. After each full round it rests a
// little (50 ms, doubling up to 500 ms), so that a brief election or a member's restart costs
// latency, not an error. A write cut after bytes of it were sent (over a new connection or one
// reused from the pool), or that a member answered with a timeout of its own, is not sent again:
// it may have been applied, so it fails `unavailable`, saying so (`mayHaveBeenApplied`). One that
// never left (a connection refused, or cut before the request was handed to it) was not, and
// fails over; so does one whose TLS handshake broke on the connection, while one etcd's TLS
// refused fails `tlsFailed` at once (TransportFailure.swift tells them apart). At the deadline it
// fails `unavailable` with the last reason of each endpoint. The preferred endpoint moves on
// whenever it failed.
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
        if case .probe(let probe) = operation.kind {
            probeFinished(transfer, probe, code)
            return
        }
        if transfer.answeredInHTTP1 {
            // Not a gRPC answer: nothing was done (etcd serves its gRPC methods in HTTP/2 only).
            idleHTTP2[transfer.endpointIndex] = 0
            operation.http1Answers += 1
            http1Answers += 1
            if operation.http1Answers <= 2 {
                attempt(operation)
            } else {
                failOver(operation, at: transfer, "answered in HTTP/1.1, not gRPC")
            }
            return
        }
        guard let code, code == CURLE_OK else {
            if transfer.version != .http1 { idleHTTP2[transfer.endpointIndex] = 0 }
            transportFailed(transfer, code ?? CURLE_OK)
            return
        }
        if transfer.version == .http2Pooled || transfer.version == .http2PriorKnowledge {
            // The connection went back to libcurl's pool (which keeps at most as many).
            idleHTTP2[transfer.endpointIndex] = min(MultiSocket.maxIdleConnections, idleHTTP2[transfer.endpointIndex] + 1)
        }
        if operation.call.isGRPC {
            finishedGRPC(transfer)
            return
        }
        if operation.isWatch {
            watchStreamEnded(transfer)
            return
        }
        let object: GatewayObject
        do throws(EtcdError) {
            object = try GatewayObject(parsing: transfer.body)
        } catch {
            answered(at: transfer)
            fail(operation, transfer.httpStatus == 200 ? error : httpRefusal(transfer))
            return
        }
        if let failure = GatewayFailure(object) {
            refused(transfer, failure)
            return
        }
        answered(at: transfer)
        succeed(operation, object)
    }

    /// A gRPC call that libcurl carried through: its answer, etcd's refusal, or a member that
    /// answered in HTTP/1.1 (see EasyHandle.Version.http2Pooled).
    private func finishedGRPC(_ transfer: Transfer) {
        let operation = transfer.operation
        if transfer.answeredHTTPVersion == 1 {
            // An HTTP/1.1 server on the way (TLS without HTTP/2): not etcd's gRPC.
            answered(at: transfer)
            fail(operation, .etcd(code: 0, message: "HTTP \(transfer.httpStatus) in HTTP/1.1 from \(transfer.endpoint), "
                                  + "which does not serve etcd's gRPC API (etcd_api = json uses its JSON gateway)"))
            return
        }
        if let status = transfer.grpcStatus.code, status != 0 {
            let failure = GatewayFailure(code: status, message: transfer.grpcStatus.message)
            if operation.isWatch {
                watchEnded(transfer, failure)
            } else {
                refused(transfer, failure)
            }
            return
        }
        if operation.isWatch {
            watchStreamEnded(transfer)
            return
        }
        guard transfer.grpcStatus.code != nil else {
            // No outcome: the stream was cut (the member went away mid-answer), or this is no gRPC server.
            if transfer.httpStatus != 200 {
                answered(at: transfer)
                fail(operation, httpRefusal(transfer))
            } else if operation.mayRepeat {
                if operation.changesState { operation.mayHaveBeenApplied = true }
                failOver(operation, at: transfer, "the answer ended without a gRPC status")
            } else {
                failMayHaveBeenApplied(operation, transfer.endpointIndex, transfer.endpoint, "the answer ended without a gRPC status")
            }
            return
        }
        let body = transfer.body
        guard body.count >= GRPCFrame.headerBytes, body[0] == 0 else {
            answered(at: transfer)
            fail(operation, .malformedResponse("a gRPC answer of \(body.count) bytes that is not one uncompressed message"))
            return
        }
        let length = Int(body[1]) << 24 | Int(body[2]) << 16 | Int(body[3]) << 8 | Int(body[4])
        guard length == body.count - GRPCFrame.headerBytes else {
            answered(at: transfer)
            fail(operation, .malformedResponse("a gRPC answer of \(body.count) bytes framing \(length)"))
            return
        }
        answered(at: transfer)
        let message = body[GRPCFrame.headerBytes...]
        answer(operation, response: { (request: EtcdRequest) throws(EtcdError) in try request.decodeGRPC(message) },
               token: { () throws(EtcdError) in try grpcAuthenticationToken(message) })
    }

    /// A watch's stream ended without a message or status that ends the watch (or with a message
    /// cut short): reported once the watch was created, tried elsewhere before.
    private func watchStreamEnded(_ transfer: Transfer) {
        if transfer.operation.watchCreated {
            fail(transfer.operation, .unavailable("the watch stream from \(transfer.endpoint) ended", mayHaveBeenApplied: false))
        } else {
            failOver(transfer.operation, at: transfer, "the watch stream ended before the watch was created")
        }
    }

    /// A gRPC watch's stream ended with etcd's refusal.
    private func watchEnded(_ transfer: Transfer, _ failure: GatewayFailure) {
        let operation = transfer.operation
        if !operation.watchCreated, failure.isNoLeader {
            failOver(operation, at: transfer, failure.message)
        } else if !operation.watchCreated, failure.isInvalidToken, !operation.reauthenticated, !isNotNeeded(token) {
            reauthenticate(operation)
        } else {
            fail(operation, failure.error)
        }
    }

    /// etcd refused the operation.
    private func refused(_ transfer: Transfer, _ failure: GatewayFailure) {
        let operation = transfer.operation
        if failure.isNoLeader {
            failOver(operation, at: transfer, failure.message)
        } else if failure.isInvalidToken, !operation.reauthenticated, !isAuthentication(operation),
                  !isNotNeeded(token) {
            reauthenticate(operation)
        } else if !operation.mayRepeat, failure.isUnavailable {
            // "request timed out", "leader changed": the member proposed the write and does not
            // know what became of it.
            failMayHaveBeenApplied(operation, transfer.endpointIndex, transfer.endpoint, failure.message)
        } else {
            answered(at: transfer)
            fail(operation, failure.error(mayHaveBeenApplied: operation.changesState && failure.isUnavailable))
        }
    }

    /// An HTTP error status without etcd's JSON refusal, with the text the server sent with it:
    /// etcd's JSON gateway explains some refusals in plain text only ("CommonName of client
    /// sending a request against gateway will be ignored and not used as expected", for a client
    /// certificate with a CN while etcd's authentication is on), which is the operator's only clue.
    func httpRefusal(_ transfer: Transfer) -> EtcdError {
        let message = "HTTP \(transfer.httpStatus) from \(transfer.endpoint)"
        guard let text = Self.firstLine(of: transfer.body) else { return .etcd(code: 0, message: message) }
        return .etcd(code: 0, message: "\(message): \(text)")
    }

    /// The first line of a body that is short printable text (at most 300 characters shown), nil
    /// for an empty or binary one.
    static func firstLine(of body: [UInt8]) -> String? {
        guard let text = String(validating: body.prefix(4096), as: UTF8.self) else { return nil }
        let first = text.split(whereSeparator: \.isNewline).first ?? ""
        let line = String(first.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
        guard !line.isEmpty, line.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else { return nil }
        return line.count > 300 ? String(line.prefix(300)) + "..." : line
    }

    /// libcurl could not carry the transfer through: etcd's TLS refused the connection, or the
    /// request never left (another member is tried), or it may have reached the member.
    private func transportFailed(_ transfer: Transfer, _ code: CURLcode) {
        let operation = transfer.operation
        if transfer.tooLarge {
            fail(operation, .responseTooLarge(limit: configuration.maxResponseBytes))
            return
        }
        let failure = transfer.failure(code)
        if failure.kind == .tlsRefused {
            fail(operation, .tlsFailed("\(transfer.endpoint): \(failure.message)"))
            return
        }
        if operation.isWatch, operation.watchCreated {
            fail(operation, .unavailable("the watch stream from \(transfer.endpoint) broke: \(failure.message)",
                                         mayHaveBeenApplied: false))
            return
        }
        if failure.kind == .notSent || operation.mayRepeat {
            if failure.kind != .notSent, operation.changesState { operation.mayHaveBeenApplied = true }
            failOver(operation, at: transfer, failure.hint.map { "\(failure.message) (\($0))" } ?? failure.message)
            return
        }
        if failure.kind == .cutAfterHandshake {
            probeHandshake(of: operation, at: transfer, failure.message)
            return
        }
        failMayHaveBeenApplied(operation, transfer.endpointIndex, transfer.endpoint, failure.message)
    }

    /// A write that may have reached the member and whose answer is lost: not sent again (it
    /// could be applied twice), it fails saying so.
    private func failMayHaveBeenApplied(_ operation: Operation, _ endpointIndex: Int, _ endpoint: String, _ reason: String) {
        notPreferred(endpointIndex)
        operation.recordFailure("\(endpoint): \(reason) \(EtcdError.mayHaveBeenAppliedNote)", endpoints: configuration.endpoints.count)
        fail(operation, .unavailable(operation.failures.joined(separator: "; "), mayHaveBeenApplied: true))
    }

    // MARK: - A write cut right after its TLS handshake

    /// A write whose new connection ended right after its TLS handshake, before any answer
    /// (TransportFailure.Kind.cutAfterHandshake): a member refusing the client certificate ends
    /// it so when its reset outruns its alert, and one that dies at that moment too, perhaps
    /// having read the write. A `status` over a new connection to the same member tells which:
    /// refused with an alert, the member refuses the certificate (the CAs a member trusts do not
    /// change while it runs), so it refused the write's handshake as well, and nothing was
    /// written; answered (or over a pooled connection, which the member took with this
    /// certificate), or not connected at all (the member is gone), the write may have been
    /// applied. A probe cut in the same race as the write's tells nothing, and is sent again
    /// after 10 ms until the write's deadline (each has a fair chance to read the alert: about
    /// one in three on a loaded machine).
    private func probeHandshake(of write: Operation, at transfer: Transfer, _ reason: String) {
        let probe = HandshakeProbe(write: write, endpointIndex: transfer.endpointIndex, endpoint: transfer.endpoint, failure: reason)
        let operation = Operation(id: EtcdRequestID(0), kind: .probe(probe), call: EtcdRequest.status.call(configuration.api),
                                  deadline: write.deadline)
        operation.firstEndpoint = probe.endpointIndex
        attempt(operation)
    }

    private func probeFinished(_ transfer: Transfer, _ probe: HandshakeProbe, _ code: CURLcode?) {
        guard let code, code != CURLE_OK, !transfer.answeredInHTTP1 else {
            // An answer, whatever it says: the member took the handshake.
            probed(probe, refusal: nil)
            return
        }
        let failure = transfer.failure(code)
        switch failure.kind {
        case .tlsRefused:
            probed(probe, refusal: failure.message)
        case .notSent where code == CURLE_COULDNT_CONNECT || code == CURLE_OPERATION_TIMEDOUT:
            probed(probe, refusal: nil)
        case .notSent, .cutAfterHandshake:
            let retryAt = Monotonic.now + .milliseconds(10)
            if retryAt < transfer.operation.deadline {
                transfer.operation.retryAt = retryAt
                resting.append(transfer.operation)
            } else {
                probed(probe, refusal: nil)
            }
        case .maybeSent:
            probed(probe, refusal: nil)
        }
    }

    /// The write's outcome once the probe told: `refusal`, libcurl's message for the probe the
    /// member refused; nil when the member took the handshake or nothing could tell.
    private func probed(_ probe: HandshakeProbe, refusal: String?) {
        if let refusal {
            fail(probe.write, .tlsFailed("\(probe.endpoint): \(probe.failure); a new connection to it was refused: \(refusal)"))
        } else {
            failMayHaveBeenApplied(probe.write, probe.endpointIndex, probe.endpoint, probe.failure)
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
            fail(operation, .unavailable(operation.failures.joined(separator: "; "), mayHaveBeenApplied: operation.mayHaveBeenApplied))
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
        answer(operation, response: { (request: EtcdRequest) throws(EtcdError) in try request.decodeResponse(object) },
               token: { () throws(EtcdError) in try object.string("token") ?? "" })
    }

    /// Hands over an operation's answer, read by `response` (a request's) or `token` (an
    /// authentication's): a reading that fails is the operation's error.
    private func answer(_ operation: Operation, response: (EtcdRequest) throws(EtcdError) -> EtcdResponse,
                        token: () throws(EtcdError) -> String) {
        switch operation.kind {
        case .request(let request):
            let result: Result<EtcdResponse, EtcdError>
            do throws(EtcdError) {
                result = .success(try response(request))
            } catch {
                result = .failure(error)
            }
            deliver(.response(operation.id, result))
        case .authenticate:
            do throws(EtcdError) {
                authenticated(.success(try token()))
            } catch {
                authenticated(.failure(error))
            }
        case .watch, .probe:
            break
        }
    }

    func fail(_ operation: Operation, _ error: EtcdError) {
        switch operation.kind {
        case .request: deliver(.response(operation.id, .failure(error)))
        case .watch: deliver(.watch(operation.id, .failed(error)))
        case .authenticate: authenticated(.failure(error))
        case .probe(let probe):
            // Closed, or never sent (its turn did not come in time): nothing told.
            if case .closed = error { fail(probe.write, .closed) } else { probed(probe, refusal: nil) }
        }
    }

    // MARK: - Authentication

    /// Fetches a token with the configured user and password; operations wait for it.
    func authenticate() {
        guard let user = configuration.user, let password = configuration.password else { return }
        token = .fetching
        let operation = Operation(id: EtcdRequestID(0), kind: .authenticate,
                                  call: configuration.api == .grpc ? grpcAuthenticateCall(user: user, password: password)
                                      : authenticateCall(user: user, password: password),
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
                    fail(operation, .unavailable("no token from etcd within the timeout", mayHaveBeenApplied: false))
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
        do throws(EtcdError) {
            let object = try GatewayObject(parsing: bytes)
            if let failure = GatewayFailure(object) {
                watchRefused(transfer, failure)
                return
            }
            guard let result = try object.object("result") else {
                throw .malformedResponse("a watch message without result: \(object.fields.keys.sorted())")
            }
            watchResponse(try WatchMessage(result), from: transfer)
        } catch {
            endWatch(transfer, .failed(error))
        }
    }

    func grpcWatchMessage(_ bytes: ArraySlice<UInt8>, from transfer: Transfer) {
        do throws(EtcdError) {
            watchResponse(try WatchMessage(protobuf: bytes), from: transfer)
        } catch {
            endWatch(transfer, .failed(error))
        }
    }

    private func watchResponse(_ message: WatchMessage, from transfer: Transfer) {
        let operation = transfer.operation
        if message.canceled {
            if message.compactRevision > 0 {
                endWatch(transfer, .compacted(compactRevision: message.compactRevision))
            } else {
                let reason = message.cancelReason.isEmpty ? "etcd canceled the watch" : message.cancelReason
                watchRefused(transfer, GatewayFailure(cancelReason: reason))
            }
            return
        }
        if message.created {
            operation.watchCreated = true
            answered(at: transfer)
            deliver(.watch(operation.id, .created(revision: message.header.revision, clusterID: message.header.clusterID)))
            return
        }
        guard message.fragment || !transfer.heldEvents.isEmpty else {
            if message.events.isEmpty {
                deliver(.watch(operation.id, .progress(revision: message.header.revision)))
            } else {
                deliverWatchEvents(transfer, revision: message.header.revision, message.events)
            }
            return
        }
        // A fragment: the revisions it completes go now, and the last one it holds waits for the
        // next fragment, which may hold more of it (WatchRequest.fragment).
        let (events, held) = joinFragment(held: transfer.heldEvents, message.events, more: message.fragment)
        transfer.heldEvents = held
        // One revision held for as long as fragments of it come: bounded as a message is.
        guard held.reduce(0, { $0 + $1.kv.key.count + $1.kv.value.count + ($1.prevKV?.value.count ?? 0) })
                <= configuration.maxResponseBytes else {
            endWatch(transfer, .failed(.responseTooLarge(limit: configuration.maxResponseBytes)))
            return
        }
        if !events.isEmpty { deliverWatchEvents(transfer, revision: message.header.revision, events) }
    }

    /// A message's events. A gRPC watch's go over as many rounds as their bytes take, cut at
    /// revision boundaries into slices of about `maxBytesPerTake` (the first now, the rest as
    /// rounds have room, before any later message: Transfer.drainBacklog): a watch that fell
    /// behind gets up to 1,000 revisions in one message, up to `maxResponseBytes` without
    /// fragments, which the loop would otherwise apply in one turn. (A gateway watch's message
    /// is handed over whole: its stream pauses between rounds.)
    private func deliverWatchEvents(_ transfer: Transfer, revision: Int64, _ events: [WatchEvent]) {
        guard transfer.operation.call.isGRPC else {
            deliver(.watch(transfer.operation.id, .events(revision: revision, events)))
            return
        }
        var start = 0, bytes = 0
        for index in events.indices {
            if index > start, events[index].revision != events[index - 1].revision, bytes >= configuration.maxBytesPerTake {
                transfer.eventSlices.append((revision, events[start..<index]))
                start = index
                bytes = 0
            }
            bytes += 64 + events[index].kv.estimatedBytes + (events[index].prevKV?.estimatedBytes ?? 0)
        }
        transfer.eventSlices.append((revision, events[start...]))
        handOverEventSlices(transfer)
    }

    /// Hands over a watch's slices of events while the round has room; whether some are left,
    /// for the next round.
    @discardableResult
    func handOverEventSlices(_ transfer: Transfer) -> Bool {
        while !transfer.eventSlices.isEmpty, roomForWatchMessages() {
            let slice = transfer.eventSlices.removeFirst()
            deliver(.watch(transfer.operation.id, .events(revision: slice.revision, Array(slice.events))))
        }
        guard !transfer.eventSlices.isEmpty else { return false }
        watchesBacklogged = true
        return true
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
