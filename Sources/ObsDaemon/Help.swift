/// obsd's version, as `--version` prints it and `hello` reports it.
public let obsdVersion = "0.1.0"

/// The text of `obsd --help`, pinned by a test.
public let obsdHelp = """
    OVERVIEW: obsd, the reactive-state daemon

    Serves named keys with JSON values and computed keys to clients on a Unix socket, as
    newline-delimited JSON, and keeps its state in SQLite. With no arguments and no configuration
    file it runs with embedded defaults.

    USAGE: obsd [--socket PATH] [--state-dir DIR | --memory] [--config FILE]
                [--durability normal|strict] [--log-level debug|info|warn|error]
                [--check] [--version] [--help]

    OPTIONS:
      --socket PATH           The Unix socket to listen on (default: $OBSD_SOCKET, then the
                              configuration file, then /run/obsd/obsd.sock for root,
                              $XDG_RUNTIME_DIR/obsd/obsd.sock or /tmp/obsd-$UID/obsd.sock).
      --state-dir DIR         Where the database lives (default: $STATE_DIRECTORY, then the
                              configuration file, then /var/lib/obsd for root or
                              $XDG_STATE_HOME/obsd).
      --memory                Keep the state in memory only; nothing is written.
      --config FILE           The configuration file (default: /etc/obsd/obsd.conf for root,
                              $XDG_CONFIG_HOME/obsd/obsd.conf otherwise; a missing default is fine).
      --durability MODE       normal: a change is written before it is acknowledged; strict: it is
                              also fsynced (default: normal).
      --log-level LEVEL       debug, info, warn or error (default: info).
      --check                 Validate the configuration and the database's integrity, then exit.
      --version               Print the version and exit.
      -h, --help              Print this help and exit.

    """
