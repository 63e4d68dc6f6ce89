import ObsClient
import ObsCore

/// `POST /api`: the page's requests to the daemon. The body is a protocol request (`op` and its
/// fields); the answer is the daemon's, as it wrote it. Only the operations the page uses pass:
/// reads, `history` (obsctl's own, see `DaemonLink.history`) and `set`, which `--read-only`
/// refuses here, before the daemon is asked. Everything else the daemon decides, with the
/// user's own access (its `allow` rules included).
struct WebAPI: Sendable {
    static let reads: Set<String> = ["hello", "ping", "get", "list", "describe", "graph", "stats", "history"]
    static let writes: Set<String> = ["set"]

    let link: any DaemonLink
    let readOnly: Bool

    func handle(_ request: HTTPRequest) -> HTTPResponse {
        if request.bodyTooLarge {
            return Self.error(413, "too_large", "the request is larger than obsctl web accepts")
        }
        guard case .object(var fields)? = try? JSONValue.parse(request.body) else {
            return Self.error(400, "bad_json", "the request is not a JSON object")
        }
        guard let op = fields["op"]?.stringValue else { return Self.error(400, "bad_request", "op must be a string") }
        if Self.writes.contains(op), readOnly {
            return Self.error(403, "permission_denied", "obsctl web runs with --read-only: the page cannot write")
        }
        guard Self.reads.contains(op) || Self.writes.contains(op) else {
            return Self.error(400, "unknown_op", "obsctl web does not pass \(op) to the daemon")
        }
        fields["op"] = nil
        fields["id"] = nil
        do throws(ClientError) {
            if op == "history" {
                guard let key = fields["key"]?.stringValue else { return Self.error(400, "bad_request", "key must be a string") }
                let events = try link.history(of: key)
                return Self.json(200, "{\"ok\":true,\"key\":\(JSONValue.string(key).encoded),\"events\":[\(events.joined(separator: ","))]}")
            }
            return Self.json(200, try link.request(op, fields).line)
        } catch {
            switch error {
            case .server(let failure):
                var object = failure.details
                object["code"] = .string(failure.code.rawValue)
                object["message"] = .string(failure.message)
                return Self.json(200, JSONValue.object(["ok": false, "error": .object(object)]).encoded)
            case .cannotConnect, .connectionLost:
                return Self.error(502, "no_daemon", error.description)
            case .timedOut:
                return Self.error(504, "timed_out", "obsd did not answer in time")
            }
        }
    }

    static func json(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "application/json", text)
    }

    /// An answer in the daemon's error shape, for what obsctl web refuses or cannot do itself.
    static func error(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
        json(status, JSONValue.object(["ok": false, "error": ["code": .string(code), "message": .string(message)]]).encoded)
    }
}
