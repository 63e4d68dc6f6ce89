import ObsCore

/// Every request `obsctl web` answers, with no socket: the token check, the page's files, its
/// event stream and its API.
///
/// Access: the token from the printed URL, in the query (`?token=`) or in the cookie the server
/// sets when the page is opened with it (HttpOnly, SameSite=Strict, named after the port so that
/// two servers on one host do not overwrite each other's). Anything else is 403. Opening `/` with
/// the token redirects to `/`, so the token leaves the address bar and the history.
struct WebRoutes: Sendable {
    let token: AccessToken
    let port: UInt16
    let api: WebAPI
    let link: any DaemonLink
    let socketPath: String
    let version: String

    var cookieName: String { "obsctl_web_\(port)" }

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

    private func route(_ request: HTTPRequest) -> HTTPResponse {
        let tokenInQuery = token.matches(request.query["token"])
        guard tokenInQuery || token.matches(request.cookies[cookieName]) else {
            return HTTPResponse(status: 403, contentType: "text/html; charset=utf-8", Self.forbiddenPage)
        }
        // A request from another origin (which would need the cookie anyway) is refused outright.
        if let origin = request.headers["origin"], origin != "http://" + (request.headers["host"] ?? "") {
            return HTTPResponse(status: 403, contentType: "text/plain; charset=utf-8", "403: cross-origin request\n")
        }
        switch (request.method, request.path) {
        case ("GET", "/") where tokenInQuery:
            return HTTPResponse(status: 303, headers: [
                ("Location", "/"),
                ("Set-Cookie", "\(cookieName)=\(token.text); Path=/; HttpOnly; SameSite=Strict"),
            ])
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
        case ("GET", let path) where path != "/api":
            guard let asset = Assets.file(at: path) else {
                return HTTPResponse(status: 404, contentType: "text/plain; charset=utf-8", "404: no such page\n")
            }
            return HTTPResponse(status: 200, headers: [("Content-Type", asset.contentType)], body: .bytes(asset.bytes))
        case (_, "/api"), (_, "/"), (_, "/info"), (_, "/events"):
            return HTTPResponse(status: 405, contentType: "text/plain; charset=utf-8", "405: method not allowed\n")
        default:
            return HTTPResponse(status: 404, contentType: "text/plain; charset=utf-8", "404: no such page\n")
        }
    }

    static let forbiddenPage = """
        <!doctype html><html><head><meta charset="utf-8"><title>403 Forbidden</title></head>
        <body><h1>403 Forbidden</h1><p>Open the URL that <code>obsctl web</code> printed: it carries the access token.</p></body></html>

        """
}
