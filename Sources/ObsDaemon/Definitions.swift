// The `definitions` setting: a definitions file (docs/cli.md, the format of `obsctl apply`) applied
// after the state is restored and before READY, and again on every reload. It is parsed and
// applied by the client library's DefinitionsFile, the code obsctl uses, through an in-process
// session: the file means exactly what `obsctl apply FILE` would make of it.
import Foundation
import ObsClient
import ObsCore

enum Definitions {
    /// The largest definitions file read: the bound obsctl apply reads files by too.
    static let maxBytes = DefinitionsFile.maxBytes

    /// A file's batch that waits for etcd's decision after a reload: the loop goes on serving,
    /// and the outcome is logged when the answer comes (`finished` then).
    final class Waiting {
        fileprivate let session: Session
        fileprivate(set) var finished = false

        fileprivate init(session: Session) {
            self.session = session
        }

        /// Ends the session once the answer came (not from inside its own output).
        func close() { session.close() }
    }

    /// Applies the file at `path` to `store`; a failure is logged and changes nothing. In cluster
    /// mode the answer comes once etcd decided: with `settle` (at start, before the loop runs),
    /// it waits for etcd's answers meanwhile (bounded by etcd_timeout); without it (at a reload,
    /// when the loop serves clients that must not wait for etcd), it returns what waits, and the
    /// loop delivers the answer like any other. The caller keeps what it returns until `finished`.
    @discardableResult
    static func apply(_ path: String, to store: Store, log: Logger, settle: (() -> Void)? = nil) -> Waiting? {
        let data: [UInt8]
        do throws(UnsafePathError) {
            guard let contents = try SafeFile.read(path, role: "definitions file", maxBytes: maxBytes) else {
                log.error("definitions: \(path) does not exist; nothing applied")
                return nil
            }
            data = contents.bytes
        } catch {
            log.error("definitions: \(error); nothing applied")
            return nil
        }
        let file: DefinitionsFile
        do throws(DefinitionsFile.Failure) {
            file = try DefinitionsFile(parsing: String(decoding: data, as: UTF8.self))
        } catch {
            log.error("definitions: \(path):\(error.line): \(error.usage?.message ?? ""); nothing applied")
            return nil
        }
        let capture = Capture()
        let session = Session(store: store, access: .write, output: capture)
        // The state is read from this host's store: answered at once.
        guard let state = request(session, capture, ["op": .string("dump")]) else {
            log.error("definitions: \(path): the state could not be read; nothing applied")
            session.close()
            return nil
        }
        if case .failure(let error) = state {
            log.error("definitions: \(path): \(error); nothing applied")
            session.close()
            return nil
        }
        guard case .success(let current) = state, let batch = file.batch(for: current) else {
            log.info("definitions: \(path) unchanged")
            session.close()
            return nil
        }
        let report = { (answer: Result<Response, ClientError>) in
            do throws(ClientError) {
                let outcome = try file.outcome(of: batch, answer)
                log.info("definitions: \(path) " + (outcome.rev.map { "applied at revision \($0)" } ?? "unchanged"))
            } catch {
                if case .server(let failure) = error, let line = failure.details["line"]?.intValue {
                    log.error("definitions: \(path):\(line): \(failure.code.rawValue): \(failure.message); nothing applied")
                } else {
                    log.error("definitions: \(path): \(error); nothing applied")
                }
            }
        }
        var fields = batch.fields
        fields["op"] = .string("batch")
        if let answer = request(session, capture, fields, settle: settle) {
            report(answer)
            session.close()
            return nil
        }
        let waiting = Waiting(session: session)
        capture.onLine = { [unowned waiting] line in
            report(answer(line))
            waiting.finished = true
        }
        return waiting
    }

    /// Sends one request through the session; its answer, or nil while it waits for etcd (after
    /// `settle` gave up, or without one).
    private static func request(_ session: Session, _ capture: Capture, _ fields: [String: JSONValue],
                                settle: (() -> Void)? = nil) -> Result<Response, ClientError>? {
        capture.lines.removeAll()
        session.receive(JSONValue.object(fields).encoded)
        while capture.lines.isEmpty, session.isWaiting, let settle { settle() }
        guard let line = capture.lines.last else {
            return session.isWaiting ? nil : .failure(.server(ObsError(.internal, "no answer to \(fields["op"]?.stringValue ?? "")")))
        }
        return answer(line)
    }

    /// An answer line as the client library reads it.
    private static func answer(_ line: String) -> Result<Response, ClientError> {
        guard case .object(let answer)? = try? JSONValue.parse(line) else {
            return .failure(.server(ObsError(.internal, "an answer that is not a JSON object")))
        }
        guard answer["ok"]?.boolValue == true else { return .failure(.server(ObsConnection.error(answer["error"]))) }
        return .success(Response(fields: answer, line: line))
    }

    /// The session's answers, kept as text.
    private final class Capture: SessionOutput {
        var lines: [String] = []
        /// Called with each line instead, once set: for an answer that comes after `apply` returned.
        var onLine: ((String) -> Void)?
        var pendingBytes: Int { 0 }
        func write(_ line: EncodedLine) {
            if let onLine { onLine(line.text) } else { lines.append(line.text) }
        }
    }
}
