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

    /// `--check`: the configuration was valid if we got here; now the database's integrity.
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
            print("database: \(path) does not exist yet; it is created at the first start")
            return 0
        }
        do throws(ObsError) {
            let problems = try SQLiteStorage.check(path: path)
            if problems.isEmpty {
                print("database: ok (\(path))")
                return 0
            }
            print("database: \(path) failed its integrity check:")
            for problem in problems { print("  \(problem)") }
            return 1
        } catch {
            print("database: \(error.message)")
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
