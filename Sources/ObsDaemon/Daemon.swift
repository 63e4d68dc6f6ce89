// The daemon's life: start (state directory, database, restore, socket), serve (the loop), reload,
// and the shutdown sequence.
//
// Start-up, in order, so that READY=1 means "state restored and listening":
// 1. open the storage (the state directory checked, or created 0700: SafeDirectory.swift) and let
//    the store restore from it (values, definitions re-evaluated, bindings, the revision counter);
// 2. apply the `definitions` file, if set (Definitions.swift);
// 3. adopt the socket systemd passed (LISTEN_FDS) or bind one under the Security rules;
// 4. sd_notify READY=1.
// Then the loop runs (DaemonLoop.swift) until the shutdown sequence (SIGTERM, SIGINT): STOPPING=1,
// stop accepting, answer what each client has already sent (`shutting_down`), send goodbye, flush (at most
// `DaemonLoop.flushDeadline` seconds; answers still wait for their batch); then what is left is
// written, the database closed and the socket removed.
import CLinux
import Glibc
import ObsCore

/// Why the daemon cannot start or has to stop; the message is for the operator.
public struct DaemonError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

public final class Daemon {
    /// How often pending writes are tried again while the database cannot be written.
    static let writeRetryInterval = 1.0

    private let options: CommandLineOptions
    private let environment: DaemonEnvironment
    private var settings: Settings
    /// Definitions files applied at reloads whose batch waits for etcd (cluster mode).
    private var definitionsWaiting: [Definitions.Waiting] = []
    private let log: Logger
    private let control: DaemonControl?
    private let handleSignals: Bool
    /// The most connections the descriptor limit leaves room for (DescriptorLimit.swift).
    private var connectionCeiling = Int.max

    /// `control` lets another thread stop or reload the daemon; `handleSignals` makes SIGTERM,
    /// SIGINT and SIGHUP do so (the executable sets it, in-process tests do not).
    public init(options: CommandLineOptions, environment: DaemonEnvironment, settings: Settings, log: Logger,
                control: DaemonControl? = nil, handleSignals: Bool = true) {
        self.options = options
        self.environment = environment
        self.settings = settings
        self.log = log
        self.control = control
        self.handleSignals = handleSignals
    }

    /// Runs until asked to stop; returns after a graceful shutdown.
    public func run() throws(DaemonError) {
        let signals: SignalSource?
        do throws(SystemError) {
            signals = handleSignals ? try SignalSource() : nil
        } catch {
            throw DaemonError("cannot set up signal handling: \(error)")
        }
        signal(SIGPIPE, SIG_IGN)
        DescriptorLimit.raiseSoftLimit()
        // The database, its WAL and the lock file hold the whole state: readable by us alone.
        umask(0o077)
        let notifier = Notifier(socketPath: environment["NOTIFY_SOCKET"], log: log)

        // Cluster mode: etcd holds the state; no database here.
        // Test hooks, read by debug builds only: every watch of etcd asks for fragments, which
        // etcd 3.4 sends slowly (the tests that need a slow history use it); a smaller bound on
        // what a watch keeps that the host has not taken yet; the watch's messages, etcd's answers
        // to proposals and its answers to the read after a compaction taken that many
        // milliseconds late.
        #if DEBUG
        let clusterHooks = EtcdLog.TestHooks(alwaysFragments: environment["OBSD_TEST_WATCH_FRAGMENTS"] == "1",
                                             watchBacklogBytes: environment["OBSD_TEST_WATCH_BACKLOG_BYTES"].flatMap(Int.init),
                                             holdWatch: (environment["OBSD_TEST_HOLD_WATCH_MS"].flatMap(Double.init) ?? 0) / 1000,
                                             holdAnswers: ((environment["OBSD_TEST_HOLD_PROPOSAL_ANSWERS_MS"].flatMap(Double.init) ?? 0) / 1000,
                                                           (environment["OBSD_TEST_HOLD_RESYNC_ANSWERS_MS"].flatMap(Double.init) ?? 0) / 1000))
        #else
        let clusterHooks = EtcdLog.TestHooks()
        #endif
        let cluster: (log: EtcdLog, state: StoredState)? = settings.cluster == .etcd
            ? try EtcdLog.start(settings.etcd, history: settings.limits.history, log: log, hooks: clusterHooks) : nil
        defer { cluster?.log.close() }
        let (storage, lock) = cluster == nil ? try openStorage() : (GroupCommitStorage(), -1)
        defer {
            // Writes after the last turn (sessions closing, a batch still in flight) are written
            // too; a failure is logged, nobody is waiting for an answer any more.
            do throws(GroupCommitFailure) {
                try storage.close()
            } catch {
                log.error("\(error.message)")
            }
            if lock >= 0 { close(lock) }
        }
        let store = try restore(from: cluster.map { LoadedState($0.state) } ?? storage, cluster: cluster?.log, notifier: notifier)
        let listener = try listen()
        let gate = settings.durability == .memory || cluster != nil ? nil : WriteGate(storage: storage, store: store, log: log)
        let loop: EventLoop
        let server: Server
        do throws(SystemError) {
            loop = try EventLoop()
            server = try Server(loop: loop, listener: listener, store: store, gate: gate, limits: settings.limits,
                                policy: policy(settings), log: log)
            for fd in [cluster?.log.completionFD, signals?.fd, control?.fd].compactMap({ $0 }) {
                try loop.add(fd, EventLoop.input)
            }
        } catch {
            listener.removeSocketFile()
            throw DaemonError("cannot start the event loop: \(error)")
        }
        // Everything obsd holds for itself is open now: the rest is for clients, but for the
        // connections to etcd that cluster mode opens as it goes (its watch, and one per request
        // under way: EtcdLog.etcdConnections).
        connectionCeiling = max(1, DescriptorLimit.connectionCeiling() - (cluster != nil ? EtcdLog.etcdConnections(settings.etcd) : 0))
        server.limits.maxConnections = connectionLimit(settings.limits.maxConnections)
        let where_ = cluster != nil ? "etcd \(settings.etcd.prefix) at \(settings.etcd.endpoints.joined(separator: ","))"
            : settings.durability == .memory ? "in memory" : settings.databasePath
        log.info("obsd \(obsdVersion) listening on \(listener.ownedPath ?? "the socket systemd passed"), state \(where_), durability \(storeConfiguration(settings).durability)")
        notifier.send("READY=1\nSTATUS=listening\nMAINPID=\(getpid())")

        let turns = DaemonLoop(loop: loop, server: server, store: store, gate: gate, cluster: cluster?.log, signals: signals, control: control,
                               notifier: notifier, log: log, watchdog: watchdogInterval(environment).map { $0 / 2 }) { [unowned self] in
            reload(server: server, store: store, notifier: notifier)
        }
        try turns.run()
        log.info("stopped")
    }

    // MARK: - Start-up pieces

    /// Start-up, step 1: the store, restored from the storage (in cluster mode, from what etcd
    /// holds, after which it applies etcd's changes); then step 2, the definitions file.
    private func restore(from storage: any StateStorage, cluster: EtcdLog?, notifier: Notifier) throws(DaemonError) -> Store {
        let store: Store
        do throws(ObsError) {
            store = try Store(configuration: storeConfiguration(settings), storage: storage, clock: SystemClock())
        } catch {
            throw DaemonError("cannot restore the state from \(settings.databasePath): \(error.message)")
        }
        // Applying etcd's history may take longer than systemd waits for a start (90 s by
        // default): while it goes on, each report asks for more time.
        try cluster?.attach(store) { status in
            notifier.send("EXTEND_TIMEOUT_USEC=\(UInt64(3 * EtcdLog.reportInterval * 1_000_000))\nSTATUS=\(status)")
        }
        log.info("restored revision \(store.rev)")
        for displaced in store.displacedAtLoad { log.warn(Self.describe(displaced)) }
        if let definitions = settings.definitions,
           let waiting = Definitions.apply(definitions, to: store, log: log, settle: cluster?.settle) {
            // An answer that waits for the loop (etcd past etcd_timeout, a commit to disk): it
            // is logged when it comes.
            definitionsWaiting.append(waiting)
        }
        return store
    }

    /// A binding as obsctl writes it: `FROM -> TO`, `<->` both ways, with its map.
    static func describe(_ binding: StoredBinding) -> String {
        "\(binding.from) \(binding.twoWay ? "<->" : "->") \(binding.to)" + (binding.map.map { " (map \($0))" } ?? "")
    }

    /// What the log (and `--check`) says of a stored binding that was not loaded.
    static func describe(_ displaced: DisplacedBinding) -> String {
        let (binding, by) = (describe(displaced.binding), describe(displaced.by))
        switch displaced.why {
        case .later:
            return "the stored binding \(binding) is not loaded: \(by), written after it, binds the same key (something else "
                + "than obsd wrote one of them, or an earlier version left it); its record is deleted"
        case .leftOver:
            return "the stored binding \(binding) is not loaded: an earlier version left its record when \(displaced.binding.to) "
                + "became the from of \(by); the next change deletes it"
        case .undecidable:
            return "the stored binding \(binding) is not loaded: \(by) binds the same key, and the records cannot tell which of "
                + "the two was made last (an earlier version left one when a two-way binding was turned round); check the "
                + "bindings, and bind again the one that should hold"
        }
    }

    /// Start-up, step 3: the socket systemd passed, or one bound under the security rules.
    private func listen() throws(DaemonError) -> Listener {
        do throws(ListenerError) {
            if let activated = try Listener.activated(environment) { return activated }
            return try Listener.bind(settings)
        } catch {
            throw DaemonError(error.description)
        }
    }

    private func openStorage() throws(DaemonError) -> (GroupCommitStorage, Int32) {
        guard settings.durability != .memory else { return (GroupCommitStorage(), -1) }
        let directory: String
        do throws(UnsafePathError) {
            directory = try SafeDirectory.prepare(settings.stateDirectory, role: "state directory", mode: 0o700,
                                                  parentMode: 0o700, allowSymlink: true).path
        } catch {
            throw DaemonError(error.description)
        }
        let lock = try Self.lockStateDirectory(directory)
        do throws(DaemonError) {
            let database: SQLiteStorage
            do throws(ObsError) {
                // Log files without their database: the database was deleted or moved, and the
                // files hold only the changes since its last checkpoint. Never served as the state.
                if !Configuration.fileExists(directory + "/obsd.db"), let file = try LogFileStorage.files(in: directory).first {
                    throw ObsError(.internal, "database \(directory)/obsd.db is missing but its commit log \(file.path) is there: the database was deleted or moved; put it back, or move the log files away to start with an empty store")
                }
                database = try SQLiteStorage(path: directory + "/obsd.db") { [log] in log.error($0) }
            } catch {
                throw DaemonError(error.message)
            }
            // Test hooks, compiled into debug builds only (the tests run those): a release obsd
            // never reads them, so no operator can slow the writer down by accident.
            #if DEBUG
            let delay = environment["OBSD_TEST_WRITE_DELAY"].flatMap(Double.init) ?? 0
            let rotateBytes = environment["OBSD_TEST_LOG_ROTATE_BYTES"].flatMap(Int.init) ?? LogFileStorage.defaultRotateBytes
            let rotateSeconds = environment["OBSD_TEST_LOG_ROTATE_SECONDS"].flatMap(Double.init)
                ?? LogFileStorage.defaultRotateSeconds
            let fileBound = environment["OBSD_TEST_LOG_FILE_BOUND"].flatMap(Int.init) ?? LogFileStorage.defaultFileBound
            let compactionBytes = environment["OBSD_TEST_BATCH_COMPACTION_BYTES"].flatMap(Int.init)
                ?? GroupCommitStorage.defaultCompactionBytes
            #else
            let delay = 0.0
            let rotateBytes = LogFileStorage.defaultRotateBytes
            let rotateSeconds = LogFileStorage.defaultRotateSeconds
            let fileBound = LogFileStorage.defaultFileBound
            let compactionBytes = GroupCommitStorage.defaultCompactionBytes
            #endif
            do throws(SystemError) {
                let logged = try LogFileStorage(directory: directory, database: database, rotateBytes: rotateBytes,
                                                rotateSeconds: rotateSeconds, fileBound: fileBound) { [log] in log.error($0) }
                // The loop appends each turn's frame itself, and in strict mode fdatasyncs it,
                // before the turn's answers go out, as Redis does (GroupCommitStorage says why).
                // The checkpoints have a thread of their own.
                let storage = GroupCommitStorage(writer: StorageWriter(logged, delay: delay), strict: settings.durability == .strict,
                                                 retryInterval: Self.writeRetryInterval, compactionBytes: compactionBytes)
                return (storage, lock)
            } catch {
                throw DaemonError("cannot start the commit log: \(error)")
            }
        } catch {
            close(lock)
            throw error
        }
    }

    /// One daemon per state directory: two writers would each believe their own revisions. The
    /// lock file is opened without following a symlink (nor blocking on a FIFO put in its place).
    static func lockStateDirectory(_ directory: String) throws(DaemonError) -> Int32 {
        let path = directory + "/obsd.lock"
        let lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
        guard lock >= 0 else {
            if errno == ELOOP { throw DaemonError("lock file \(path) is a symlink; obsd does not follow symlinks in its state directory") }
            throw DaemonError("cannot open \(path): \(SystemError("open"))")
        }
        var info = stat()
        guard fstat(lock, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(lock)
            throw DaemonError("lock file \(path) is not a regular file")
        }
        guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
            close(lock)
            throw DaemonError("another obsd is already using the state directory \(directory)")
        }
        return lock
    }

    /// max_connections as the descriptor limit allows it; the log says so when it is lowered.
    private func connectionLimit(_ configured: Int) -> Int {
        guard configured > connectionCeiling else { return configured }
        log.warn("max_connections is \(configured), but the descriptor limit (ulimit -n, LimitNOFILE=) leaves room for \(connectionCeiling) connections: serving at most \(connectionCeiling)")
        return connectionCeiling
    }

    private func policy(_ settings: Settings) -> AccessPolicy {
        let unmapped = unmappedUID()
        if let unmapped, !settings.allow.isEmpty {
            log.warn("allow: obsd runs in a user namespace that does not map every uid (systemd's PrivateUsers=?): other users connect as uid \(unmapped) and cannot be told apart, so none of them is let in")
        }
        return AccessPolicy(settings.allow, unmapped: unmapped) { [log] rule in
            log.warn("allow: no such \(rule.subject.kind) '\(rule.subject.name)'; the rule grants nothing")
        }
    }

    // MARK: - Reload

    /// Reads the configuration again and applies the definitions file again. An invalid
    /// configuration is logged and the running one kept. The log
    /// level, allow, max_connections, client_timeout and etcd's TLS files (read again, for renewed
    /// certificates) apply at once; settings that name files or sockets in use, the other cluster
    /// settings, and the store's limits (fixed when it is created), at the next start.
    private func reload(server: Server, store: Store, notifier: Notifier) {
        notifier.reloading()
        defer { notifier.send("READY=1\nSTATUS=listening") }
        let fresh: Settings
        do throws(ConfigError) {
            fresh = try Configuration.resolve(options, environment: environment, readFile: Configuration.readFile)
        } catch {
            log.error("reload: \(error); keeping the running configuration")
            return
        }
        for (name, changed) in [("socket", fresh.socket != settings.socket),
                                ("socket_mode", fresh.socketMode != settings.socketMode),
                                ("socket_group", fresh.socketGroup != settings.socketGroup),
                                ("state_dir", fresh.stateDirectory != settings.stateDirectory),
                                ("durability", fresh.durability != settings.durability),
                                ("cluster", fresh.cluster != settings.cluster || fresh.etcd.withoutTLSFiles != settings.etcd.withoutTLSFiles),
                                ("max_json_depth", fresh.limits.maxJSONDepth != settings.limits.maxJSONDepth),
                                ("max_value_bytes", fresh.limits.maxValueBytes != settings.limits.maxValueBytes),
                                ("max_expression_bytes", fresh.limits.maxExpressionBytes != settings.limits.maxExpressionBytes),
                                ("max_watches", fresh.limits.maxWatches != settings.limits.maxWatches),
                                ("history", fresh.limits.history != settings.limits.history),
                                ("history_bytes", fresh.limits.historyBytes != settings.limits.historyBytes),
                                ("max_restore_bytes", fresh.limits.maxRestoreBytes != settings.limits.maxRestoreBytes),
                                ("max_line_bytes", fresh.limits.maxLineBytes != settings.limits.maxLineBytes),
                                ("output_buffer_bytes", fresh.limits.outputBufferBytes != settings.limits.outputBufferBytes)]
        where changed {
            log.warn("reload: a new \(name) takes effect at the next start")
        }
        log.level = fresh.logLevel
        server.apply(policy(fresh))
        // The store's own limits are fixed when it is created; the daemon's apply now.
        server.limits.maxConnections = connectionLimit(fresh.limits.maxConnections)
        server.limits.clientTimeout = fresh.limits.clientTimeout
        var kept = fresh
        kept.limits = server.limits
        kept.socket = settings.socket
        kept.socketMode = settings.socketMode
        kept.socketGroup = settings.socketGroup
        kept.stateDirectory = settings.stateDirectory
        kept.durability = settings.durability
        kept.cluster = settings.cluster
        kept.etcd = settings.etcd
        // The TLS files apply at once (renewed certificates), read under the same rules as at start;
        // when the cluster itself changes at the next start, so do the files' paths: until then the
        // running client reads the files it was started with (they may have been renewed).
        let clusterChanges = fresh.cluster != settings.cluster || fresh.etcd.withoutTLSFiles != settings.etcd.withoutTLSFiles
        let tlsFiles = clusterChanges ? settings.etcd : fresh.etcd
        if let etcdLog = store.sharedLog as? EtcdLog, etcdLog.reloadTLS(tlsFiles) {
            (kept.etcd.caFile, kept.etcd.certFile, kept.etcd.keyFile) = (tlsFiles.caFile, tlsFiles.certFile, tlsFiles.keyFile)
        }
        settings = kept
        log.info("reloaded the configuration")
        if let definitions = settings.definitions {
            // Without waiting: in cluster mode the answer comes through the loop, which meanwhile
            // serves its clients (etcd may be slow or without a quorum just now).
            definitionsWaiting.removeAll { waiting in
                if waiting.finished { waiting.close() }
                return waiting.finished
            }
            if let waiting = Definitions.apply(definitions, to: store, log: log) {
                log.info("definitions: \(definitions): waiting for etcd to decide; clients are served meanwhile")
                definitionsWaiting.append(waiting)
            }
        }
    }
}

/// The store's share of the settings.
func storeConfiguration(_ settings: Settings) -> StoreConfiguration {
    var configuration = StoreConfiguration()
    configuration.maxValueBytes = settings.limits.maxValueBytes
    configuration.maxExpressionBytes = settings.limits.maxExpressionBytes
    configuration.maxWatchesPerConnection = settings.limits.maxWatches
    configuration.historyRevisions = settings.limits.history
    configuration.historyBytes = settings.limits.historyBytes
    configuration.maxOutputBytes = settings.limits.outputBufferBytes
    configuration.maxJSONDepth = settings.limits.maxJSONDepth
    configuration.maxLineBytes = settings.limits.maxLineBytes
    configuration.maxRestoreBytes = settings.limits.maxRestoreBytes
    configuration.serverVersion = obsdVersion
    configuration.durability = settings.cluster == .etcd ? "etcd" : settings.durability.rawValue
    configuration.proposalRetrySeconds = settings.etcd.timeout
    return configuration
}

extension AllowRule.Subject {
    var kind: String {
        switch self {
        case .user: "user"
        case .group: "group"
        }
    }

    var name: String {
        switch self {
        case .user(let name), .group(let name): name
        }
    }
}
