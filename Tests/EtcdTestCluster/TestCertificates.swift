// Certificates for a TLS test cluster, made with openssl: a CA, a server certificate for
// 127.0.0.1 and localhost, and a client certificate for the user root. EC keys (P-256), because
// they are made in milliseconds; valid for two days.
import Foundation

public struct TestCertificates {
    public let caFile: String
    public let serverCertFile: String
    public let serverKeyFile: String
    public let clientCertFile: String
    public let clientKeyFile: String

    public init(directory: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        guard let openssl = which("openssl") else { throw EtcdClusterError("openssl is not installed") }
        caFile = directory + "/ca.crt"
        let caKey = directory + "/ca.key"
        serverCertFile = directory + "/server.crt"
        serverKeyFile = directory + "/server.key"
        clientCertFile = directory + "/client.crt"
        clientKeyFile = directory + "/client.key"
        let newKey = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        _ = try run(openssl, ["req", "-x509"] + newKey + ["-keyout", caKey, "-out", caFile, "-days", "2",
                                                          "-subj", "/CN=obsd test CA"])
        try Self.sign(openssl, newKey, directory: directory, name: "server", subject: "/CN=localhost",
                      extensions: "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
                      caFile: caFile, caKey: caKey)
        try Self.sign(openssl, newKey, directory: directory, name: "client", subject: "/CN=root",
                      extensions: "extendedKeyUsage=clientAuth\n", caFile: caFile, caKey: caKey)
    }

    private static func sign(_ openssl: String, _ newKey: [String], directory: String, name: String, subject: String,
                             extensions: String, caFile: String, caKey: String) throws {
        let request = directory + "/\(name).csr"
        let extensionsFile = directory + "/\(name).ext"
        try extensions.write(toFile: extensionsFile, atomically: true, encoding: .utf8)
        _ = try run(openssl, ["req"] + newKey + ["-keyout", directory + "/\(name).key", "-out", request, "-subj", subject])
        _ = try run(openssl, ["x509", "-req", "-in", request, "-CA", caFile, "-CAkey", caKey, "-CAcreateserial",
                              "-out", directory + "/\(name).crt", "-days", "2", "-extfile", extensionsFile])
    }
}
