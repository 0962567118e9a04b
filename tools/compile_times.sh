#!/usr/bin/env bash
# compile_times.sh -- measures `baton compile` on the ring AllReduce for a
# range of sizes and prints CSV: ranks,instances,tbs,steps,trace_ms,lower_ms,verify_ms
# Usage: tools/compile_times.sh [BATON]   (docs/PERFORMANCE.md has the results)
set -euo pipefail
baton=${1:-build/tools/baton}
root=$(cd "$(dirname "$0")/.." && pwd)
echo "ranks,instances,tbs,steps,trace_ms,lower_ms,verify_ms"
for r in 8 16 32 64; do
  for i in 1 2 4 8; do
    "$baton" compile "$root/algorithms/allreduce_ring.lua" --param ranks=$r --param instances=$i -o /dev/null 2>&1 |
      sed -nE 's/.*on ([0-9]+) ranks, ([0-9]+) thread blocks, ([0-9]+) steps.*trace ([0-9.]+) ms, lower ([0-9.]+) ms, verify ([0-9.]+) ms.*/\1,'$i',\2,\3,\4,\5,\6/p'
  done
done
