/// The hot operations, answered straight from the line's bytes: `get`, `set` and `incr` of plain
/// keys (Store+PlainKeys.swift), `ping` and `publish`. The scanner (RequestScanner.swift) finds the
/// fields, the checks are the operation table's, and the answer is encoded into the store's answer
/// buffer and copied to the output: no `JSONValue`, `Request`, `Reply` or `EncodedLine` is made.
/// A `set` or `incr` of a key that is a node (one that computeds read: Store+NodeKeySets.swift)
/// runs the general path's transaction with the value made from its token; an error the
/// transaction throws is answered as the general path answers it.
/// Whatever else the hot path cannot answer exactly as the general path would (a field of another
/// type, an operation it does not take, a `get` of a key that is a node, an error it can see before
/// writing) it leaves, before changing or counting anything, to the general path.
///
/// In cluster mode (`Store.sharedLog`) it takes `get`, and `set` of a plain key to a new value,
/// which it proposes to the shared log as the one key put that the general path's transaction
/// would propose (`Store.submitPlainSet`), without running that transaction; the answer comes
/// once the log decided, as every write's there.
extension Session {
    /// Answers `line` if it is a hot request; false when the general path must.
    func handleHot(_ line: UnsafeRawBufferPointer) -> Bool {
        guard store.answersHotRequests, !store.isShuttingDown, let request = RequestScanner.scan(line) else {
            return false
        }
        if store.sharedLog != nil {
            switch request.operation {
            case .get: break
            case .set: return proposeSet(request, line)
            case .incr, .ping, .publish: return false
            }
        }
        switch request.operation {
        case .ping:
            answer(.ping, request, line) { buffer, _ throws(ObsError) in
                buffer.append(#","rev":"#)
                JSONValue.appendDigits(store.rev, to: &buffer)
                return false
            }
        case .get:
            guard let key = request.key, key.kind == .string, let record = store.plainRecord(key.contents(in: line)) else { return false }
            answer(.get, request, line) { buffer, _ throws(ObsError) in
                buffer.append(#","key":"#)
                buffer.append(key.bytes(in: line))
                buffer.append(#","value":"#)
                buffer.append(record.value)
                buffer.append(#","kind":"value","rev":"#)
                JSONValue.appendDigits(record.rev, to: &buffer)
                buffer.append(#","version":"#)
                JSONValue.appendDigits(record.version, to: &buffer)
                return false
            }
        case .set:
            guard access == .write, store.writeRefusal == nil, let key = request.key, key.kind == .string, let value = request.value else {
                return false
            }
            guard let write = store.prepareSet(key.contents(in: line), value.bytes(in: line), asciiOnly: true) else {
                guard value.end - value.start <= store.configuration.maxValueBytes,
                      let node = store.writableNode(key.contents(in: line)) else { return false }
                answer(.set, request, line) { buffer, _ throws(ObsError) in
                    store.requestLineBytes = line.count
                    defer { store.requestLineBytes = nil }
                    let (changed, commit) = try store.set(node, value.json(in: line))
                    buffer.append(#","rev":"#)
                    JSONValue.appendDigits(commit.rev, to: &buffer)
                    buffer.append(changed ? #","changed":true"# : #","changed":false"#)
                    return commit.persisted
                }
                return true
            }
            answer(.set, request, line) { buffer, keepsCommits throws(ObsError) in
                let rev = try store.commit(write)
                buffer.append(#","rev":"#)
                JSONValue.appendDigits(rev, to: &buffer)
                buffer.append(write.unchanged ? #","changed":false"# : #","changed":true"#)
                return keepsCommits && !write.unchanged
            }
        case .incr:
            guard access == .write, store.writeRefusal == nil, let key = request.key, key.kind == .string,
                  request.by.map({ $0.kind == .integer }) ?? true else { return false }
            let by = request.by?.integer(in: line) ?? 1
            guard let write = store.prepareIncr(key.contents(in: line), by: by) else {
                guard let node = store.writableNode(key.contents(in: line)) else { return false }
                answer(.incr, request, line) { buffer, _ throws(ObsError) in
                    let (value, commit) = try store.incr(node, by: by)
                    buffer.append(#","value":"#)
                    value.encode(into: &buffer)
                    buffer.append(#","rev":"#)
                    JSONValue.appendDigits(commit.rev, to: &buffer)
                    return commit.persisted
                }
                return true
            }
            answer(.incr, request, line) { buffer, keepsCommits throws(ObsError) in
                let rev = try store.commit(write)
                buffer.append(#","value":"#)
                buffer.append(write.value)
                buffer.append(#","rev":"#)
                JSONValue.appendDigits(rev, to: &buffer)
                return keepsCommits && !write.unchanged
            }
        case .publish:
            guard access == .write, store.writeRefusal == nil, let channel = request.channel, channel.kind == .string,
                  KeyName.isValid(channel.contents(in: line)) else { return false }
            let payload = request.payload?.bytes(in: line)
            guard (payload?.count ?? 0) <= store.configuration.maxValueBytes else { return false }
            answer(.publish, request, line) { buffer, _ throws(ObsError) in
                let delivered = store.watches.publish(channel.contents(in: line), payload.map { .encoded($0) } ?? .value(.null))
                buffer.append(#","delivered":"#)
                JSONValue.appendDigits(UInt64(delivered), to: &buffer)
                return false
            }
        }
        return true
    }

    /// Cluster mode: a `set` of a plain key to a new value, proposed to the shared log; false
    /// (nothing done) for any other `set`, which the general path takes.
    private func proposeSet(_ request: RequestScanner.Request, _ line: UnsafeRawBufferPointer) -> Bool {
        guard access == .write, store.writeRefusal == nil, let key = request.key, key.kind == .string, let value = request.value,
              let write = store.prepareSet(key.contents(in: line), value.bytes(in: line), asciiOnly: true), !write.unchanged else { return false }
        store.requestCounters.count(.set)
        // A scanned id is a string without escapes, an integer or a literal: it encodes as sent,
        // and the token a request before may have left for its answer is not this one's.
        let idToken = request.id.map { Array($0.bytes(in: line)) }
        pendingIDToken = nil
        let name = String(decoding: key.contents(in: line), as: UTF8.self)
        let json = value.json(in: line)
        lines.answer {
            store.submitPlainSet(name, json, write) { [weak self] outcome in
                guard let self else { return }
                guard case .success(let (changed, rev)) = outcome else {
                    let id = idToken.flatMap { try? JSONValue.parse($0) } ?? .null
                    return answerLater(id: id, outcome.map { Reply(fields: [("rev", .int(Int64($0.rev))), ("changed", .bool($0.changed))]) })
                }
                // The answer the hot path writes on one host, written now.
                var answer: [UInt8] = []
                answer.reserveCapacity(64)
                answer.append(contentsOf: #"{"id":"#.utf8)
                answer.append(contentsOf: idToken ?? Array("null".utf8))
                answer.append(contentsOf: #","ok":true,"rev":"#.utf8)
                answer.append(contentsOf: String(rev).utf8)
                answer.append(contentsOf: (changed ? #","changed":true}"# : #","changed":false}"#).utf8)
                answer.append(UInt8(ascii: "\n"))
                answerLater(EncodedLine(body: answer))
            }
            return nil
        }
        return true
    }

    /// Counts the request, runs `body` (which writes the answer's fields after `"ok":true` into
    /// the buffer and returns whether the answer needs a sync; it is told whether the store's
    /// storage keeps commits), and writes the answer, or the error `body` threw.
    private func answer(_ operation: RequestScanner.Operation, _ request: RequestScanner.Request, _ line: UnsafeRawBufferPointer,
                        _ body: (inout ByteBuffer, Bool) throws(ObsError) -> Bool) {
        store.requestCounters.count(operation)
        lines.answerBytes { () -> (UnsafeRawBufferPointer, Bool) in
            store.answerBuffer.removeAll(keepingCapacityUpTo: 1 << 16)
            store.answerBuffer.append(#"{"id":"#)
            if let id = request.id { store.answerBuffer.append(id.bytes(in: line)) } else { store.answerBuffer.append("null") }
            store.answerBuffer.append(#","ok":true"#)
            do throws(ObsError) {
                let needsSync = try body(&store.answerBuffer, store.keepsCommits)
                store.answerBuffer.append("}\n")
                return (store.answerBuffer.bytes, needsSync)
            } catch {
                store.requestCounters.count(error)
                let id = request.id.flatMap { try? JSONValue.parse($0.bytes(in: line)) } ?? .null
                let line = LineEncoding.error(id: id, error)
                store.answerBuffer.removeAll()
                store.answerBuffer.append(line.body)
                return (store.answerBuffer.bytes, false)
            }
        }
    }
}
