// obsd's column of `obsbench cluster`: two obsd hosts in cluster mode on the benchmark's etcd
// cluster (host A's first endpoint member 1, host B's member 2, as raw etcd's writer and watcher),
// a write on A seen by a watcher on B, and writes at 1 and 16 in flight on A (one connection per
// write in flight: a connection's writes are decided one after the other).
import EtcdTestCluster
import Foundation
import Glibc

final class ObsdClusterHosts {
    private let processes: [Process]
    let directory: String

    init(_ cluster: EtcdCluster, obsdPath: String, prefix: String, api: String = "grpc") throws(BenchError) {
        directory = NSTemporaryDirectory() + "obsbench-cluster-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw BenchError("cannot create \(directory): \(error)")
        }
        var processes: [Process] = []
        for host in 0..<2 {
            let endpoints = Array(cluster.endpoints.dropFirst(host)) + cluster.endpoints.prefix(host)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: obsdPath)
            process.arguments = ["--socket", directory + "/h\(host).sock", "--log-level", "error", "--cluster", "etcd",
                                 "--etcd-endpoints", endpoints.joined(separator: ","), "--etcd-prefix", prefix,
                                 "--config", "/dev/null"] + (api == "grpc" ? [] : ["--etcd-api", api])
            process.standardOutput = FileHandle.nullDevice
            do {
                try process.run()
            } catch {
                throw BenchError("cannot start \(obsdPath): \(error)")
            }
            processes.append(process)
        }
        self.processes = processes
        for host in 0..<2 {
            let deadline = benchNow() + 30
            while (try? ObsdLine(path: socket(host))) == nil {
                guard benchNow() < deadline, processes[host].isRunning else {
                    stop()
                    throw BenchError("obsd host \(host) did not start listening")
                }
                usleep(20_000)
            }
        }
    }

    deinit { stop() }

    func socket(_ host: Int) -> String { directory + "/h\(host).sock" }

    /// The writer's host (A) and the watcher's (B).
    var processIdentifiers: (writer: Int32, watcher: Int32) { (processes[0].processIdentifier, processes[1].processIdentifier) }

    func stop() {
        for process in processes where process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A blocking line connection to obsd, with a deadline per read.
final class ObsdLine {
    let fd: Int32
    private var buffer: [UInt8] = []

    init(path: String) throws(BenchError) {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw BenchError("connect \(path): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(fd) }

    func send(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            offset += sent
        }
    }

    /// Whether a whole line is buffered.
    var hasLine: Bool { buffer.contains(0x0A) }

    /// The next line, waiting at most `timeout` seconds.
    func readLine(timeout: Double = 30) throws(BenchError) -> String {
        let deadline = benchNow() + timeout
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            guard benchNow() < deadline else { throw BenchError("no answer from obsd within \(timeout) s") }
            try fill(wait: 100)
        }
    }

    /// Reads what has arrived, waiting at most `wait` milliseconds for something.
    func fill(wait: Int32) throws(BenchError) {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, wait) > 0 else { return }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count > 0 else { throw BenchError("obsd closed the connection") }
        buffer += chunk[..<count]
    }
}

/// obsd's column: a write on host A seen by a watcher on host B; writes in flight on A.
final class ObsdSystem: MeasuredSystem {
    let name = "obsd"
    private let hosts: ObsdClusterHosts
    private let parts: CPUParts
    private let writer: ObsdLine
    private let watcher: ObsdLine
    /// One connection per write in flight, made on first use.
    private var connections: [ObsdLine] = []
    private var nextValue = 0
    /// The next value written by a throughput row, counted on across rows: a `set` of the value a
    /// key already has (an earlier row's) changes nothing, and obsd sends etcd no write for it,
    /// only a transaction of compares, where raw etcd's every put is a write.
    private var nextLoadValue = 0
    /// The next value of the acknowledgement row's key.
    private var nextAcknowledgedValue = 0

    init(_ cluster: EtcdCluster, obsdPath: String, api: String) throws(BenchError) {
        hosts = try ObsdClusterHosts(cluster, obsdPath: obsdPath, prefix: "/bench/obsd/", api: api)
        let pids = hosts.processIdentifiers
        parts = CPUParts(parts: [("etcd", cluster.members.compactMap(\.processIdentifier)), ("obsd host A", [pids.writer]),
                                 ("obsd host B", [pids.watcher]), ("obsbench", [getpid()])])
        writer = try ObsdLine(path: hosts.socket(0))
        watcher = try ObsdLine(path: hosts.socket(1))
        watcher.send(#"{"op":"watch","keys":["bench.latency"],"initial":false}"#)
        _ = try watcher.readLine()
        _ = try watcher.readLine()
    }

    deinit { hosts.stop() }

    func latencies(samples: Int, warmUp: Int) throws(BenchError) -> [Double] {
        defer { nextValue += warmUp + samples }
        // As for raw etcd, the time is the write's until the watcher saw it: its acknowledgement is
        // taken just before the next write (it has arrived by then: host A applies the revision as
        // host B does).
        var unacknowledged = false
        let latencies = try measureLatency(samples: samples, warmUp: warmUp, first: nextValue, write: { (value: Int) throws(BenchError) in
            if unacknowledged { try acknowledged(writer.readLine()) }
            writer.send(#"{"op":"set","key":"bench.latency","value":\#(value)}"#)
            unacknowledged = true
        }, awaitSeen: { (value: Int) throws(BenchError) in
            let wanted = "\"new\":\(value),"
            while !(try watcher.readLine()).contains(wanted) {}
        })
        if unacknowledged { try acknowledged(writer.readLine()) }
        return latencies
    }

    func acknowledgementLatencies(samples: Int, warmUp: Int) throws(BenchError) -> [Double] {
        // A key the watcher does not watch: only host A's answer is waited for. Each value new, so
        // that every set is a write.
        defer { nextAcknowledgedValue += warmUp + samples }
        return try measureLatency(samples: samples, warmUp: warmUp, first: nextAcknowledgedValue, write: { (value: Int) throws(BenchError) in
            writer.send(#"{"op":"set","key":"bench.acknowledged","value":\#(value)}"#)
        }, awaitSeen: { (_: Int) throws(BenchError) in try acknowledged(writer.readLine()) })
    }

    func throughput(seconds: Double, inFlight: Int) throws(BenchError) -> ThroughputRow {
        while connections.count < inFlight { connections.append(try ObsdLine(path: hosts.socket(0))) }
        var free = Array(0..<inFlight)
        var busy: Set<Int> = []
        let connections = self.connections
        return try measureThroughput(seconds: seconds, inFlight: inFlight, parts: parts, send: { (index: Int) throws(BenchError) in
            let connection = free.removeLast()
            busy.insert(connection)
            connections[connection].send(#"{"op":"set","key":"bench.load.\#(index % 1000)","value":\#(nextLoadValue)}"#)
            nextLoadValue += 1
        }, awaitAcknowledged: { () throws(BenchError) -> Int in
            var count = 0
            while count == 0 {
                var pollers = busy.map { pollfd(fd: connections[$0].fd, events: Int16(POLLIN), revents: 0) }
                _ = poll(&pollers, nfds_t(pollers.count), 1000)
                for connection in Array(busy) {
                    try connections[connection].fill(wait: 0)
                    while connections[connection].hasLine {
                        try acknowledged(connections[connection].readLine(timeout: 0))
                        count += 1
                        busy.remove(connection)
                        free.append(connection)
                    }
                }
            }
            return count
        })
    }

    private func acknowledged(_ answer: String) throws(BenchError) {
        guard answer.contains("\"ok\":true") else { throw BenchError("a write failed: \(answer)") }
    }
}
