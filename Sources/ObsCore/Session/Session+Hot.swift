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
extension Session {
    /// Answers `line` if it is a hot request; false when the general path must.
    func handleHot(_ line: UnsafeRawBufferPointer) -> Bool {
        guard store.answersHotRequests, store.sharedLog == nil, !store.isShuttingDown, let request = RequestScanner.scan(line) else {
            return false
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
            guard let write = store.prepareSet(key.contents(in: line), value.bytes(in: line)) else {
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
