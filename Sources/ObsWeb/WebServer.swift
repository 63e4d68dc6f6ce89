import ObsClient

/// `obsctl web`: serves the live view of the daemon at `socketPath` to a browser, as the user who
/// runs it (the daemon sees obsctl's uid, so its `allow` rules apply to the page as to obsctl).
public final class WebServer: Sendable {
    /// The URL to open: it carries the access token, in the fragment (`/#token=…`), which the
    /// browser keeps to itself; the page reads it (see `WebRoutes`).
    public let url: String
    /// Where it listens, `HOST:PORT` with the port the system picked for port 0.
    public let address: String
    /// Whether only this machine can connect (the address is 127.0.0.0/8 or ::1).
    public let isLoopback: Bool
    private let http: HTTPServer
    private let calls = DaemonCalls()

    /// Listens on `address` and serves at once. `requestTimeout` bounds each request to the daemon.
    public init(socketPath: String, address: ListenAddress, readOnly: Bool, version: String, requestTimeout: Double? = nil) throws(WebError) {
        var limits = WebLimits()
        if let requestTimeout { limits.requestTimeout = requestTimeout }
        let (fd, bound) = try address.listen()
        let port = ListenAddress.port(of: bound)
        let token = AccessToken.random()
        let link = SocketDaemonLink(path: socketPath, limits: limits, calls: calls)
        let routes = WebRoutes(token: token, api: WebAPI(link: link, readOnly: readOnly), link: link,
                               socketPath: socketPath, version: version)
        isLoopback = ListenAddress.isLoopback(bound)
        http = try HTTPServer(listeningSocket: fd, maxBodyBytes: limits.maxBodyBytes, connectionLimit: limits.maxConnections,
                              idleTimeout: limits.idleTimeoutSeconds, authorizedIdleTimeout: limits.authorizedIdleTimeoutSeconds,
                              connectionsWithoutToken: limits.maxConnectionsWithoutToken, secondsWithoutToken: limits.secondsWithoutToken,
                              localPeers: isLoopback, isAuthorized: routes.isAuthorized, handler: routes.handle)
        let host = address.host.contains(":") ? "[\(address.host)]" : address.host
        self.address = "\(host):\(port)"
        url = "http://\(host):\(port)/#token=\(token.text)"
    }

    /// Ends every event stream and request to the daemon, then stops the server (its threads are
    /// joined, each done or about to be).
    public func stop() {
        calls.cancelAll()
        http.stop()
    }
}
