// The `definitions` setting: a definitions file (docs/cli.md, the format of `obsctl apply`) applied
// after the state is restored and before READY, and again on every reload. It is parsed and
// applied by the client library's DefinitionsFile, the code obsctl uses, through an in-process
// session: the file means exactly what `obsctl apply FILE` would make of it.
import Foundation
import ObsClient
import ObsCore

enum Definitions {
    /// The largest definitions file read (a file of definitions, not of data: `obsctl restore`
    /// takes that).
    static let maxBytes = 64 << 20

    /// Applies the file at `path` to `store`; a failure is logged and changes nothing. In cluster
    /// mode the answer comes once etcd decided: `settle` waits for and takes etcd's answers
    /// meanwhile (bounded by etcd_timeout).
    static func apply(_ path: String, to store: Store, log: Logger, settle: (() -> Void)? = nil) {
        let data: [UInt8]
        do throws(UnsafePathError) {
            guard let contents = try SafeFile.read(path, role: "definitions file", maxBytes: maxBytes) else {
                log.error("definitions: \(path) does not exist; nothing applied")
                return
            }
            data = contents.bytes
        } catch {
            log.error("definitions: \(error); nothing applied")
            return
        }
        let file: DefinitionsFile
        do throws(DefinitionsFile.Failure) {
            file = try DefinitionsFile(parsing: String(decoding: data, as: UTF8.self))
        } catch {
            log.error("definitions: \(path):\(error.line): \(error.usage?.message ?? ""); nothing applied")
            return
        }
        let capture = Capture()
        let session = Session(store: store, access: .write, output: capture)
        defer { session.close() }
        do throws(ClientError) {
            let outcome = try file.apply { op, fields throws(ClientError) in
                var request = fields
                request["op"] = .string(op)
                capture.lines.removeAll()
                session.receive(JSONValue.object(request).encoded)
                while capture.lines.isEmpty, session.isWaiting, let settle { settle() }
                guard let line = capture.lines.last, case .object(let answer)? = try? JSONValue.parse(line) else {
                    throw .server(ObsError(.internal, "no answer to \(op)"))
                }
                guard answer["ok"]?.boolValue == true else { throw .server(ObsConnection.error(answer["error"])) }
                return Response(fields: answer, line: line)
            }
            log.info("definitions: \(path) " + (outcome.rev.map { "applied at revision \($0)" } ?? "unchanged"))
        } catch {
            if case .server(let failure) = error, let line = failure.details["line"]?.intValue {
                log.error("definitions: \(path):\(line): \(failure.code.rawValue): \(failure.message); nothing applied")
            } else {
                log.error("definitions: \(path): \(error); nothing applied")
            }
        }
    }

    /// The session's answers, kept as text.
    private final class Capture: SessionOutput {
        var lines: [String] = []
        var pendingBytes: Int { 0 }
        func write(_ line: EncodedLine) { lines.append(line.text) }
    }
}
