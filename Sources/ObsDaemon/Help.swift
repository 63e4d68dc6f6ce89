import ObsClient

/// obsd's version, as `--version` prints it and `hello` reports it.
public let obsdVersion = "0.1.0"

/// One option of obsd's command line: `--help` and the obsd(8) man page both list this table.
public struct DaemonOption: Sendable {
    public let names: String
    public let value: String?
    public let help: String
}

/// obsd's options, in the order `--help` lists them.
public let obsdOptions = [
    DaemonOption(names: "--socket", value: "PATH", help: """
        The Unix socket to listen on (default: $OBSD_SOCKET, then the configuration file, then \
        /run/obsd/obsd.sock for root, $XDG_RUNTIME_DIR/obsd/obsd.sock or /tmp/obsd-$UID/obsd.sock).
        """),
    DaemonOption(names: "--state-dir", value: "DIR", help: """
        Where the database lives (default: $STATE_DIRECTORY, then the configuration file, then \
        /var/lib/obsd for root or $XDG_STATE_HOME/obsd).
        """),
    DaemonOption(names: "--memory", value: nil, help: "Keep the state in memory only; nothing is written."),
    DaemonOption(names: "--config", value: "FILE", help: """
        The configuration file (default: /etc/obsd/obsd.conf for root, $XDG_CONFIG_HOME/obsd/obsd.conf \
        otherwise; a missing default is fine).
        """),
    DaemonOption(names: "--durability", value: "MODE", help: """
        normal: a change is written before it is acknowledged; strict: it is also fsynced (default: normal).
        """),
    DaemonOption(names: "--log-level", value: "LEVEL", help: "debug, info, warn or error (default: info)."),
    DaemonOption(names: "--cluster", value: "MODE", help: """
        etcd: share the state with every obsd on the same etcd prefix (cluster mode); none: this host \
        alone (default: none).
        """),
    DaemonOption(names: "--etcd-endpoints", value: "URLS", help: "etcd's client URLs, comma-separated (cluster mode)."),
    DaemonOption(names: "--etcd-prefix", value: "PREFIX", help: "Where obsd's records live in etcd (default: /obsd/)."),
    DaemonOption(names: "--etcd-cacert", value: "FILE", help: "The CA of etcd's certificates (PEM)."),
    DaemonOption(names: "--etcd-cert", value: "FILE", help: "obsd's client certificate for etcd (PEM), with --etcd-key."),
    DaemonOption(names: "--etcd-key", value: "FILE", help: "The key of --etcd-cert (PEM)."),
    DaemonOption(names: "--etcd-user", value: "USER", help: "etcd's user, with a password (--etcd-password or $OBSD_ETCD_PASSWORD)."),
    DaemonOption(names: "--etcd-password", value: "PASSWORD", help: """
        etcd's password (visible to other local users in the process list: prefer $OBSD_ETCD_PASSWORD \
        or the configuration file).
        """),
    DaemonOption(names: "--etcd-api", value: "API", help: """
        grpc: etcd's own API over HTTP/2 (default); json: its JSON gateway over HTTP/1.1, for a path \
        to etcd that carries only HTTP/1.1.
        """),
    DaemonOption(names: "--check", value: nil, help: "Validate the configuration and the database's integrity (in cluster mode: reach etcd and read every record under the prefix), then exit."),
    DaemonOption(names: "--version", value: nil, help: "Print the version and exit."),
    DaemonOption(names: "-h, --help", value: nil, help: "Print this help and exit."),
]

/// What obsd is, for `--help` and the man page (which reflows it).
public let obsdOverview = """
    Serves named keys with JSON values and computed keys to clients on a Unix socket, as
    newline-delimited JSON, and keeps its state in SQLite. With no arguments and no configuration
    file it runs with embedded defaults.
    """

/// The synopsis, as `--help` prints it after `USAGE: `.
public let obsdUsage = """
    obsd [--socket PATH] [--state-dir DIR | --memory] [--config FILE]
                [--durability normal|strict] [--log-level debug|info|warn|error]
                [--cluster etcd --etcd-endpoints URLS [--etcd-prefix PREFIX] [--etcd-cacert FILE]
                [--etcd-cert FILE --etcd-key FILE] [--etcd-user USER] [--etcd-api grpc|json]]
                [--check] [--version] [--help]
    """

/// The text of `obsd --help`, pinned by a test.
public let obsdHelp: String = {
    var text = "OVERVIEW: obsd, the reactive-state daemon\n\n\(obsdOverview)\n\nUSAGE: \(obsdUsage)\n\nOPTIONS:\n"
    let column = 26
    for option in obsdOptions {
        let head = "  " + option.names + (option.value.map { " " + $0 } ?? "")
        // A name too long for its column gets its help on the next line, as obsctl's do.
        let gap = head.count + 2 > column ? "\n" + String(repeating: " ", count: column)
            : String(repeating: " ", count: column - head.count)
        text += head + gap + TextWrap.wrap(option.help, width: 96, indent: column, first: column) + "\n"
    }
    return text
}()
