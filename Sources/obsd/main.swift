// obsd: parses its command line and runs the daemon (ObsDaemon) over the store.
import Glibc
import ObsCore
import ObsDaemon

/// Until the store (issue 4) is merged, obsd serves every request with an `internal` error: the
/// socket, security, limits, signals and systemd integration all work, the operations do not.
final class UnavailableService: DaemonService {
    final class Session: ServiceSession {
        let output: any ConnectionOutput
        init(output: any ConnectionOutput) { self.output = output }
        func receive(line: UnsafeRawBufferPointer) {
            output.write(Array(#"{"id":null,"ok":false,"error":{"code":"internal","message":"this obsd was built without the store"}}"#.utf8) + [0x0A])
        }
        func close() {}
    }

    func open(access: PeerAccess, output: any ConnectionOutput) -> any ServiceSession { Session(output: output) }
    func tick() {}
    var nextDeadline: Double? { nil }
    func drained(_ session: any ServiceSession) {}
    func apply(_ limits: Limits) {}
}

exit(Obsd.main(Array(CommandLine.arguments.dropFirst()), environment: .current) { storage, _, _ throws(DaemonError) in
    do throws(ObsError) {
        _ = try storage.load()
    } catch {
        throw DaemonError(error.message)
    }
    return UnavailableService()
})
