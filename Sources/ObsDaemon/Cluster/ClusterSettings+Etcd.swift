import EtcdClient

extension ClusterSettings {
    /// What the etcd client is given.
    var etcdConfiguration: EtcdConfiguration {
        var configuration = EtcdConfiguration(endpoints: endpoints)
        configuration.caFile = caFile
        configuration.certFile = certFile
        configuration.keyFile = keyFile
        configuration.user = user
        configuration.password = password
        configuration.api = api == .grpc ? .grpc : .json
        configuration.requestTimeout = .milliseconds(Int64(timeout * 1000))
        return configuration
    }
}
