// What a transfer libcurl could not carry through tells of its request: etcd's TLS refused the
// connection, or the request never left, or it may have reached etcd's server (which may then
// have applied a write), or the connection ended right after its TLS handshake, which is either
// of the first and the third (a new connection to the member tells which: Driver+Outcomes.swift).
//
// libcurl's CURLcode alone does not tell. With TLS 1.3 the client's side of the handshake ends
// before the server has looked at the client's certificate: a server refusing it sends its alert
// and closes after the handshake is complete from libcurl's side. The refusal then shows on
// libcurl's first read (CURLE_RECV_ERROR, OpenSSL's alert in the message) or, when the server's
// reset comes first, on its first write (CURLE_SEND_ERROR or CURLE_HTTP2, with "Connection reset
// by peer", "getpeername() failed", or OpenSSL's "SSL_write: SSL_ERROR_ZERO_RETURN": libcurl keeps
// the first message of a transfer). Either way the server read nothing of the request. So what
// libcurl counted decides: the request size (CURLINFO_REQUEST_SIZE: the header bytes handed to
// the connection; over HTTP/2 the bytes its HTTP/2 layer took, which may not have left yet) and
// the body bytes sent (CURLINFO_SIZE_UPLOAD_T, likewise); the answer's bytes (CURLINFO_HEADER_SIZE,
// CURLINFO_SIZE_DOWNLOAD_T); and whether this transfer made the TLS handshake
// (CURLINFO_APPCONNECT_TIME_T, 0 over a connection reused from the pool). When the request was
// handed over and the new connection ended before any answer with no alert read, they cannot
// tell a refused certificate from a member that died having read the request.
import CCurl

struct TransportFailure: Equatable {
    enum Kind: Equatable {
        /// etcd's TLS refused the connection (a certificate refused on either side, no protocol
        /// or cipher in common, an unreadable file): nothing reached etcd's server, and trying
        /// another member changes nothing until the setup is fixed.
        case tlsRefused
        /// Nothing of the request was handed to the connection (it could not be made, or broke
        /// before, TLS handshake included): no member can act on it, another may be tried.
        case notSent
        /// Bytes of the request left: it may have reached etcd's server, which may have applied it.
        case maybeSent
        /// The connection this transfer made ended (reset, or closed by the server's TLS) right
        /// after its TLS handshake, with the request handed over and before any byte of an
        /// answer, and no alert read: a member refusing the client certificate under TLS 1.3 does
        /// that when its reset outruns its alert (nothing reached etcd), and so does one that dies
        /// at that moment (the request may have reached it).
        case cutAfterHandshake
    }

    var code: CURLcode
    /// libcurl's message: the first error of the transfer, or the code's text.
    var message: String
    var requestBytes: Int
    var uploadBytes: Int
    var responseBytes: Int
    /// The transfer made a TLS handshake that completed (a new TLS connection).
    var handshakeCompleted: Bool

    var kind: Kind {
        if Self.isTLSSetup(code) { return .tlsRefused }
        if code == CURLE_SSL_CONNECT_ERROR {
            // OpenSSL's own error (an alert from etcd, no protocol in common, a plain-HTTP port)
            // is TLS refusing; a handshake cut by the connection (reset, closed) is not.
            guard let error = openSSLError, !error.contains("unexpected eof") else { return .notSent }
            return .tlsRefused
        }
        let sent = requestBytes > 0 || uploadBytes > 0
        if responseBytes == 0, handshakeCompleted || !sent, openSSLError?.contains(" alert ") == true {
            // A TLS 1.3 refusal: etcd's alert, read on a connection whose handshake this transfer
            // made, or before any byte of the request left, and before any byte of an answer.
            // (Over a pooled connection, or after an answer began, an alert is no refusal of the
            // handshake, which etcd took long before.)
            return .tlsRefused
        }
        guard sent else { return .notSent }
        return handshakeCompleted && responseBytes == 0 && Self.isConnectionEnded(code) ? .cutAfterHandshake : .maybeSent
    }

    /// The connection ended under the transfer (not a timeout, nor the client's own doing).
    private static func isConnectionEnded(_ code: CURLcode) -> Bool {
        switch code {
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_GOT_NOTHING: true
        default: false
        }
    }

    /// OpenSSL's error in the message, from "error:" ("error:0A000412:SSL routines::sslv3 alert
    /// bad certificate"); nil when libcurl reports a socket's error or its own.
    var openSSLError: Substring? {
        var rest = message[...]
        while let range = rest.range(of: "error:") {
            let after = rest[range.upperBound...]
            let code = after.prefix { $0.isHexDigit }
            if code.count == 8, after.dropFirst(8).first == ":" { return message[range.lowerBound...] }
            rest = after
        }
        return nil
    }

    /// Failures of the TLS setup itself, before or during the handshake: never of the connection.
    private static func isTLSSetup(_ code: CURLcode) -> Bool {
        switch code {
        case CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE,
             CURLE_SSL_ISSUER_ERROR, CURLE_SSL_CLIENTCERT, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
             CURLE_SSL_CRL_BADFILE, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
            return true
        default:
            return false
        }
    }

    /// The hint added to a failure that left nothing sent although this transfer's TLS handshake
    /// completed: the connection ended at once, which is how TLS 1.3 ends one whose client
    /// certificate the server refused when its reset outruns its alert.
    var hint: String? {
        guard kind == .notSent, handshakeCompleted else { return nil }
        return "the connection ended right after the TLS handshake, before the request was sent: does etcd refuse the client certificate?"
    }
}
