// What a failed transfer tells of its request, without a cluster: the CURLcodes, messages and byte
// counts libcurl 7.88 with OpenSSL 3 reported against an etcd member (by hand, with curl's
// --write-out), each with what it means for a write.
import CCurl
@testable import EtcdClient
import XCTest

final class TransportFailureTests: XCTestCase {
    private let alert = "OpenSSL SSL_read: OpenSSL/3.0.19: error:0A000412:SSL routines::sslv3 alert bad certificate, errno 0"

    private func kind(_ code: CURLcode, _ message: String, request: Int = 0, upload: Int = 0, response: Int = 0,
                      handshake: Bool = true) -> TransportFailure.Kind {
        TransportFailure(code: code, message: message, requestBytes: request, uploadBytes: upload, responseBytes: response,
                         handshakeCompleted: handshake).kind
    }

    /// A member refusing the client certificate under TLS 1.3 refuses after libcurl's side of the
    /// handshake is done. Whichever comes first, its alert or its reset, nothing reached etcd;
    /// with the alert read it is TLS, without it nothing was sent or, when libcurl had taken the
    /// request, a probe must tell.
    func test_aClientCertificateRefusedAfterTheHandshake_isTLS_notSent_orCut() {
        XCTAssertEqual(kind(CURLE_RECV_ERROR, alert, request: 155, upload: 97), .tlsRefused, "the alert read first")
        XCTAssertEqual(kind(CURLE_RECV_ERROR, alert, request: 155), .tlsRefused)
        XCTAssertEqual(kind(CURLE_SEND_ERROR, "SSL_write() error: error:0A000412:SSL routines::sslv3 alert bad certificate"),
                       .tlsRefused)
        XCTAssertEqual(kind(CURLE_HTTP2, alert, handshake: false), .tlsRefused,
                       "libcurl's HTTP/2 connection setup failed, so no handshake time was reported; nothing sent")
        XCTAssertEqual(kind(CURLE_SEND_ERROR, "Send failure: Connection reset by peer"), .notSent, "the reset met first")
        XCTAssertEqual(kind(CURLE_HTTP2, "Send failure: Connection reset by peer", handshake: false), .notSent)
        XCTAssertEqual(kind(CURLE_SEND_ERROR, "getpeername() failed with errno 107: Transport endpoint is not connected"),
                       .notSent, "libcurl keeps the first message of the transfer, written before the reset")
        XCTAssertEqual(kind(CURLE_SEND_ERROR, "Send failure: Connection reset by peer", request: 155), .cutAfterHandshake)
        XCTAssertEqual(kind(CURLE_RECV_ERROR, "OpenSSL SSL_write: SSL_ERROR_ZERO_RETURN, errno 0", request: 155, upload: 98),
                       .cutAfterHandshake)
        let reset = TransportFailure(code: CURLE_SEND_ERROR, message: "Send failure: Connection reset by peer", requestBytes: 0,
                                     uploadBytes: 0, responseBytes: 0, handshakeCompleted: true)
        XCTAssertNotNil(reset.hint, "a reset right after the handshake hints at the certificate")
    }

    /// An alert is the handshake's refusal on a connection this transfer made (or before any byte
    /// of the request left), before any byte of an answer: over a pooled connection, or once an
    /// answer began, etcd had taken the handshake long before, and the request bytes count.
    func test_anAlertOverAPooledConnectionOrAfterAnAnswer_isNoRefusal() {
        XCTAssertEqual(kind(CURLE_RECV_ERROR, alert, request: 156, handshake: false), .maybeSent)
        XCTAssertEqual(kind(CURLE_RECV_ERROR, alert, request: 156, response: 40), .maybeSent)
        XCTAssertEqual(kind(CURLE_RECV_ERROR, alert, request: 0, handshake: false), .tlsRefused,
                       "nothing of the request left: whatever the connection, nothing reached etcd")
    }

    /// TLS errors of OpenSSL's that are no alert from etcd (a connection closed without TLS's
    /// goodbye) say nothing of the certificate: the bytes count, and on a new connection with no
    /// answer yet, a probe.
    func test_otherTLSErrorsAfterTheHandshake_countTheBytesSent() {
        let eof = "OpenSSL SSL_read: OpenSSL/3.0.19: error:0A000126:SSL routines::unexpected eof while reading, errno 0"
        XCTAssertEqual(kind(CURLE_RECV_ERROR, eof, request: 156, handshake: false), .maybeSent,
                       "a member that died after taking the write over a pooled connection")
        XCTAssertEqual(kind(CURLE_RECV_ERROR, eof, request: 156, response: 20), .maybeSent, "an answer had begun")
        XCTAssertEqual(kind(CURLE_RECV_ERROR, eof, request: 156), .cutAfterHandshake)
        XCTAssertEqual(kind(CURLE_RECV_ERROR, eof, request: 0), .notSent)
        XCTAssertEqual(kind(CURLE_RECV_ERROR, "OpenSSL SSL_read: Connection reset by peer, errno 104", request: 172, handshake: false),
                       .maybeSent)
    }

    /// The handshake itself: OpenSSL's refusals are TLS; a handshake cut by the connection (a
    /// member that froze or died meanwhile) is not, and left nothing sent.
    func test_aHandshakeRefusedIsTLS_oneCutByTheConnectionIsNotSent() {
        XCTAssertEqual(kind(CURLE_SSL_CONNECT_ERROR, "error:0A000412:SSL routines::sslv3 alert bad certificate", handshake: false),
                       .tlsRefused, "TLS 1.2: the alert comes within the handshake")
        XCTAssertEqual(kind(CURLE_SSL_CONNECT_ERROR, "error:0A00010B:SSL routines::wrong version number", handshake: false),
                       .tlsRefused, "a plain-HTTP port")
        XCTAssertEqual(kind(CURLE_SSL_CONNECT_ERROR, "Recv failure: Connection reset by peer", handshake: false), .notSent)
        XCTAssertEqual(kind(CURLE_SSL_CONNECT_ERROR, "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to 127.0.0.1:2379 ",
                            handshake: false), .notSent)
        XCTAssertEqual(kind(CURLE_SSL_CONNECT_ERROR, "error:0A000126:SSL routines::unexpected eof while reading", handshake: false),
                       .notSent)
        XCTAssertEqual(kind(CURLE_SSL_CLIENTCERT, "error:0A00045C:SSL routines::tlsv13 alert certificate required", handshake: false),
                       .tlsRefused)
        XCTAssertEqual(kind(CURLE_PEER_FAILED_VERIFICATION, "SSL certificate problem: unable to get local issuer certificate",
                            handshake: false), .tlsRefused)
        XCTAssertEqual(kind(CURLE_SSL_CERTPROBLEM, "could not load PEM client certificate from /x, OpenSSL error error:80000002:system library::No such file or directory",
                            handshake: false), .tlsRefused)
    }

    /// Without TLS in the way, what was handed to the connection decides.
    func test_connectionFailures_areNotSentUntilBytesLeft() {
        XCTAssertEqual(kind(CURLE_COULDNT_CONNECT, "Failed to connect to 127.0.0.1 port 1 after 0 ms: Couldn't connect to server",
                            handshake: false), .notSent)
        XCTAssertEqual(kind(CURLE_OPERATION_TIMEDOUT, "Connection timed out after 1001 milliseconds", handshake: false), .notSent)
        XCTAssertEqual(kind(CURLE_OPERATION_TIMEDOUT, "Operation timed out after 2000 milliseconds with 0 bytes received",
                            request: 158, handshake: false), .maybeSent)
        XCTAssertEqual(kind(CURLE_GOT_NOTHING, "Empty reply from server", request: 172, upload: 14, handshake: false), .maybeSent)
        XCTAssertEqual(kind(CURLE_OPERATION_TIMEDOUT, "Operation timed out after 2000 milliseconds with 0 bytes received",
                            request: 158), .maybeSent, "a member that took the handshake and keeps the connection: no refusal")
        XCTAssertEqual(kind(CURLE_SEND_ERROR, "Send failure: Broken pipe", upload: 100, handshake: false), .maybeSent,
                       "body bytes sent count as much as the header's")
    }

    func test_openSSLError_isFoundInLibcurlsMessage() {
        XCTAssertEqual(TransportFailure(code: CURLE_RECV_ERROR, message: alert, requestBytes: 0, uploadBytes: 0, responseBytes: 0,
                                        handshakeCompleted: true).openSSLError?.hasPrefix("error:0A000412:"), true)
        XCTAssertNil(TransportFailure(code: CURLE_RECV_ERROR, message: "Recv failure: error: reset", requestBytes: 0, uploadBytes: 0,
                                      responseBytes: 0, handshakeCompleted: true).openSSLError)
    }
}
