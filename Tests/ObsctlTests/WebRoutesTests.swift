import Glibc
import ObsClient
import ObsCore
@testable import ObsWeb
import Synchronization
import XCTest

/// `obsctl web`'s routes with no socket and no daemon: requests in, responses out.
final class WebRoutesTests: XCTestCase {
    let token = AccessToken(text: String(repeating: "ab", count: 32))

    func routes(readOnly: Bool = false, link: FakeLink = FakeLink()) -> WebRoutes {
        WebRoutes(token: token, port: 8047, api: WebAPI(link: link, readOnly: readOnly), link: link,
                  socketPath: "/run/test.sock", version: "0.1.0")
    }

    func api(_ body: String, readOnly: Bool = false, link: FakeLink = FakeLink()) -> HTTPResponse {
        routes(readOnly: readOnly, link: link).handle(HTTPRequest(method: "POST", path: "/api", headers: ["content-type": "application/json"],
                                                                  cookies: ["obsctl_web_8047": token.text], body: Array(body.utf8)))
    }

    func text(_ response: HTTPResponse) -> String { String(decoding: response.bodyBytes, as: UTF8.self) }

    func test_withoutTheToken_everyRouteIs403() {
        let routes = routes()
        let wrong = String(repeating: "ab", count: 31) + "ac"
        for request in [HTTPRequest(method: "GET", path: "/"), HTTPRequest(method: "GET", path: "/app.js"),
                        HTTPRequest(method: "GET", path: "/events"), HTTPRequest(method: "POST", path: "/api"),
                        HTTPRequest(method: "GET", path: "/", query: ["token": wrong]),
                        HTTPRequest(method: "GET", path: "/", query: ["token": String(token.text.dropLast())]),
                        HTTPRequest(method: "GET", path: "/", cookies: ["obsctl_web_8047": wrong]),
                        HTTPRequest(method: "GET", path: "/", cookies: ["obsctl_web_8048": token.text])] {
            XCTAssertEqual(routes.handle(request).status, 403, "\(request)")
        }
    }

    func test_theTokenInTheQuery_redirectsAndSetsTheCookie_whichThenOpensThePage() {
        let routes = routes()
        let opened = routes.handle(HTTPRequest(method: "GET", path: "/", query: ["token": token.text]))
        XCTAssertEqual(opened.status, 303)
        XCTAssertEqual(opened.header("location"), "/")
        XCTAssertEqual(opened.header("set-cookie"), "obsctl_web_8047=\(token.text); Path=/; HttpOnly; SameSite=Strict")
        let page = routes.handle(HTTPRequest(method: "GET", path: "/", cookies: ["obsctl_web_8047": token.text]))
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.header("content-type"), "text/html; charset=utf-8")
        XCTAssertTrue(text(page).contains("<script src=\"/app.js\""))
        XCTAssertEqual(page.header("content-security-policy")?.hasPrefix("default-src 'self'"), true)
        for path in ["/app.js", "/graph.js", "/app.css"] {
            XCTAssertEqual(routes.handle(HTTPRequest(method: "GET", path: path, cookies: ["obsctl_web_8047": token.text])).status, 200, path)
        }
        let info = routes.handle(HTTPRequest(method: "GET", path: "/info", cookies: ["obsctl_web_8047": token.text]))
        XCTAssertEqual(text(info), #"{"obsctl":"0.1.0","read_only":false,"socket":"/run/test.sock"}"#)
    }

    func test_aRequestFromAnotherOrigin_isRefused() {
        let request = HTTPRequest(method: "POST", path: "/api", headers: ["origin": "http://evil.example", "host": "127.0.0.1:8047",
                                                                         "content-type": "application/json"],
                                  cookies: ["obsctl_web_8047": token.text], body: Array(#"{"op":"stats"}"#.utf8))
        XCTAssertEqual(routes().handle(request).status, 403)
        var same = request
        same.headers["origin"] = "http://127.0.0.1:8047"
        XCTAssertEqual(routes().handle(same).status, 200)
    }

    func test_readOnly_refusesSet_beforeTheDaemonIsAsked() {
        let link = FakeLink()
        let refused = api(#"{"op":"set","key":"a","value":1}"#, readOnly: true, link: link)
        XCTAssertEqual(refused.status, 403)
        XCTAssertEqual(text(refused), #"{"error":{"code":"permission_denied","message":"obsctl web runs with --read-only: the page cannot write"},"ok":false}"#)
        XCTAssertEqual(link.requests, [])
        XCTAssertEqual(api(#"{"op":"get","key":"a"}"#, readOnly: true, link: link).status, 200)
        XCTAssertEqual(link.requests, ["get {\"key\":\"a\"}"])
        XCTAssertEqual(api(#"{"op":"set","key":"a","value":1}"#, link: link).status, 200)
        XCTAssertEqual(link.requests.last, "set {\"key\":\"a\",\"value\":1}")
    }

    func test_onlyThePagesOperationsPass() {
        let link = FakeLink()
        for op in ["delete", "define", "bind", "unbind", "restore", "batch", "incr", "publish", "watch", "dump", "eval"] {
            let response = api("{\"op\":\"\(op)\",\"key\":\"a\"}", link: link)
            XCTAssertEqual(response.status, 400, op)
            XCTAssertTrue(text(response).contains("\"code\":\"unknown_op\""), op)
        }
        XCTAssertEqual(link.requests, [])
    }

    func test_badBodies() {
        XCTAssertEqual(api("[1]").status, 400)
        XCTAssertEqual(api("{\"op\":1}").status, 400)
        XCTAssertEqual(api("{").status, 400)
        XCTAssertEqual(api(#"{"op":"history"}"#).status, 400)
        var large = HTTPRequest(method: "POST", path: "/api", headers: ["content-type": "application/json"], cookies: ["obsctl_web_8047": token.text])
        large.bodyTooLarge = true
        XCTAssertEqual(routes().handle(large).status, 413)
        var plain = large
        plain.bodyTooLarge = false
        plain.headers["content-type"] = "text/plain"
        plain.body = Array(#"{"op":"stats"}"#.utf8)
        XCTAssertEqual(routes().handle(plain).status, 415)
    }

    func test_daemonAnswers_andFailures_mapToTheirStatus() {
        let link = FakeLink()
        link.failure = .server(ObsError(.conflict, "rev 3 is not 2", details: ["rev": 3]))
        let conflict = api(#"{"op":"set","key":"a","value":1,"if_rev":2}"#, link: link)
        XCTAssertEqual(conflict.status, 200)
        XCTAssertEqual(text(conflict), #"{"error":{"code":"conflict","message":"rev 3 is not 2","rev":3},"ok":false}"#)
        link.failure = .cannotConnect(path: "/run/test.sock", reason: .missing)
        XCTAssertEqual(api(#"{"op":"stats"}"#, link: link).status, 502)
        link.failure = .timedOut
        XCTAssertEqual(api(#"{"op":"stats"}"#, link: link).status, 504)
        link.failure = nil
        let history = api(#"{"op":"history","key":"a"}"#, link: link)
        XCTAssertEqual(text(history), #"{"ok":true,"key":"a","events":[{"event":"change","key":"a","new":1,"rev":1}]}"#)
    }

    func test_unknownPathsAndMethods() {
        let cookie = ["obsctl_web_8047": token.text]
        XCTAssertEqual(routes().handle(HTTPRequest(method: "GET", path: "/etc/passwd", cookies: cookie)).status, 404)
        XCTAssertEqual(routes().handle(HTTPRequest(method: "GET", path: "/api", cookies: cookie)).status, 405)
        XCTAssertEqual(routes().handle(HTTPRequest(method: "DELETE", path: "/", cookies: cookie)).status, 405)
    }

    func test_listenAddresses() {
        XCTAssertEqual(ListenAddress("127.0.0.1:8047")?.description, "127.0.0.1:8047")
        XCTAssertEqual(ListenAddress("[::1]:0")?.host, "::1")
        XCTAssertEqual(ListenAddress("localhost:80")?.port, 80)
        for bad in ["", "8047", ":8047", "127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "::1:80", "[]:80", "host:-1"] {
            XCTAssertNil(ListenAddress(bad), bad)
        }
    }

    func test_boundAddresses_knowTheirPortAndWhetherTheyAreLoopback() throws {
        let loopback = try ListenAddress("127.0.0.1:0")!.listen()
        defer { close(loopback.fd) }
        XCTAssertTrue(ListenAddress.isLoopback(loopback.address))
        XCTAssertNotEqual(ListenAddress.port(of: loopback.address), 0)
        let everywhere = try ListenAddress("0.0.0.0:0")!.listen()
        defer { close(everywhere.fd) }
        XCTAssertFalse(ListenAddress.isLoopback(everywhere.address))
        if let six = try? ListenAddress("[::1]:0")!.listen() {
            defer { close(six.fd) }
            XCTAssertTrue(ListenAddress.isLoopback(six.address))
            XCTAssertNotEqual(ListenAddress.port(of: six.address), 0)
        }
        XCTAssertThrowsError(try ListenAddress("no-such-host.invalid:0")!.listen())
    }

    func test_tokens_areLongRandomHex() {
        let tokens = (0..<100).map { _ in AccessToken.random().text }
        XCTAssertEqual(Set(tokens).count, 100)
        XCTAssertTrue(tokens.allSatisfy { $0.count == 64 && $0.allSatisfy(\.isHexDigit) })
        XCTAssertTrue(token.matches(token.text))
        XCTAssertFalse(token.matches(nil))
        XCTAssertFalse(token.matches(""))
    }
}

extension HTTPResponse {
    var bodyBytes: [UInt8] {
        if case .bytes(let bytes) = body { return bytes }
        return []
    }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }
}

/// A daemon that answers every request with `{"ok":true}` (or `failure`), and records them.
final class FakeLink: DaemonLink, @unchecked Sendable {
    // @unchecked: the tests call it from one thread.
    var requests: [String] = []
    var failure: ClientError?

    func request(_ op: String, _ fields: [String: JSONValue]) throws(ClientError) -> Response {
        requests.append("\(op) \(JSONValue.object(fields).encoded)")
        if let failure { throw failure }
        return Response(fields: ["ok": true], line: #"{"ok":true}"#)
    }

    func history(of key: String) throws(ClientError) -> [String] {
        if let failure { throw failure }
        return [#"{"event":"change","key":"\#(key)","new":1,"rev":1}"#]
    }

    func feed(pattern: String) -> any StreamingBody { fatalError("no streams in these tests") }
}
