// Reloads in cluster mode. A reload applies etcd's TLS files at once but the other cluster
// settings at the next start: a configuration that changes both (moving to another etcd cluster,
// or leaving cluster mode) must not give the running client the new files while it still talks
// to the old endpoints. And the definitions file applied again must not stop the loop serving
// while etcd decides.
import Foundation
import Glibc
import TestSupport
import XCTest

final class ReloadClusterTLSTests: XCTestCase {
    private func runningHost(_ etcd: EtcdCluster, _ sandbox: Sandbox) throws -> (ObsdProcess, (String) throws -> Void) {
        let prefix = "/reload-tls-\(UInt32.random(in: 0...UInt32.max))/"
        let write = { (text: String) throws in
            try sandbox.write("cluster = etcd\netcd_prefix = \(prefix)\netcd_timeout = 2s\n" + text, to: sandbox.config)
        }
        try write("etcd_endpoints = \(etcd.endpoints.joined(separator: ","))\netcd_cacert = \(etcd.caFile!)\n"
                  + "etcd_cert = \(etcd.clientCertFile!)\netcd_key = \(etcd.clientKeyFile!)\n")
        let obsd = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--config", sandbox.config])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        return (obsd, write)
    }

    private func set(_ sandbox: Sandbox, _ value: Int) throws -> [String: Any] {
        let client = try Client(sandbox.socket)
        client.send("{\"op\":\"set\",\"key\":\"k\",\"value\":\(value)}\n")
        while let line = client.readLine() {
            let object = json(line)
            if object["ok"] != nil { return object }
        }
        return [:]
    }

    private func reload(_ obsd: ObsdProcess, count: Int) {
        obsd.signal(SIGHUP)
        XCTAssertTrue(waitFor("the reload") { obsd.log.components(separatedBy: "reloaded the configuration").count - 1 >= count },
                      obsd.log)
    }

    /// Moving to another etcd cluster: new endpoints and that cluster's CA and client certificate.
    /// The endpoints wait for the next start; the TLS files must wait with them.
    func test_aReloadToAnotherClusterWithItsTLSFiles_keepsWritingToTheRunningOne() throws {
        var options = EtcdCluster.Options()
        options.tls = true
        let etcd = try startEtcdCluster(options)
        defer { etcd.shutDown() }
        let sandbox = try Sandbox()
        let other = try TestCertificates(directory: sandbox.root + "/other")
        let (obsd, write) = try runningHost(etcd, sandbox)
        XCTAssertEqual(try set(sandbox, 1)["ok"] as? Bool, true, obsd.log)

        try write("etcd_endpoints = https://127.0.0.1:1\netcd_cacert = \(other.caFile)\n"
                  + "etcd_cert = \(other.clientCertFile)\netcd_key = \(other.clientKeyFile)\n")
        reload(obsd, count: 1)
        XCTAssertTrue(obsd.log.contains("a new cluster takes effect at the next start"), obsd.log)
        let answer = try set(sandbox, 2)
        XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)\n\(obsd.log)")
    }

    /// Leaving cluster mode at the next start (the etcd lines removed): until then the running
    /// client keeps its CA and client certificate.
    func test_aReloadThatLeavesClusterMode_keepsTheTLSInUseUntilTheRestart() throws {
        var options = EtcdCluster.Options()
        options.tls = true
        let etcd = try startEtcdCluster(options)
        defer { etcd.shutDown() }
        let sandbox = try Sandbox()
        let (obsd, _) = try runningHost(etcd, sandbox)
        XCTAssertEqual(try set(sandbox, 1)["ok"] as? Bool, true, obsd.log)

        try sandbox.write("cluster = none\n", to: sandbox.config)
        reload(obsd, count: 1)
        XCTAssertTrue(obsd.log.contains("a new cluster takes effect at the next start"), obsd.log)
        let answer = try set(sandbox, 2)
        XCTAssertEqual(answer["ok"] as? Bool, true, "\(answer)\n\(obsd.log)")
    }
}

/// The definitions file at a reload in cluster mode: its batch waits for etcd as any client's
/// write does, without the loop waiting with it.
final class ReloadClusterDefinitionsTests: XCTestCase {
    func test_definitionsAppliedAtAReload_whileEtcdHasNoQuorum_doNotStopTheHostServing() throws {
        let etcd = try startEtcdCluster()
        defer { etcd.shutDown() }
        let sandbox = try Sandbox()
        let definitions = sandbox.root + "/defs.obs"
        try sandbox.write("set a 1\n", to: definitions)
        try sandbox.write("cluster = etcd\netcd_endpoints = \(etcd.endpoints.joined(separator: ","))\n"
                          + "etcd_prefix = /reload-defs-\(UInt32.random(in: 0...UInt32.max))/\netcd_timeout = 3s\n"
                          + "definitions = \(definitions)\n", to: sandbox.config)
        let obsd = try ObsdProcess(sandbox, arguments: ["--socket", sandbox.socket, "--config", sandbox.config])
        XCTAssertTrue(obsd.waitUntilListening(), obsd.log)
        let client = try Client(sandbox.socket)
        XCTAssertEqual(client.request(#"{"op":"get","key":"a"}"#)?["value"] as? Int, 1, obsd.log)

        etcd.kill(1)
        etcd.kill(2)
        try sandbox.write("set a 2\n", to: definitions)
        obsd.signal(SIGHUP)
        XCTAssertTrue(waitFor("the reload to wait for etcd") { obsd.log.contains("waiting for etcd to decide") }, obsd.log)
        // Served while the batch waits: the answer comes before the batch's own (unavailable
        // after etcd_timeout, 3 s).
        XCTAssertEqual(client.request(#"{"op":"get","key":"a"}"#)?["value"] as? Int, 1)
        XCTAssertFalse(obsd.log.contains("definitions: \(definitions): unavailable"), obsd.log)
        XCTAssertTrue(waitFor("the batch's answer") { obsd.log.contains("definitions: \(definitions): unavailable") }, obsd.log)

        try etcd.restart([1, 2])
        XCTAssertTrue(waitFor("etcd to take writes again") {
            (client.request(#"{"op":"set","key":"probe","value":1}"#)?["ok"] as? Bool) == true
        })
        obsd.signal(SIGHUP)
        XCTAssertTrue(waitFor("the file applied") { client.request(#"{"op":"get","key":"a"}"#)?["value"] as? Int == 2 }, obsd.log)
        XCTAssertTrue(obsd.log.contains("definitions: \(definitions) applied at revision"), obsd.log)
    }
}
