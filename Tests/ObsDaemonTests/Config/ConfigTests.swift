import XCTest
@testable import ObsDaemon

final class ConfigValueTests: XCTestCase {
    func test_durations_acceptEveryUnitAndBareSeconds() {
        XCTAssertEqual(ConfigValues.duration("250ms"), 0.25)
        XCTAssertEqual(ConfigValues.duration("5s"), 5)
        XCTAssertEqual(ConfigValues.duration("2m"), 120)
        XCTAssertEqual(ConfigValues.duration("1h"), 3600)
        XCTAssertEqual(ConfigValues.duration("60"), 60)
        XCTAssertEqual(ConfigValues.duration("1.5"), 1.5)
        XCTAssertEqual(ConfigValues.duration("0.5s"), 0.5)
    }

    func test_durations_rejectEverythingElse() {
        for text in ["", "s", "ms", "-5s", "5 s", "5d", "1e3", "abc", ".5", "5.", "5sec", "+1"] {
            XCTAssertNil(ConfigValues.duration(text), text)
        }
    }

    func test_byteCounts_acceptBinarySuffixes() {
        XCTAssertEqual(ConfigValues.byteCount("1048576"), 1 << 20)
        XCTAssertEqual(ConfigValues.byteCount("64K"), 64 << 10)
        XCTAssertEqual(ConfigValues.byteCount("64KiB"), 64 << 10)
        XCTAssertEqual(ConfigValues.byteCount("1M"), 1 << 20)
        XCTAssertEqual(ConfigValues.byteCount("8MiB"), 8 << 20)
        XCTAssertEqual(ConfigValues.byteCount("2G"), 2 << 30)
        for text in ["", "0", "-1", "1.5M", "M", "1 M", "1T", "99999999999999999999", "9999999999999G"] {
            XCTAssertNil(ConfigValues.byteCount(text), text)
        }
    }

    func test_modes_areOctalPermissionBits() {
        XCTAssertEqual(ConfigValues.mode("0660"), 0o660)
        XCTAssertEqual(ConfigValues.mode("600"), 0o600)
        XCTAssertEqual(ConfigValues.mode("0777"), 0o777)
        for text in ["", "0800", "1777", "rw", "06600", "-600"] {
            XCTAssertNil(ConfigValues.mode(text), text)
        }
    }

    func test_allow_parsesUsersAndGroupsWithAccess() {
        XCTAssertEqual(ConfigValues.allow("user:alice:write, group:status:read"),
                       [AllowRule(.user("alice"), .write), AllowRule(.group("status"), .read)])
        XCTAssertEqual(ConfigValues.allow("user:1001:read"), [AllowRule(.user("1001"), .read)])
        for text in ["", "alice:write", "user:alice", "user::read", "user:alice:admin", "host:x:read",
                     "user:alice:write,", "user:alice:write:extra"] {
            XCTAssertNil(ConfigValues.allow(text), text)
        }
    }
}

final class ConfigFileTests: XCTestCase {
    private func settings(_ text: String, path: String = "/etc/obsd/obsd.conf") throws -> Settings {
        var settings = Settings(socket: "/default.sock", stateDirectory: "/default-state")
        try ConfigFile.apply(text, path: path, to: &settings)
        return settings
    }

    private func assertError(_ text: String, _ expected: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try settings(text), file: file, line: line) { error in
            XCTAssertEqual("\(error)", expected, file: file, line: line)
        }
    }

    func test_everySetting_isApplied() throws {
        let result = try settings("""
            # a full file
            socket = /run/x/obsd.sock
            socket_mode = 0660
            socket_group = status
            state_dir = /var/lib/x
            durability = strict
            log_level = debug
            allow = user:alice:write, group:status:read
            definitions = /etc/obsd/defs.obs
            max_line_bytes = 2M
            max_json_depth = 64
            max_value_bytes = 512K
            max_expression_bytes = 1024
            max_connections = 10
            max_watches = 20
            output_buffer_bytes = 16MiB
            client_timeout = 250ms
            history = 500
            history_bytes = 32M
            max_restore_bytes = 8M
            cluster = etcd
            etcd_endpoints = https://e1:2379,https://e2:2379
            etcd_prefix = /fleet/
            etcd_cacert = /etc/obsd/ca.pem
            etcd_cert = /etc/obsd/c.pem
            etcd_key = /etc/obsd/k.pem
            etcd_user = obsd
            etcd_password = pw
            etcd_timeout = 2s
            ephemeral_ttl = 30s
            etcd_api = json
            """)
        var expected = Settings(socket: "/run/x/obsd.sock", stateDirectory: "/var/lib/x")
        expected.socketMode = 0o660
        expected.socketGroup = "status"
        expected.durability = .strict
        expected.logLevel = .debug
        expected.allow = [AllowRule(.user("alice"), .write), AllowRule(.group("status"), .read)]
        expected.definitions = "/etc/obsd/defs.obs"
        expected.limits.maxLineBytes = 2 << 20
        expected.limits.maxJSONDepth = 64
        expected.limits.maxValueBytes = 512 << 10
        expected.limits.maxExpressionBytes = 1024
        expected.limits.maxConnections = 10
        expected.limits.maxWatches = 20
        expected.limits.outputBufferBytes = 16 << 20
        expected.limits.clientTimeout = 0.25
        expected.limits.history = 500
        expected.limits.historyBytes = 32 << 20
        expected.limits.maxRestoreBytes = 8 << 20
        expected.cluster = .etcd
        expected.etcd.endpoints = ["https://e1:2379", "https://e2:2379"]
        expected.etcd.prefix = "/fleet/"
        expected.etcd.caFile = "/etc/obsd/ca.pem"
        expected.etcd.certFile = "/etc/obsd/c.pem"
        expected.etcd.keyFile = "/etc/obsd/k.pem"
        expected.etcd.user = "obsd"
        expected.etcd.password = "pw"
        expected.etcd.timeout = 2
        expected.etcd.ephemeralTTL = 30
        expected.etcd.api = .json
        XCTAssertEqual(result, expected)
        XCTAssertEqual(ConfigFile.specs.count, 30, "a new setting needs a line in this test and in obsd.conf.example")
    }

    func test_defaults_matchModelLimits() {
        let limits = Limits()
        XCTAssertEqual(limits.maxLineBytes, 1_048_576)
        XCTAssertEqual(limits.maxJSONDepth, 128)
        XCTAssertEqual(limits.maxValueBytes, 1_048_576)
        XCTAssertEqual(limits.maxExpressionBytes, 65_536)
        XCTAssertEqual(limits.maxConnections, 1024)
        XCTAssertEqual(limits.maxWatches, 1024)
        XCTAssertEqual(limits.outputBufferBytes, 8_388_608)
        XCTAssertEqual(limits.clientTimeout, 60)
        XCTAssertEqual(limits.history, 10_000)
        XCTAssertEqual(limits.historyBytes, 67_108_864)
    }

    func test_commentsBlankLinesSpacesAndCRLF_areAccepted() throws {
        let result = try settings("# comment\n\n   \n\tlog_level=warn   # trailing comment\r\n  # indented comment\nsocket = /a#b.sock\n")
        XCTAssertEqual(result.logLevel, .warn)
        XCTAssertEqual(result.socket, "/a#b.sock")
    }

    /// A file saved with CRLF line ends throughout (Windows editors): every line is a setting.
    /// Swift takes "\r\n" as one Character, so a split at "\n" saw one line (after a comment, the
    /// whole file was the comment, and every setting was ignored without a word); the line
    /// numbers of errors are those of the file.
    func test_aFileWithCRLFLineEnds_appliesEverySetting() throws {
        let result = try settings("# conf\r\nmax_line_bytes = 4096\r\nlog_level = warn\r\n")
        XCTAssertEqual(result.limits.maxLineBytes, 4096)
        XCTAssertEqual(result.logLevel, .warn)
        assertError("log_level = warn\r\n\r\nsockett = /x\r\n", "/etc/obsd/obsd.conf:3: unknown setting 'sockett'")
    }

    func test_unknownSetting_isRejectedWithItsLine() {
        assertError("log_level = info\n\nsockett = /x", "/etc/obsd/obsd.conf:3: unknown setting 'sockett'")
    }

    func test_badValues_areRejectedWithTheirLine() {
        assertError("durability = fast", "/etc/obsd/obsd.conf:1: bad value 'fast' for durability: expected normal, strict or memory")
        assertError("\nmax_connections = lots", "/etc/obsd/obsd.conf:2: bad value 'lots' for max_connections: expected a whole number of at least 1")
        assertError("client_timeout = 5d", "/etc/obsd/obsd.conf:1: bad value '5d' for client_timeout: expected a duration such as 250ms, 5s, 2m, 1h or 60")
        assertError("socket_mode = 999", "/etc/obsd/obsd.conf:1: bad value '999' for socket_mode: expected octal permission bits such as 0660")
        assertError("socket =", "/etc/obsd/obsd.conf:1: bad value '' for socket: expected a path")
        assertError("etcd_prefix =", "/etc/obsd/obsd.conf:1: bad value '' for etcd_prefix: expected a key prefix such as /obsd/")
        assertError("log_level = info\nallow = user:bob", "/etc/obsd/obsd.conf:2: bad value 'user:bob' for allow: expected user:NAME:read|write or group:NAME:read|write, comma-separated")
    }

    func test_lineWithoutEquals_isRejected() {
        assertError("log_level info", "/etc/obsd/obsd.conf:1: expected 'name = value', got 'log_level info'")
    }

    func test_repeatedSetting_isRejected_butAllowAddsUp() throws {
        assertError("history = 5\nhistory = 6", "/etc/obsd/obsd.conf:2: 'history' is already set on line 1")
        let result = try settings("allow = user:a:read\nallow = group:b:write")
        XCTAssertEqual(result.allow, [AllowRule(.user("a"), .read), AllowRule(.group("b"), .write)])
    }

    func test_relativePaths_startAtTheFilesDirectory() throws {
        let result = try settings("state_dir = state\ndefinitions = defs.obs\nsocket = run/obsd.sock", path: "/etc/obsd/obsd.conf")
        XCTAssertEqual(result.stateDirectory, "/etc/obsd/state")
        XCTAssertEqual(result.definitions, "/etc/obsd/defs.obs")
        XCTAssertEqual(result.socket, "/etc/obsd/run/obsd.sock")
    }
}

final class ConfigurationTests: XCTestCase {
    private let user = DaemonEnvironment(variables: ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000"], uid: 1000)

    private func resolve(_ arguments: [String], _ environment: DaemonEnvironment, files: [String: String] = [:]) throws -> Settings {
        let options = try CommandLineOptions.parse(arguments)
        return try Configuration.resolve(options, environment: environment) { files[$0] }
    }

    func test_defaults_forRoot() throws {
        let root = DaemonEnvironment(variables: ["XDG_RUNTIME_DIR": "/ignored"], uid: 0)
        let settings = try resolve([], root)
        XCTAssertEqual(settings.socket, "/run/obsd/obsd.sock")
        XCTAssertEqual(settings.stateDirectory, "/var/lib/obsd")
        XCTAssertEqual(root.defaultConfigFile, "/etc/obsd/obsd.conf")
        XCTAssertEqual(settings.durability, .normal)
        XCTAssertEqual(settings.logLevel, .info)
        XCTAssertEqual(settings.socketMode, 0o600)
    }

    func test_defaults_forUser_followXDG() throws {
        let xdg = DaemonEnvironment(variables: [
            "HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/s", "XDG_CONFIG_HOME": "/c",
        ], uid: 1000)
        let settings = try resolve([], xdg)
        XCTAssertEqual(settings.socket, "/run/user/1000/obsd/obsd.sock")
        XCTAssertEqual(settings.stateDirectory, "/s/obsd")
        XCTAssertEqual(xdg.defaultConfigFile, "/c/obsd/obsd.conf")
    }

    func test_defaults_forUser_withoutXDG() throws {
        let bare = DaemonEnvironment(variables: ["HOME": "/home/u", "XDG_RUNTIME_DIR": ""], uid: 1000)
        let settings = try resolve([], bare)
        XCTAssertEqual(settings.socket, "/tmp/obsd-1000/obsd.sock")
        XCTAssertEqual(settings.stateDirectory, "/home/u/.local/state/obsd")
        XCTAssertEqual(bare.defaultConfigFile, "/home/u/.config/obsd/obsd.conf")
    }

    func test_precedence_flagThenEnvironmentThenFileThenDefault() throws {
        let file = "socket = /file.sock\nstate_dir = /file-state\nlog_level = warn\ndurability = strict"
        var environment = user
        let files = ["/home/u/.config/obsd/obsd.conf": file]

        var settings = try resolve([], environment, files: files)
        XCTAssertEqual(settings.socket, "/file.sock")
        XCTAssertEqual(settings.stateDirectory, "/file-state")

        environment.variables["OBSD_SOCKET"] = "/env.sock"
        environment.variables["STATE_DIRECTORY"] = "/env-state:/second"
        settings = try resolve([], environment, files: files)
        XCTAssertEqual(settings.socket, "/env.sock")
        XCTAssertEqual(settings.stateDirectory, "/env-state")

        settings = try resolve(["--socket", "/flag.sock", "--state-dir=/flag-state", "--log-level", "error",
                                "--durability", "normal"], environment, files: files)
        XCTAssertEqual(settings.socket, "/flag.sock")
        XCTAssertEqual(settings.stateDirectory, "/flag-state")
        XCTAssertEqual(settings.logLevel, .error)
        XCTAssertEqual(settings.durability, .normal)

        settings = try resolve(["--memory"], environment, files: files)
        XCTAssertEqual(settings.durability, .memory)
    }

    /// The user's password is meant to be in the environment, so a missing one says where to put it.
    func test_etcdUserWithoutAPassword_namesWhereThePasswordGoes() throws {
        let file = "cluster = etcd\netcd_endpoints = https://etcd1:2379\netcd_user = obsd"
        XCTAssertThrowsError(try resolve(["--config", "/tmp/my.conf"], user, files: ["/tmp/my.conf": file])) { error in
            XCTAssertEqual("\(error)", "etcd_user obsd needs a password: OBSD_ETCD_PASSWORD in obsd's environment, etcd_password or --etcd-password")
        }
        var environment = user
        environment.variables["OBSD_ETCD_PASSWORD"] = "secret"
        XCTAssertEqual(try resolve(["--config", "/tmp/my.conf"], environment, files: ["/tmp/my.conf": file]).etcd.password, "secret")
        let noUser = "cluster = etcd\netcd_endpoints = https://etcd1:2379"
        XCTAssertThrowsError(try resolve(["--config", "/tmp/my.conf"], environment, files: ["/tmp/my.conf": noUser])) { error in
            XCTAssertEqual("\(error)", "an etcd password (etcd_password, --etcd-password or OBSD_ETCD_PASSWORD) needs etcd_user")
        }
    }

    func test_configFlag_readsThatFile_andAMissingOneIsAnError() throws {
        let settings = try resolve(["--config", "/tmp/my.conf"], user, files: ["/tmp/my.conf": "history = 7"])
        XCTAssertEqual(settings.limits.history, 7)
        XCTAssertThrowsError(try resolve(["--config", "/nope.conf"], user)) { error in
            XCTAssertEqual("\(error)", "configuration file /nope.conf does not exist")
        }
    }

    func test_readFile_distinguishesMissingFromUnreadable() throws {
        XCTAssertNil(try Configuration.readFile("/nonexistent/obsd.conf"))
        XCTAssertThrowsError(try Configuration.readFile("/"))
    }
}

final class CommandLineTests: XCTestCase {
    private func usageError(_ arguments: [String]) -> String? {
        do {
            _ = try CommandLineOptions.parse(arguments)
            return nil
        } catch {
            return String(usageMessage(error).dropLast())
        }
    }

    func test_everyFlag_isParsed() throws {
        let options = try CommandLineOptions.parse([
            "--socket", "/s", "--state-dir", "/d", "--config=/c", "--durability", "strict", "--log-level=debug",
            "--check", "--version", "-h",
        ])
        XCTAssertEqual(options.socket, "/s")
        XCTAssertEqual(options.stateDirectory, "/d")
        XCTAssertEqual(options.config, "/c")
        XCTAssertEqual(options.durability, .strict)
        XCTAssertEqual(options.logLevel, .debug)
        XCTAssertTrue(options.check && options.version && options.help)
    }

    func test_usageErrors_endWithThePointerToHelp() {
        let cases: [([String], String)] = [
            (["--bogus"], "unknown option '--bogus'"),
            (["extra"], "unexpected argument 'extra'"),
            (["--socket"], "--socket needs a value"),
            (["--socket="], "--socket needs a non-empty value"),
            (["--durability", "memory"], "--durability must be normal or strict (use --memory for memory), not 'memory'"),
            (["--log-level", "loud"], "--log-level must be debug, info, warn or error, not 'loud'"),
            (["--memory", "--state-dir", "/x"], "--state-dir and --memory cannot be used together"),
            (["--memory", "--durability", "strict"], "--durability and --memory cannot be used together"),
            (["--check=yes"], "--check takes no value"),
        ]
        for (arguments, message) in cases {
            XCTAssertEqual(usageError(arguments), "obsd: \(message)\nSee 'obsd --help'.", "\(arguments)")
        }
    }

    func test_help_hasFixedSectionsAndEveryFlag() {
        let sections = obsdHelp.split(separator: "\n").filter { $0.first?.isUppercase == true && $0.contains(":") }
            .map { String($0.prefix { $0 != ":" }) }
        XCTAssertEqual(sections, ["OVERVIEW", "USAGE", "OPTIONS"])
        for flag in ["--socket", "--state-dir", "--memory", "--config", "--durability", "--log-level", "--check",
                     "--version", "--help"] {
            XCTAssertTrue(obsdHelp.contains(flag), flag)
        }
    }

    /// Every option's name stands apart from its help: two spaces or a line of its own, however
    /// long the name (`--etcd-password PASSWORD` once ran into its text).
    func test_help_everyOptionNameIsSetApartFromItsHelp() {
        let options = obsdHelp.components(separatedBy: "OPTIONS:\n")[1].split(separator: "\n", omittingEmptySubsequences: false)
        let heads = options.filter { $0.hasPrefix("  -") }
        XCTAssertGreaterThan(heads.count, 10)
        for line in heads {
            let name = line.dropFirst(2).prefix { $0 != " " }
            let rest = line.dropFirst(2 + name.count)
            // NAME [VALUE] then at least two spaces, or nothing (the help on the next line).
            let afterValue = rest.hasPrefix(" ") && !rest.hasPrefix("  ")
                ? rest.dropFirst().drop { $0 != " " } : rest
            XCTAssertTrue(afterValue.isEmpty || afterValue.hasPrefix("  "), "\(line)")
        }
    }
}

final class ShippedConfigTests: XCTestCase {
    private var repository: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// config/obsd.conf.example names every setting with its default: uncommented, it parses to
    /// exactly the defaults (the paths aside, which depend on the user).
    func test_exampleConfig_listsEverySettingWithItsDefault() throws {
        let text = try String(contentsOfFile: repository + "/config/obsd.conf.example", encoding: .utf8)
        var named = Set<String>()
        var uncommented: [String] = []
        for line in text.split(separator: "\n") where line.hasPrefix("# ") {
            let setting = String(line.dropFirst(2))
            let name = String(setting.prefix { $0 != " " })
            // A commented-out setting is `# name = value` with a lowercase snake_case name.
            guard setting.dropFirst(name.count).hasPrefix(" = "),
                  name.allSatisfy({ $0 == "_" || ($0.isASCII && $0.isLowercase) }) else { continue }
            named.insert(name)
            if !["socket", "state_dir", "socket_group", "allow", "definitions", "etcd_endpoints", "etcd_cacert", "etcd_cert", "etcd_key",
                  "etcd_user", "etcd_password"].contains(name) {
                uncommented.append(setting)
            }
        }
        XCTAssertEqual(named, Set(ConfigFile.specs.map(\.name)))
        var settings = Settings(socket: "/s", stateDirectory: "/d")
        try ConfigFile.apply(uncommented.joined(separator: "\n"), path: "/etc/obsd/obsd.conf", to: &settings)
        XCTAssertEqual(settings, Settings(socket: "/s", stateDirectory: "/d"))
    }
}

final class ClusterConfigTests: XCTestCase {
    private let environment = DaemonEnvironment(variables: ["OBSD_ETCD_PASSWORD": "from-env", "HOME": "/home/u"], uid: 1000)

    private func resolve(_ arguments: [String], file: String? = nil) throws(ConfigError) -> Settings {
        let options: CommandLineOptions
        do {
            options = try CommandLineOptions.parse(arguments)
        } catch {
            throw ConfigError(error.message)
        }
        return try Configuration.resolve(options, environment: environment) { _ throws(ConfigError) in file }
    }

    func test_clusterSettings_fromTheFileAndTheCommandLine_flagsWin() throws {
        let settings = try resolve(["--etcd-prefix", "/fleet/"], file: """
            cluster = etcd
            etcd_endpoints = https://a:2379, https://b:2379
            etcd_prefix = /obsd/
            etcd_cert = client.pem
            etcd_key = client-key.pem
            etcd_user = obsd
            etcd_timeout = 2s
            ephemeral_ttl = 3s
            """)
        XCTAssertEqual(settings.cluster, .etcd)
        XCTAssertEqual(settings.etcd.endpoints, ["https://a:2379", "https://b:2379"])
        XCTAssertEqual(settings.etcd.prefix, "/fleet/")
        XCTAssertEqual(settings.etcd.certFile, "/home/u/.config/obsd/client.pem", "relative to the file")
        XCTAssertEqual(settings.etcd.password, "from-env", "the environment keeps the password out of files and process lists")
        XCTAssertEqual(settings.etcd.timeout, 2)
        XCTAssertEqual(settings.etcd.ephemeralTTL, 3)
        XCTAssertEqual(settings.etcd.api, .grpc, "etcd's gRPC API unless told")
        XCTAssertEqual(try resolve(["--etcd-api", "grpc"], file: "etcd_api = json").etcd.api, .grpc, "the flag wins")
        XCTAssertEqual(try resolve(["--etcd-api", "json"]).etcd.api, .json)
    }

    func test_clusterSettings_thatCannotWork_areRefused() {
        XCTAssertThrowsError(try resolve(["--cluster", "etcd"])) { XCTAssertTrue("\($0)".contains("etcd_endpoints"), "\($0)") }
        XCTAssertThrowsError(try resolve(["--cluster", "etcd", "--etcd-endpoints", "https://a:2379", "--etcd-cert", "c.pem"]))
        XCTAssertThrowsError(try resolve(["--cluster", "raft"]))
        XCTAssertThrowsError(try resolve(["--etcd-endpoints", "a:2379"]))
        XCTAssertThrowsError(try resolve([], file: "ephemeral_ttl = 1s"))
        // Durations the timers cannot count (an etcd_timeout past 24.8 days trapped at start).
        for (line, bound) in [("etcd_timeout = 25d", "from 1ms to 1h"), ("etcd_timeout = 3601", "from 1ms to 1h"), ("etcd_timeout = 0.0001", "from 1ms to 1h"),
                              ("ephemeral_ttl = 1000000000000", "from 2s to 24h"), ("ephemeral_ttl = 25h", "from 2s to 24h")] {
            XCTAssertThrowsError(try resolve([], file: line), line) { XCTAssertTrue("\($0)".contains(bound), "\($0)") }
        }
        XCTAssertEqual(try resolve([], file: "etcd_timeout = 1h\nephemeral_ttl = 24h").etcd.timeout, 3600)
        XCTAssertThrowsError(try resolve(["--etcd-api", "rest"]))
        XCTAssertThrowsError(try resolve([], file: "etcd_api = http"))
        XCTAssertEqual(try resolve([]).cluster, ClusterMode.none)
    }
}

final class StoreConfigurationMappingTests: XCTestCase {
    func test_everyStoreLimit_comesFromTheSettings() {
        var settings = Settings(socket: "/s", stateDirectory: "/d")
        settings.durability = .strict
        settings.limits.maxLineBytes = 11
        settings.limits.maxJSONDepth = 12
        settings.limits.maxValueBytes = 13
        settings.limits.maxExpressionBytes = 14
        settings.limits.maxWatches = 15
        settings.limits.outputBufferBytes = 16
        settings.limits.history = 17
        settings.limits.historyBytes = 18
        let configuration = storeConfiguration(settings)
        XCTAssertEqual(configuration.maxLineBytes, 11)
        XCTAssertEqual(configuration.maxJSONDepth, 12)
        XCTAssertEqual(configuration.maxValueBytes, 13)
        XCTAssertEqual(configuration.maxExpressionBytes, 14)
        XCTAssertEqual(configuration.maxWatchesPerConnection, 15)
        XCTAssertEqual(configuration.maxOutputBytes, 16)
        XCTAssertEqual(configuration.historyRevisions, 17)
        XCTAssertEqual(configuration.historyBytes, 18)
        XCTAssertEqual(configuration.durability, "strict")
        XCTAssertEqual(configuration.serverVersion, obsdVersion)
    }
}
