/// A session's way out. Lines go to its output at once, except while a request is being handled:
/// then they wait until that request's answer is written, so that the events a request causes
/// (on this connection's own watches) follow its answer. The watch unit writes here too.
final class SessionLines: WatchSink {
    let output: any SessionOutput
    private var handling = false
    private var held: [EncodedLine] = []

    init(output: any SessionOutput) {
        self.output = output
    }

    func send(_ line: EncodedLine) {
        if handling {
            held.append(line)
        } else {
            output.write(line)
        }
    }

    var unsentBytes: Int { output.pendingBytes }

    /// Runs `handle`, and writes the answer it returns before the lines sent meanwhile.
    func answer(_ handle: () -> EncodedLine) {
        handling = true
        let answer = handle()
        handling = false
        output.write(answer)
        guard !held.isEmpty else { return }
        let lines = held
        held.removeAll(keepingCapacity: true)
        for line in lines { output.write(line) }
    }
}
