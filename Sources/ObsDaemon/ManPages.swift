import ObsClient

/// obsd(8) and obsd.conf(5), generated from the option table of `--help` and from the setting table
/// the configuration parser uses (with each setting's comment in config/obsd.conf.example), so the
/// pages list exactly what obsd accepts. `make install` writes them (through the `mangen` tool).
public enum ManPages {
    public static var obsd: String {
        var page = Roff.header("obsd", section: 8, version: obsdVersion, manual: "System Administration")
        page += ".SH NAME\nobsd \\- the reactive\\-state daemon\n"
        page += ".SH SYNOPSIS\n.B obsd\n" + Roff.escaped(obsdUsage.dropFirst("obsd ".count).split(whereSeparator: \.isWhitespace)
            .joined(separator: " ")) + "\n"
        page += Roff.section("DESCRIPTION", [
            obsdOverview,
            "Clients (obsctl(1), or any program speaking the protocol) connect to the socket, read and write keys, "
                + "define computed keys and bindings, and watch for changes.",
            "Defaults: the socket is /run/obsd/obsd.sock for root, $XDG_RUNTIME_DIR/obsd/obsd.sock (or "
                + "/tmp/obsd-$UID/obsd.sock) for other users; the state is in /var/lib/obsd for root, $XDG_STATE_HOME/obsd "
                + "(~/.local/state/obsd) for others, or $STATE_DIRECTORY when systemd sets it. Every setting comes from, "
                + "in this order: the command-line flag, the environment, the configuration file (obsd.conf(5)), the default.",
        ])
        page += ".SH OPTIONS\n"
        for option in obsdOptions { page += Roff.tagged(Roff.term(option.names, option.value), option.help) }
        page += ".SH SIGNALS\n"
        page += Roff.tagged("\\fBSIGTERM\\fR, \\fBSIGINT\\fR", "Stop: answer the requests already received, send every client a goodbye "
                            + "event, write what is pending, close the database, remove the socket (unless systemd passed it), exit 0.")
        page += Roff.tagged("\\fBSIGHUP\\fR", "Re-read the configuration file and apply the definitions file again. An invalid "
                            + "file is logged and the running configuration kept.")
        page += ".SH ENVIRONMENT\n"
        for (name, meaning) in [("OBSD_SOCKET", "The socket, when --socket is not given."),
                                ("STATE_DIRECTORY", "The state directory, as systemd's StateDirectory= sets it."),
                                ("XDG_RUNTIME_DIR, XDG_STATE_HOME, XDG_CONFIG_HOME", "Where a user's socket, state and configuration are."),
                                ("LISTEN_FDS, LISTEN_PID", "A listening socket passed by systemd (socket activation), used instead of binding one."),
                                ("NOTIFY_SOCKET, WATCHDOG_USEC", "systemd's readiness and watchdog notifications (Type=notify)."),
                                ("JOURNAL_STREAM", "When set, every log line starts with its syslog priority (<3> error ... <7> debug) for journald.")] {
            page += Roff.tagged("\\fB\(Roff.escaped(name))\\fR", meaning)
        }
        page += ".SH FILES\n"
        page += Roff.tagged("\\fI/etc/obsd/obsd.conf\\fR", "The configuration file for root (obsd.conf(5)); $XDG_CONFIG_HOME/obsd/obsd.conf for other users.")
        page += Roff.tagged("\\fI/var/lib/obsd/obsd.db\\fR", "The SQLite database (in the state directory).")
        page += Roff.tagged("\\fI/run/obsd/obsd.sock\\fR", "The socket, for root.")
        page += ".SH EXIT STATUS\n"
        page += Roff.tagged("\\fB0\\fR", "A clean stop, or --check found everything in order.")
        page += Roff.tagged("\\fB1\\fR", "obsd could not start (the log line says why), or --check found a problem.")
        page += Roff.tagged("\\fB64\\fR", "Usage error.")
        page += Roff.section("SEE ALSO", ["obsctl(1), obsd.conf(5), systemd.socket(5); docs/operations.md in the documentation "
                                           + "(installed under share/doc/obsd)."])
        return page
    }

    /// A setting of obsd.conf.example that the page needs but the example lacks.
    public struct MissingSetting: Error, CustomStringConvertible {
        public let name: String
        public var description: String { "config/obsd.conf.example has no commented block for '\(name)'" }
    }

    /// obsd.conf(5): the file's format (the example's opening comment), then every setting the
    /// parser accepts, with what its value looks like, its comment and its default.
    public static func obsdConf(example: String) throws -> String {
        let blocks = example.components(separatedBy: "\n\n").map { block in
            block.split(separator: "\n").map { String($0.dropFirst().drop { $0 == " " }) }
        }
        var page = Roff.header("obsd.conf", section: 5, version: obsdVersion, manual: "File Formats")
        page += ".SH NAME\nobsd.conf \\- the configuration file of obsd(8)\n"
        page += ".SH SYNOPSIS\n/etc/obsd/obsd.conf (root), $XDG_CONFIG_HOME/obsd/obsd.conf (other users), or obsd \\-\\-config FILE\n"
        let format = (blocks.first ?? []).split(separator: "").map { $0.joined(separator: "\n") }
        page += Roff.section("DESCRIPTION", format)
        page += ".SH SETTINGS\n"
        for spec in ConfigFile.specs {
            guard let block = blocks.first(where: { $0.last?.hasPrefix(spec.name + " = ") == true }) else {
                throw MissingSetting(name: spec.name)
            }
            let text = block.dropLast().joined(separator: "\n") + "\nValue: \(spec.expects). In the example file: \(block.last!)"
            page += Roff.tagged(Roff.term(spec.name), text)
        }
        page += Roff.section("SEE ALSO", ["obsd(8), obsctl(1); config/obsd.conf.example (installed under share/doc/obsd)."])
        return page
    }
}
