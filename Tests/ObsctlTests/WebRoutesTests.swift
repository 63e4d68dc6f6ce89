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
        WebRoutes(token: token, api: WebAPI(link: link, readOnly: readOnly), link: link,
                  socketPath: "/run/test.sock", version: "0.1.0")
    }

    func api(_ body: String, readOnly: Bool = false, link: FakeLink = FakeLink()) -> HTTPResponse {
        routes(readOnly: readOnly, link: link).handle(HTTPRequest(method: "POST", path: "/api", headers: ["content-type": "application/json",
                                                                  "authorization": "Bearer \(token.text)"], body: Array(body.utf8)))
    }

    func text(_ response: HTTPResponse) -> String { String(decoding: response.bodyBytes, as: UTF8.self) }

    var authorized: [String: String] { ["authorization": "Bearer \(token.text)"] }

    func test_withoutTheToken_everyDataRouteIs403() {
        let routes = routes()
        let wrong = String(repeating: "ab", count: 31) + "ac"
        for path in ["/info", "/events", "/api"] {
            for method in ["GET", "POST"] {
                let tokenElsewhere = [HTTPRequest(method: method, path: path),
                                      HTTPRequest(method: method, path: path, query: ["token": token.text]),
                                      HTTPRequest(method: method, path: path, headers: ["cookie": "obsctl_web_8047=\(token.text)"]),
                                      HTTPRequest(method: method, path: path, headers: ["authorization": "Bearer \(wrong)"]),
                                      HTTPRequest(method: method, path: path, headers: ["authorization": "Bearer \(token.text.dropLast())"]),
                                      HTTPRequest(method: method, path: path, headers: ["authorization": "Bearer \(token.text)x"]),
                                      HTTPRequest(method: method, path: path, headers: ["authorization": "Basic \(token.text)"]),
                                      HTTPRequest(method: method, path: path, headers: ["authorization": token.text]),
                                      HTTPRequest(method: method, path: path, headers: ["x-obsctl-token": token.text])]
                for request in tokenElsewhere {
                    let response = routes.handle(request)
                    XCTAssertEqual(response.status, 403, "\(request)")
                    XCTAssertEqual(text(response), #"{"error":{"code":"unauthorized","message":"no valid access token: open the URL that obsctl web printed"},"ok":false}"#)
                    XCTAssertFalse(routes.isAuthorized(request), "\(request)")
                }
            }
        }
        XCTAssertTrue(routes.isAuthorized(HTTPRequest(method: "GET", path: "/info", headers: authorized)))
        XCTAssertTrue(routes.isAuthorized(HTTPRequest(method: "GET", path: "/info", headers: ["authorization": "bearer \(token.text)"])))
    }

    /// The page's files are public (the same for everyone): served without the token, and no
    /// answer sets a cookie, with the token in the URL or not.
    func test_thePagesFiles_needNoToken_andNoAnswerSetsACookie() {
        let routes = routes()
        for query in [[:], ["token": token.text]] {
            let page = routes.handle(HTTPRequest(method: "GET", path: "/", query: query))
            XCTAssertEqual(page.status, 200)
            XCTAssertEqual(page.header("content-type"), "text/html; charset=utf-8")
            XCTAssertTrue(text(page).contains("<script src=\"/app.js\""))
            XCTAssertEqual(page.header("content-security-policy")?.hasPrefix("default-src 'self'"), true)
            XCTAssertNil(page.header("set-cookie"))
        }
        for path in ["/index.html", "/app.js", "/graph.js", "/app.css"] {
            let file = routes.handle(HTTPRequest(method: "GET", path: path))
            XCTAssertEqual(file.status, 200, path)
            XCTAssertNil(file.header("set-cookie"), path)
        }
        let info = routes.handle(HTTPRequest(method: "GET", path: "/info", headers: authorized))
        XCTAssertEqual(info.status, 200)
        XCTAssertNil(info.header("set-cookie"))
        XCTAssertEqual(text(info), #"{"obsctl":"0.1.0","read_only":false,"socket":"/run/test.sock"}"#)
    }

    /// No CORS preflight is ever granted: OPTIONS is refused on every path, token or not, and no
    /// answer carries an Access-Control header.
    func test_options_isRefusedEverywhere() {
        let routes = routes()
        for path in ["/", "/app.js", "/info", "/events", "/api", "/nothing"] {
            for headers in [[:], authorized, authorized.merging(["access-control-request-method": "POST",
                                                                "access-control-request-headers": "authorization"]) { $1 }] {
                let response = routes.handle(HTTPRequest(method: "OPTIONS", path: path, headers: headers))
                XCTAssertEqual(response.status, 405, path)
                XCTAssertFalse(response.headers.contains { $0.name.lowercased().hasPrefix("access-control-") }, path)
            }
            let preflight = routes.handle(HTTPRequest(method: "OPTIONS", path: path, headers: ["origin": "http://127.0.0.1:9999", "host": "127.0.0.1:8047",
                                                                                             "access-control-request-method": "POST"]))
            XCTAssertEqual(preflight.status, 403, path)
        }
    }

    func test_aRequestFromAnotherOrigin_isRefused() {
        let request = HTTPRequest(method: "POST", path: "/api", headers: ["origin": "http://127.0.0.1:9999", "host": "127.0.0.1:8047",
                                                                         "content-type": "application/json", "authorization": "Bearer \(token.text)"],
                                  body: Array(#"{"op":"stats"}"#.utf8))
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
        var large = HTTPRequest(method: "POST", path: "/api", headers: ["content-type": "application/json", "authorization": "Bearer \(token.text)"])
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
        XCTAssertEqual(routes().handle(HTTPRequest(method: "GET", path: "/etc/passwd")).status, 404)
        XCTAssertEqual(routes().handle(HTTPRequest(method: "GET", path: "/api", headers: authorized)).status, 405)
        XCTAssertEqual(routes().handle(HTTPRequest(method: "DELETE", path: "/")).status, 405)
        XCTAssertEqual(routes().handle(HTTPRequest(method: "POST", path: "/info", headers: authorized)).status, 405)
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
