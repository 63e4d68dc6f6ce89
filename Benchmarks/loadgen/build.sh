#!/usr/bin/env bash
# Builds obsload, the C load generator (Benchmarks/loadgen/obsload.c), into .build/obsload.
#   bash Benchmarks/loadgen/build.sh        # prints the binary's path
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .build
cc -O2 -Wall -Wextra -o .build/obsload Benchmarks/loadgen/obsload.c
echo "$PWD/.build/obsload"
