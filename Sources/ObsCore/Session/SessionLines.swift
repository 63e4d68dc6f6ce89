/// A session's way out. Lines go to its output at once, except while a request is being handled,
/// or its answer is pending (cluster mode): then they wait until that answer is written, so that
/// answers keep the order of the requests and the events a request causes (on this connection's
/// own watches) follow its answer. The watch unit writes here too.
///
/// Lines that wait are copied into one byte buffer, with where each ends, so that holding costs no
/// allocation once the buffer has grown.
final class SessionLines: WatchSink {
    let output: any SessionOutput
    // Read for every event delivered to the connection, on the store's one thread, never across
    // a call that could reach them again: no dynamic exclusivity checks.
    /// While a request is handled or its answer pending: lines wait in `held`.
    @exclusivity(unchecked) private var holding = false
    @exclusivity(unchecked) private var held = ByteBuffer()
    /// Where each held line ends in `held`, and whether it needs a sync.
    @exclusivity(unchecked) private var heldLines: [(end: Int, needsSync: Bool)] = []
    @exclusivity(unchecked) private(set) var isHandling = false
    @exclusivity(unchecked) private(set) var isWaiting = false
    /// An answer given before the handling of its request returned (a log that decided at once).
    @exclusivity(unchecked) private var early: EncodedLine?

    init(output: any SessionOutput) {
        self.output = output
    }

    func send(_ line: EncodedLine) {
        line.head.withUnsafeBytes { head in
            line.body.withUnsafeBytes { body in send(head: head, body: body, needsSync: line.needsSync) }
        }
    }

    func send(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool) {
        guard !holding else { return hold(head, body, needsSync) }
        output.write(head: head, body: body, needsSync: needsSync)
    }

    func send(head: UnsafeRawBufferPointer, body: UnsafeRawBufferPointer, needsSync: Bool, sharing: UInt64) {
        guard !holding else { return hold(head, body, needsSync) }
        output.write(head: head, body: body, needsSync: needsSync, sharing: sharing)
    }

    // Out of line: the delivery path (`send` for every event) stays small enough to inline
    // (measured: 6% fewer instructions per delivery to 100 watchers).
    @inline(never)
    private func hold(_ head: UnsafeRawBufferPointer, _ body: UnsafeRawBufferPointer, _ needsSync: Bool) {
        held.append(head)
        held.append(body)
        heldLines.append((held.count, needsSync))
    }

    /// What is queued for the client and not yet taken: the output's and what waits here.
    var unsentBytes: Int { output.pendingBytes + held.count }

    /// Runs `handle`, and writes the answer it returns before the lines sent meanwhile; when it
    /// returns none, the answer is pending and every line waits for `resolve`.
    func answer(_ handle: () -> EncodedLine?) {
        isHandling = true
        holding = true
        let answer = handle() ?? early
        isHandling = false
        early = nil
        guard let answer else {
            isWaiting = true
            return
        }
        write(answer)
    }

    /// Runs `handle`, which encodes its answer and returns its bytes and whether it needs a sync,
    /// and writes that answer before the lines sent meanwhile (the hot path: no `EncodedLine`).
    func answerBytes(_ handle: () -> (UnsafeRawBufferPointer, Bool)) {
        holding = true
        let (answer, needsSync) = handle()
        holding = false
        output.write(head: UnsafeRawBufferPointer(start: nil, count: 0), body: answer, needsSync: needsSync)
        releaseHeld()
    }

    /// The pending answer: written, then the lines that waited for it.
    func resolve(_ answer: EncodedLine) {
        if isHandling {
            early = answer
            return
        }
        isWaiting = false
        write(answer)
    }

    /// The answer, then what waited behind it.
    private func write(_ answer: EncodedLine) {
        holding = false
        output.write(answer)
        releaseHeld()
    }

    private func releaseHeld() {
        guard !heldLines.isEmpty else { return }
        let bytes = held.bytes
        var start = 0
        for line in heldLines {
            output.write(head: UnsafeRawBufferPointer(start: nil, count: 0), body: UnsafeRawBufferPointer(rebasing: bytes[start..<line.end]),
                         needsSync: line.needsSync)
            start = line.end
        }
        held.removeAll(keepingCapacityUpTo: 1 << 16)
        heldLines.removeAll(keepingCapacity: heldLines.capacity <= 1024)
    }
}
