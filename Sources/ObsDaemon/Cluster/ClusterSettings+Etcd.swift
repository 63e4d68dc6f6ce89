import EtcdClient

extension ClusterSettings {
    /// The largest certificate or key file read (a CA bundle of a whole system is about 200 KB).
    static let maxTLSFileBytes = 1 << 20

    /// What the etcd client is given, but for its TLS material (`tlsMaterial()`): enough to count
    /// its connections.
    var etcdConfiguration: EtcdConfiguration {
        var configuration = EtcdConfiguration(endpoints: endpoints)
        configuration.user = user
        configuration.password = password
        configuration.api = api == .grpc ? .grpc : .json
        configuration.requestTimeout = .milliseconds(Int64(timeout * 1000))
        return configuration
    }

    /// What the etcd client is given, with the CA, certificate and key read from their files
    /// (under SafeFile's rules; the key is a secret): obsd hands libcurl their bytes, never a path.
    func etcdConfigurationWithTLS() throws(UnsafePathError) -> EtcdConfiguration {
        var configuration = etcdConfiguration
        configuration.tls = try tlsMaterial()
        return configuration
    }

    /// The settings but for the TLS files' paths, which a reload applies at once.
    var withoutTLSFiles: ClusterSettings {
        var settings = self
        (settings.caFile, settings.certFile, settings.keyFile) = (nil, nil, nil)
        return settings
    }

    /// The CA, certificate and key, read from their files now.
    func tlsMaterial() throws(UnsafePathError) -> TLSMaterial {
        func read(_ path: String?, _ role: String, secret: Bool = false) throws(UnsafePathError) -> [UInt8]? {
            guard let path else { return nil }
            guard let contents = try SafeFile.read(path, role: role, maxBytes: Self.maxTLSFileBytes, secret: secret) else {
                throw UnsafePathError("\(role) \(path) does not exist")
            }
            guard !contents.bytes.isEmpty else { throw UnsafePathError("\(role) \(path) is empty") }
            return contents.bytes
        }
        return TLSMaterial(ca: try read(caFile, "etcd_cacert"), certificate: try read(certFile, "etcd_cert"),
                           key: try read(keyFile, "etcd_key", secret: true))
    }
}
