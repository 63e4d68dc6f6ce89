#!/usr/bin/env bash
# Heap allocations per update of the reactive engine, counted by valgrind: each shape runs twice,
# with few and with many updates, and the difference in allocations is divided by the difference
# in updates, so building the graph and warming up cancel out. Instruction counts, not time: the
# figures repeat exactly.
#   bash Benchmarks/allocations.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "allocations.sh: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
swift build -c release --product obsbench >/dev/null
bin=.build/release/obsbench
few=1000
many=11000
allocs() {
    valgrind --tool=memcheck --leak-check=no "$bin" alloc "$1" "$2" 2>&1 \
        | sed -n 's/.*total heap usage: \([0-9,]*\) allocs.*/\1/p' | tr -d ,
}
printf '%-10s | %14s\n' shape "allocs/update"
printf '%-10s | %14s\n' ---------- --------------
for shape in chain diamond fan dynamic control; do
    a=$(allocs "$shape" "$few")
    b=$(allocs "$shape" "$many")
    printf '%-10s | %14s\n' "$shape" "$(awk -v a="$a" -v b="$b" -v n=$((many - few)) 'BEGIN { printf "%.3f", (b - a) / n }')"
done
