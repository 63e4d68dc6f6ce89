import ObsClient

/// obsctl(1), generated from the command table that `--help` reads, so the two never disagree.
/// `make install` writes it (through the `mangen` tool).
public enum ManPage {
    public static var obsctl: String {
        var page = Roff.header("obsctl", section: 1, version: obsctlVersion, manual: "User Commands")
        page += ".SH NAME\nobsctl \\- the command\\-line client of obsd\n"
        page += ".SH SYNOPSIS\n.B obsctl\n" + "[\(Roff.term("--socket", "PATH"))] [\(Roff.term("--timeout", "DURATION"))] "
            + "\\fICOMMAND\\fR [\\fIARGS\\fR]\n"
        page += Roff.section("DESCRIPTION", [
            Help.overview,
            "obsctl finds the daemon's socket at --socket PATH, else $OBSD_SOCKET, else /run/obsd/obsd.sock for root, "
                + "else $XDG_RUNTIME_DIR/obsd/obsd.sock, or /tmp/obsd-$UID/obsd.sock when XDG_RUNTIME_DIR is unset: the "
                + "rules obsd follows, so a user's obsctl finds that user's obsd with no options. Global options may come "
                + "before or after the command, as --socket PATH or --socket=PATH.",
        ])
        page += ".SH OPTIONS\n"
        for option in globalOptions { page += Roff.tagged(term(option), option.help) }
        page += Roff.tagged(Roff.term("--version"), "Print obsctl's version and the version of the daemon it reaches, then exit.")
        page += ".SH COMMANDS\n"
        for command in commandTable {
            page += ".SS \(Roff.escaped(Help.usage(command.spec).replacingOccurrences(of: "USAGE: ", with: "")))\n"
            page += Roff.escaped(command.spec.summary) + "\n"
            if let overview = command.spec.overview { page += ".PP\n" + Roff.escaped(overview) + "\n" }
            for argument in command.spec.arguments {
                page += Roff.tagged("\\fI\(Roff.escaped(argument.name))\\fR", argument.help)
            }
            for option in command.spec.options { page += Roff.tagged(term(option), option.help) }
        }
        page += ".SH EXIT STATUS\n"
        for (status, meaning) in [("0", "Success (wait: the expression became true; watch: the count was reached, or --initial-only is done)."),
                                  ("1", "The daemon answered an error; its code and message are on stderr as obsctl: CODE: MESSAGE. "
                                      + "Also: stdout could not be written (a full disk)."),
                                  ("2", "Could not connect (the message tells a missing socket, a path that is not a socket, "
                                      + "nothing listening and permission denied apart), or the connection was lost."),
                                  ("3", "Timed out (--timeout)."),
                                  ("64", "Usage error, including arguments obsctl rejects itself; the message ends See 'obsctl --help'.")] {
            page += Roff.tagged("\\fB\(status)\\fR", meaning)
        }
        page += ".SH ENVIRONMENT\n"
        page += Roff.tagged("\\fBOBSD_SOCKET\\fR", "The daemon's socket, when --socket is not given.")
        page += Roff.tagged("\\fBXDG_RUNTIME_DIR\\fR", "Where a user's daemon has its socket (obsd/obsd.sock inside it).")
        page += Roff.section("SEE ALSO", ["obsd(8), obsd.conf(5); docs/cli.md in the documentation (installed under share/doc/obsd)."])
        return page
    }

    private static func term(_ option: OptionSpec) -> String {
        Roff.term(option.names.joined(separator: ", "), option.value)
    }
}
