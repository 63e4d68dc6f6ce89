// A real etcd cluster of three members on loopback, for the tests and for obsbench: Debian's
// etcd binaries, ports picked free at run time, each member's data directory under one temporary
// directory (on tmpfs unless told otherwise), removed with the cluster. Start-up waits until every
// member answers `etcdctl endpoint health` (a read through Raft, so a leader is elected); members
// can be killed, stopped and started again. A TLS cluster serves its clients with certificates
// made by openssl for the occasion; an auth cluster has etcd's authentication enabled for root.
import Foundation
import Glibc

/// Why the cluster could not be started or driven.
public struct EtcdClusterError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}

public final class EtcdCluster {
    /// How the cluster is started.
    public struct Options {
        /// Serve clients over TLS, requiring a client certificate signed by the cluster's CA.
        public var tls = false
        /// Enable etcd's authentication, with the root user and this password.
        public var rootPassword: String?
        /// Raft's heartbeat and election timeout in milliseconds: etcd's defaults. Smaller ones
        /// notice a lost leader sooner, but on a loaded machine a member starved of CPU for the
        /// election timeout calls an election, and the writes in flight then fail.
        public var heartbeatMilliseconds = 100
        public var electionMilliseconds = 1000
        /// Data directories on tmpfs (/dev/shm), where fsync costs nothing; false: the system's
        /// temporary directory, on disk as in a deployment.
        public var dataOnTmpfs = true
        /// etcd's --experimental-watch-progress-notify-interval (nil: etcd's default, 10 minutes).
        public var progressNotifyInterval: String?
        /// etcd's --auth-token-ttl in seconds: how long an unused token stays valid (nil: 300).
        public var authTokenTTL: Int?

        public init() {}
    }

    /// One member: its name, URLs and data directory, and its process while it runs.
    public final class Member {
        public let name: String
        public let clientURL: String
        public let peerURL: String
        public let dataDirectory: String
        public let logPath: String
        fileprivate var process: Process?

        fileprivate init(name: String, clientURL: String, peerURL: String, dataDirectory: String, logPath: String) {
            self.name = name
            self.clientURL = clientURL
            self.peerURL = peerURL
            self.dataDirectory = dataDirectory
            self.logPath = logPath
        }

        public var isRunning: Bool { process?.isRunning ?? false }
        /// The member's process ID while it runs (for benchmarks that read its CPU time).
        public var processIdentifier: Int32? { isRunning ? process?.processIdentifier : nil }
        public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
    }

    public let options: Options
    public let directory: String
    public let members: [Member]
    /// With `tls`: the CA that signed the members' and the client's certificates, and the client's
    /// certificate and key.
    public let caFile: String?
    public let clientCertFile: String?
    public let clientKeyFile: String?
    private let serverFiles: (cert: String, key: String)?
    private let initialCluster: String
    private let clusterToken: String

    /// Whether Debian's etcd and etcdctl are installed (packages etcd-server and etcd-client).
    public static var binariesAvailable: Bool { etcdPath != nil && etcdctlPath != nil }

    /// Starts three members and waits until each answers a health check.
    public init(_ options: Options = Options(), startTimeout: Double = 60) throws {
        guard Self.binariesAvailable else {
            throw EtcdClusterError("etcd and etcdctl are not installed (Debian: etcd-server, etcd-client)")
        }
        self.options = options
        let base = options.dataOnTmpfs && access("/dev/shm", W_OK) == 0 ? "/dev/shm/" : NSTemporaryDirectory()
        var template = Array((base + "obsd-etcd-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw EtcdClusterError("mkdtemp in \(base) failed") }
        directory = String(cString: made)
        clusterToken = URL(fileURLWithPath: directory).lastPathComponent
        let scheme = options.tls ? "https" : "http"
        var members: [Member] = []
        do {
            let ports = try freeLoopbackPorts(6)
            for index in 0..<3 {
                members.append(Member(name: "m\(index + 1)", clientURL: "\(scheme)://127.0.0.1:\(ports[2 * index])",
                                      peerURL: "http://127.0.0.1:\(ports[2 * index + 1])",
                                      dataDirectory: directory + "/m\(index + 1)",
                                      logPath: directory + "/m\(index + 1).log"))
            }
            if options.tls {
                let certificates = try TestCertificates(directory: directory + "/tls")
                caFile = certificates.caFile
                clientCertFile = certificates.clientCertFile
                clientKeyFile = certificates.clientKeyFile
                serverFiles = (certificates.serverCertFile, certificates.serverKeyFile)
            } else {
                caFile = nil
                clientCertFile = nil
                clientKeyFile = nil
                serverFiles = nil
            }
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
        self.members = members
        initialCluster = members.map { "\($0.name)=\($0.peerURL)" }.joined(separator: ",")
        do {
            for index in members.indices { try launch(index) }
            try waitUntilHealthy(Array(members.indices), timeout: startTimeout)
            if let password = options.rootPassword { try enableAuthentication(password) }
        } catch {
            shutDown()
            throw error
        }
    }

    deinit { shutDown() }

    /// Every member's client URL, in member order.
    public var endpoints: [String] { members.map(\.clientURL) }

    /// Kills the member with SIGKILL (no goodbye to its peers) and waits for it to exit.
    public func kill(_ index: Int) {
        signal(index, SIGKILL)
    }

    /// Stops the member with SIGTERM and waits for it to exit.
    public func stop(_ index: Int) {
        signal(index, SIGTERM)
    }

    /// Freezes the member (SIGSTOP): its sockets stay open and take bytes, and it answers nothing.
    public func pause(_ index: Int) {
        guard let process = members[index].process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGSTOP)
    }

    /// Lets a member frozen by `pause` run again (SIGCONT).
    public func resume(_ index: Int) {
        guard let process = members[index].process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGCONT)
    }

    /// Starts a member that was killed or stopped, on its data directory and ports, and waits
    /// until it answers a health check (for which the cluster needs a quorum with it).
    public func restart(_ index: Int, timeout: Double = 60) throws {
        try restart([index], timeout: timeout)
    }

    /// Starts several members again at once (those that held the quorum, say) and waits for them.
    public func restart(_ indices: [Int], timeout: Double = 60) throws {
        for index in indices where !members[index].isRunning { try launch(index) }
        try waitUntilHealthy(indices, timeout: timeout)
    }

    /// The index of the member that is the leader, nil when the running members know of none.
    public func leader() throws -> Int? {
        let running = members.indices.filter { members[$0].isRunning }
        let output = try etcdctl(["endpoint", "status"], endpoints: running.map { members[$0].clientURL })
        // One line per endpoint: "URL, ID, version, db size, is leader, is learner, term, ...".
        for line in output.split(separator: "\n") {
            let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard fields.count > 4, fields[4] == "true" else { continue }
            return members.firstIndex { $0.clientURL == fields[0] }
        }
        return nil
    }

    /// Hands the leadership to member `index` (etcdctl move-leader), so that a test can kill a
    /// member knowing whether it leads.
    public func moveLeader(to index: Int) throws {
        guard let current = try leader() else { throw EtcdClusterError("the cluster has no leader") }
        guard current != index else { return }
        let status = try etcdctl(["endpoint", "status"], endpoints: [members[index].clientURL])
        guard let id = status.split(separator: ",").dropFirst().first?.trimmingCharacters(in: .whitespaces) else {
            throw EtcdClusterError("no member ID in: \(status)")
        }
        try etcdctl(["move-leader", id], endpoints: [members[current].clientURL])
    }

    /// Waits until each of the members answers `etcdctl endpoint health`.
    public func waitUntilHealthy(_ indices: [Int], timeout: Double = 60) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var pending = indices
        while !pending.isEmpty {
            pending.removeAll { (try? etcdctl(["endpoint", "health"], endpoints: [members[$0].clientURL])) != nil }
            if pending.isEmpty { return }
            for index in pending where !members[index].isRunning {
                throw EtcdClusterError("etcd member \(members[index].name) exited; its log:\n\(members[index].log)")
            }
            guard Date() < deadline else {
                let logs = pending.map { "\(members[$0].name):\n\(members[$0].log)" }.joined(separator: "\n")
                throw EtcdClusterError("etcd members not healthy after \(timeout) s; logs:\n\(logs)")
            }
            usleep(50_000)
        }
    }

    /// Runs etcdctl against the cluster (every endpoint unless told), with the cluster's TLS
    /// files and root's password; returns its output, or throws with its errors.
    @discardableResult
    public func etcdctl(_ arguments: [String], endpoints: [String]? = nil, timeout: Double = 20) throws -> String {
        var all = ["--endpoints", (endpoints ?? self.endpoints).joined(separator: ","),
                   "--dial-timeout", "2s", "--command-timeout", "\(Int(timeout))s"]
        if let caFile, let clientCertFile, let clientKeyFile {
            all += ["--cacert", caFile, "--cert", clientCertFile, "--key", clientKeyFile]
        }
        if let password = options.rootPassword, authenticationEnabled { all += ["--user", "root:\(password)"] }
        return try run(Self.etcdctlPath ?? "etcdctl", all + arguments)
    }

    private var authenticationEnabled = false

    private func enableAuthentication(_ password: String) throws {
        try etcdctl(["user", "add", "root:\(password)"])
        try etcdctl(["user", "grant-role", "root", "root"])
        try etcdctl(["auth", "enable"])
        authenticationEnabled = true
    }

    private func launch(_ index: Int) throws {
        let member = members[index]
        var arguments = [
            "--name", member.name, "--data-dir", member.dataDirectory,
            "--listen-client-urls", member.clientURL, "--advertise-client-urls", member.clientURL,
            "--listen-peer-urls", member.peerURL, "--initial-advertise-peer-urls", member.peerURL,
            "--initial-cluster", initialCluster, "--initial-cluster-state", "new",
            "--initial-cluster-token", clusterToken,
            "--heartbeat-interval", String(options.heartbeatMilliseconds),
            "--election-timeout", String(options.electionMilliseconds),
            "--logger", "zap", "--log-level", "warn",
            // A member that was starved and lost touch asks before it disrupts a working leader.
            "--pre-vote",
        ]
        if let (cert, key) = serverFiles, let caFile {
            arguments += ["--cert-file", cert, "--key-file", key, "--trusted-ca-file", caFile, "--client-cert-auth"]
        }
        if let interval = options.progressNotifyInterval {
            arguments += ["--experimental-watch-progress-notify-interval", interval]
        }
        if let ttl = options.authTokenTTL { arguments += ["--auth-token-ttl", String(ttl)] }
        let process = Process()
        // Through setpriv (util-linux), etcd is killed with the process that started it, should
        // that one die before it could stop the cluster (a crashed test, an interrupted run).
        // The signal follows the starting thread: start clusters from one that outlives them.
        if let setpriv = Self.setprivPath {
            process.executableURL = URL(fileURLWithPath: setpriv)
            process.arguments = ["--pdeathsig", "KILL", "--", Self.etcdPath ?? "etcd"] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: Self.etcdPath ?? "etcd")
            process.arguments = arguments
        }
        if !FileManager.default.fileExists(atPath: member.logPath) {
            _ = FileManager.default.createFile(atPath: member.logPath, contents: nil)
        }
        let log = FileHandle(forWritingAtPath: member.logPath)
        log?.seekToEndOfFile()
        process.standardOutput = log
        process.standardError = log
        do {
            try process.run()
        } catch {
            throw EtcdClusterError("cannot start etcd: \(error)")
        }
        member.process = process
    }

    private func signal(_ index: Int, _ number: Int32) {
        guard let process = members[index].process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, number)
        process.waitUntilExit()
    }

    /// Kills every member and removes the cluster's directory (deinit does it too).
    public func shutDown() {
        for index in members.indices { kill(index) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    fileprivate static let etcdPath = which("etcd")
    fileprivate static let etcdctlPath = which("etcdctl")
    private static let setprivPath = which("setpriv")
}

/// The path of a program found in PATH (or /usr/bin, /usr/sbin), nil when there is none.
func which(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    let directories = path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/sbin"]
    return directories.map { $0 + "/" + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
}

/// Runs a program to its end; its standard output, or an error with its standard error.
func run(_ executable: String, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    try process.run()
    // Read both to their end before waiting, so that a full pipe cannot stall the program.
    let (out, err) = (output.fileHandleForReading.readDataToEndOfFile(), errors.fileHandleForReading.readDataToEndOfFile())
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw EtcdClusterError("\(URL(fileURLWithPath: executable).lastPathComponent) \(arguments.joined(separator: " ")) "
            + "failed (\(process.terminationStatus)): \(String(decoding: err, as: UTF8.self))")
    }
    return String(decoding: out, as: UTF8.self)
}

/// `count` TCP ports on 127.0.0.1 that were free a moment ago: each bound to port 0 (the kernel
/// picks), all held until every one is picked so that none repeats, then released.
public func freeLoopbackPorts(_ count: Int) throws -> [Int] {
    var sockets: [Int32] = []
    defer { sockets.forEach { _ = close($0) } }
    var ports: [Int] = []
    for _ in 0..<count {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw EtcdClusterError("socket failed") }
        sockets.append(fd)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(fd, socketAddress, length) == 0 && getsockname(fd, socketAddress, &length) == 0
            }
        }
        guard bound else { throw EtcdClusterError("bind to 127.0.0.1:0 failed") }
        ports.append(Int(UInt16(bigEndian: address.sin_port)))
    }
    return ports
}
