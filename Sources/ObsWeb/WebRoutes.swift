import ObsCore

/// Every request `obsctl web` answers, with no socket: the token check, the page's files, its
/// event stream and its API.
///
/// Access. The printed URL carries the token in its fragment (`/#token=…`), which the browser
/// never sends to any server; the page (`app.js`) takes it from there (or from `?token=`, the form
/// obsctl printed before), keeps it in `sessionStorage` and takes it out of the address bar. Every
/// data route (`/info`, `/events`, `/api`) must carry it in `Authorization: Bearer TOKEN`, or gets
/// 403. The page's files are the same for everyone, so they are served without it.
///
/// Why not a cookie: browsers do not scope cookies by port, so a cookie set by 127.0.0.1:8047 goes
/// with every request to 127.0.0.1 on any port, where any local user can run a server and have the
/// browser sent to it. `sessionStorage` and the header are per origin, port included. And a
/// request with an `Authorization` header is not "simple": another origin's page could only send
/// it after a CORS preflight (OPTIONS), which is never granted.
struct WebRoutes: Sendable {
    let token: AccessToken
    let api: WebAPI
    let link: any DaemonLink
    let socketPath: String
    let version: String

    /// The routes that need the token: everything but the page's files.
    static let dataPaths: Set<String> = ["/info", "/events", "/api"]

    /// Headers on every answer: no framing, no sniffing, nothing loaded from elsewhere, and no
    /// Referer that could carry a URL with the token.
    static let securityHeaders: [(name: String, value: String)] = [
        ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-store"),
    ]

    func handle(_ request: HTTPRequest) -> HTTPResponse {
        var response = route(request)
        response.headers += Self.securityHeaders
        return response
    }

    /// Whether `request` carries the token: `Authorization: Bearer TOKEN` (the scheme's name in
    /// any case). Nothing else counts: not the query, not a cookie.
    func isAuthorized(_ request: HTTPRequest) -> Bool {
        guard let value = request.headers["authorization"], value.prefix(7).lowercased() == "bearer " else { return false }
        return token.matches(String(value.dropFirst(7)))
    }

    private func route(_ request: HTTPRequest) -> HTTPResponse {
        // A request from another origin is refused outright, a CORS preflight included.
        if let origin = request.headers["origin"], origin != "http://" + (request.headers["host"] ?? "") {
            return HTTPResponse(status: 403, contentType: "text/plain; charset=utf-8", "403: cross-origin request\n")
        }
        // No preflight is ever granted, whatever the path: the page needs none (it is same-origin).
        if request.method == "OPTIONS" {
            return HTTPResponse(status: 405, headers: [("Allow", "GET, POST"), ("Content-Type", "text/plain; charset=utf-8")],
                                body: .bytes(Array("405: method not allowed\n".utf8)))
        }
        if Self.dataPaths.contains(request.path), !isAuthorized(request) {
            return WebAPI.error(403, "unauthorized", "no valid access token: open the URL that obsctl web printed")
        }
        switch (request.method, request.path) {
        case ("GET", "/info"):
            let info: JSONValue = ["read_only": .bool(api.readOnly), "socket": .string(socketPath), "obsctl": .string(version)]
            return WebAPI.json(200, info.encoded)
        case ("GET", "/events"):
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")],
                                body: .stream(link.feed(pattern: request.query["pattern"] ?? "**")))
        case ("POST", "/api"):
            guard request.headers["content-type"]?.hasPrefix("application/json") == true else {
                return WebAPI.error(415, "bad_request", "the body must be application/json")
            }
            return api.handle(request)
        case ("GET", let path) where !Self.dataPaths.contains(path):
            // The page's files: public, the same for every user (`?token=` on `/` is the page's to read).
            guard let asset = Assets.file(at: path) else {
                return HTTPResponse(status: 404, contentType: "text/plain; charset=utf-8", "404: no such page\n")
            }
            return HTTPResponse(status: 200, headers: [("Content-Type", asset.contentType)], body: .bytes(asset.bytes))
        case (_, "/api"), (_, "/"), (_, "/index.html"), (_, "/info"), (_, "/events"):
            return HTTPResponse(status: 405, contentType: "text/plain; charset=utf-8", "405: method not allowed\n")
        default:
            return HTTPResponse(status: 404, contentType: "text/plain; charset=utf-8", "404: no such page\n")
        }
    }
}
