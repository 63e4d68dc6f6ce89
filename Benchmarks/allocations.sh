#!/usr/bin/env bash
# Heap allocations per operation, counted by valgrind: each shape runs twice, with few and with many
# operations, and the difference in allocations is divided by the difference in operations, so
# building, warming up and shutting down cancel out. Counts, not time: the figures repeat exactly.
#
# Three groups:
# - the reactive engine (`obsbench alloc SHAPE N`): one update of a graph of Observables and
#   Computeds;
# - the daemon's store and sessions without a socket (`obsbench alloc store-...`): a request line
#   through a session, a set watched by 100 sessions, a set through a 50-deep chain of keys, a
#   set read by a 1,000-wide fan of computed keys that one watch sees;
# - the daemon itself (obsd --memory under valgrind, driven over its socket by obsload, the C load
#   generator of Benchmarks/loadgen): sets and gets from one client with 16 in flight over 100
#   keys, a set watched by 10 connections, a set through a 50-deep chain. Everything the daemon
#   does per request is counted: reading, framing, the session, the store, the watches, the
#   connection's output and its writes.
#
# With --instructions it counts instructions (callgrind) instead of allocations, the same way.
# Swift's hashing is made deterministic (SWIFT_DETERMINISTIC_HASHING), so that hash tables probe
# the same way in every run and the counts repeat exactly.
#   bash Benchmarks/allocations.sh [--instructions] [engine|store|daemon]...   (all three by default)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "allocations.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
tool=memcheck
unit="allocs/operation"
if [ "${1:-}" = "--instructions" ]; then
    tool=callgrind
    unit="instructions/operation"
    shift
fi
groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(engine store daemon)
swift build -c release --static-swift-stdlib --product obsbench >/dev/null
swift build -c release --static-swift-stdlib --product obsd >/dev/null
export SWIFT_DETERMINISTIC_HASHING=1
bin=.build/release/obsbench
# valgrind's options for the chosen tool, its report in $1.
options() {
    if [ "$tool" = callgrind ]; then
        echo --tool=callgrind --callgrind-out-file=/dev/null --log-file="$1"
    else
        echo --tool=memcheck --leak-check=no --log-file="$1"
    fi
}
count() {
    if [ "$tool" = callgrind ]; then
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$1"
    else
        sed -n 's/.*total heap usage: \([0-9,]*\) allocs.*/\1/p' "$1" | tr -d ,
    fi
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
allocs() {
    # shellcheck disable=SC2046
    valgrind $(options "$work/probe.log") "$bin" alloc "$1" "$2" >/dev/null
    count "$work/probe.log"
}
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.3f", (b - a) / n }'; }
row() { printf '%-34s | %14s\n' "$1" "$2"; }

row shape "$unit"
row ---------------------------------- --------------
for group in "${groups[@]}"; do
    case "$group" in
    engine)
        for shape in chain diamond fan dynamic control; do
            a=$(allocs "$shape" 1000)
            b=$(allocs "$shape" 11000)
            row "$shape" "$(per "$a" "$b" 10000)"
        done
        ;;
    store)
        for shape in store-request store-fanout store-chain; do
            a=$(allocs "$shape" 1000)
            b=$(allocs "$shape" 6000)
            row "$shape" "$(per "$a" "$b" 5000)"
        done
        # 1,000 computeds per set: fewer sets.
        a=$(allocs store-fan 100)
        b=$(allocs store-fan 600)
        row store-fan "$(per "$a" "$b" 500)"
        ;;
    daemon)
        load=$(bash Benchmarks/loadgen/build.sh)
        # obsd --memory under valgrind: runs `obsload ARGS` against it (several commands separated
        # by `--`), stops it with SIGTERM and prints its count.
        daemon() {
            rm -f "$work/obsd.sock" "$work/valgrind.log"
            # shellcheck disable=SC2046
            valgrind $(options "$work/valgrind.log") .build/release/obsd --memory --socket "$work/obsd.sock" \
                --log-level warn >/dev/null 2>&1 &
            local pid=$!
            for _ in $(seq 1 600); do [ -S "$work/obsd.sock" ] && break; sleep 0.1; done
            local command=()
            for word in "$@" --; do
                if [ "$word" = "--" ]; then
                    "$load" "${command[@]}" --socket "$work/obsd.sock" >/dev/null
                    command=()
                else
                    command+=("$word")
                fi
            done
            kill -TERM "$pid"
            wait "$pid" || true
            count "$work/valgrind.log"
        }
        fill=(requests --op set --clients 1 --depth 16 --total 1000 --keys 100)
        for op in set get; do
            for depth in 1 16; do
                a=$(daemon "${fill[@]}" -- requests --op "$op" --clients 1 --depth "$depth" --total 2000 --keys 100)
                b=$(daemon "${fill[@]}" -- requests --op "$op" --clients 1 --depth "$depth" --total 10000 --keys 100)
                row "daemon $op ($depth in flight)" "$(per "$a" "$b" 8000)"
            done
        done
        a=$(daemon fanout --shape key --watchers 100 --updates 500)
        b=$(daemon fanout --shape key --watchers 100 --updates 2500)
        row "daemon set watched by 100 (per set)" "$(per "$a" "$b" 2000)"
        a=$(daemon fanout --shape chain --updates 500)
        b=$(daemon fanout --shape chain --updates 2500)
        row "daemon set through a 50-deep chain" "$(per "$a" "$b" 2000)"
        ;;
    *)
        echo "allocations.sh: unknown group $group (engine, store, daemon)" >&2
        exit 64
        ;;
    esac
done
