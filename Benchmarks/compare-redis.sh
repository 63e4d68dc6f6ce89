#!/usr/bin/env bash
# obsd against redis-server on this machine: installs redis-server (and SQLite's headers for the
# build) from Debian when missing, builds obsd and obsbench in release mode, and runs
# `obsbench redis`, which starts both servers in temporary directories, drives them over their
# Unix sockets, prints the table and writes the same as JSON. About three minutes. The load
# generator runs on CPU 0 and the servers on CPU 1 (taskset; `--pin none` to turn it off).
#   bash Benchmarks/compare-redis.sh [--json FILE] [--runs N] [--seconds S] [--only GROUPS] [--client c]
# With no --json the JSON goes to .build/compare-redis.json. `--client c` drives the request and
# fan-out rows with obsload, the C load generator (Benchmarks/loadgen), built here with cc.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
[ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "compare-redis.sh: missing Debian packages: ${missing[*]} (install them as root, or run this as root)" >&2
        exit 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade "${missing[@]}"
fi

# Built as `make install` builds them (the Swift runtime and Foundation linked in), so that the
# daemon measured is the one users install.
swift build -c release --static-swift-stdlib --product obsd >/dev/null
swift build -c release --static-swift-stdlib --product obsbench >/dev/null
args=()
while [ $# -gt 0 ]; do
    if [ "$1" = "--client" ] && [ "${2:-}" = "c" ]; then
        args+=(--client "$(bash Benchmarks/loadgen/build.sh)")
        shift 2
    else
        args+=("$1")
        shift
    fi
done
[[ " ${args[*]} " == *" --json "* ]] || args+=(--json .build/compare-redis.json)
# The 1,000-watcher rows hold about 2,000 connections open.
ulimit -n 8192 2>/dev/null || true
exec .build/release/obsbench redis "${args[@]}"
