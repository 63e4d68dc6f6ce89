// obsd's command line: help, version, --check, and otherwise the daemon, with exit codes
// 0 (success), 1 (cannot start, or --check found a problem) and 64 (usage error).
import Glibc
import ObsClient
import ObsCore

public enum Obsd {
    /// Runs obsd with `arguments` (without the program name) and returns its exit code.
    public static func main(_ arguments: [String], environment: DaemonEnvironment) -> Int32 {
        let options: CommandLineOptions
        do throws(UsageError) {
            options = try CommandLineOptions.parse(arguments)
        } catch {
            Logger.standardError(usageMessage(error))
            return 64
        }
        if options.help {
            print(obsdHelp, terminator: "")
            return 0
        }
        if options.version {
            print("obsd \(obsdVersion)")
            return 0
        }
        let journal = environment["JOURNAL_STREAM"] != nil
        let settings: Settings
        do throws(ConfigError) {
            settings = try Configuration.resolve(options, environment: environment, readFile: Configuration.readFile)
        } catch {
            if options.check {
                print("configuration: \(error)")
                return 1
            }
            Logger(level: .error, journal: journal).error("\(error)")
            return 1
        }
        if options.check { return check(options, environment: environment, settings: settings) }
        let log = Logger(level: settings.logLevel, journal: journal)
        let daemon = Daemon(options: options, environment: environment, settings: settings, log: log)
        return LargeStack.run {
            do throws(DaemonError) {
                try daemon.run()
                return 0
            } catch {
                log.error("\(error)")
                return 1
            }
        }
    }

    /// `--check`: the configuration was valid if we got here; now the database, loaded and
    /// restored exactly as start-up does it (SQLiteStorage.load, its log replayed, then the store),
    /// but read only. Every row that cannot be loaded is listed with its key or log row. In
    /// cluster mode, etcd instead: reached, and every record under the prefix read
    /// (`EtcdLog.check`), each one obsd cannot read listed with its key.
    private static func check(_ options: CommandLineOptions, environment: DaemonEnvironment, settings: Settings) -> Int32 {
        let configPath = Configuration.configPath(options, environment: environment)
        print("configuration: ok (\(options.config != nil || Configuration.fileExists(configPath) ? configPath : "embedded defaults"))")
        if settings.cluster == .etcd {
            let (lines, ok) = EtcdLog.check(settings.etcd)
            for line in lines { print(line) }
            return ok ? 0 : 1
        }
        guard settings.durability != .memory else {
            print("database: none (durability is memory)")
            return 0
        }
        let path = settings.databasePath
        guard Configuration.fileExists(path) else {
            if let file = try? LogFileStorage.files(in: settings.stateDirectory).first {
                print("database: \(path) is missing but its commit log \(file.path) is there: the database was deleted or moved")
                return 1
            }
            print("database: \(path) does not exist yet; it is created at the first start")
            return 0
        }
        do throws(ObsError) {
            // The database is opened without following symlinks; the state directory may be reached
            // through one (systemd's /var/lib/obsd -> private/obsd), as at start-up.
            let directory = realpath(settings.stateDirectory, nil).map { pointer in
                defer { free(pointer) }
                return String(cString: pointer)
            } ?? settings.stateDirectory
            let storage = try SQLiteStorage(path: directory + "/obsd.db", mode: .check)
            let log = try storage.storedLog()
            // The rows, log rows an older obsd left and the commit log's files are verified and
            // replayed as at start-up.
            let files = try LogFileStorage.check(storage, directory: directory)
            let store = try Store(configuration: storeConfiguration(settings), storage: MemoryStorage(files.state), clock: SystemClock())
            var logged = log.rows == 0 ? "" : "; \(log.rows) log \(log.rows == 1 ? "row" : "rows") (\(log.bytes) bytes) not yet checkpointed, verified"
            if files.files > 0 {
                logged += "; \(files.files) commit log \(files.files == 1 ? "file" : "files") (\(files.frames) \(files.frames == 1 ? "frame" : "frames")) verified"
            }
            if files.torn > 0 {
                logged += "; a torn last frame of \(files.torn) bytes (a crash in the middle of its write, never acknowledged) is dropped at the next start"
            }
            print("database: ok (\(path), revision \(store.rev)\(logged))")
            for displaced in store.displacedAtLoad { print("  " + Daemon.describe(displaced)) }
            return 0
        } catch {
            guard case .array(let problems)? = error.details["problems"] else {
                print("database: \(error.message)")
                return 1
            }
            print("database: \(path) cannot be loaded; \(problems.count) \(problems.count == 1 ? "problem" : "problems"):")
            for case .string(let problem) in problems { print("  \(problem)") }
            return 1
        }
    }
}

extension Configuration {
    static func fileExists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }
}

/// A command line obsd cannot run with, as it goes to stderr (with exit code 64).
func usageMessage(_ error: UsageError) -> String {
    "obsd: \(error.message)\nSee 'obsd --help'.\n"
}
