#!/usr/bin/env bash
# compile_times.sh -- measures `baton compile` on the ring AllReduce (8-64
# ranks x 1-8 instances) and the Bruck AllToAll (16-128 ranks) and prints
# CSV: algorithm,ranks,instances,tbs,steps,trace_ms,lower_ms,verify_ms,runs_ms,total_ms
# verify_ms is ir_check + the race check + the CPU runs (runs_ms); total_ms
# is the whole command's wall time (start, Lua, writing the IR included).
# Each case runs REPEAT times (default 3) and the fastest (by total_ms) is
# printed: other jobs on the machine only ever slow a run down.
# Usage: tools/measure/compile_times.sh [BATON]   (docs/PERFORMANCE.md has the results)
set -euo pipefail
baton=${1:-build/tools/baton}
repeat=${REPEAT:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "algorithm,ranks,instances,tbs,steps,trace_ms,lower_ms,verify_ms,runs_ms,total_ms"
measure() {  # measure NAME INSTANCES SCRIPT PARAMS...: the fastest of $repeat compiles
  local name=$1 inst=$2 script=$3; shift 3
  local params=() best="" best_total=""
  for p in "$@"; do params+=(--param "$p"); done
  for ((k = 0; k < repeat; k++)); do
    local t0 t1 line total
    t0=$(date +%s%N)
    "$baton" compile "$root/algorithms/$script" "${params[@]}" -o "$tmp/out.xml" 2> "$tmp/err"
    t1=$(date +%s%N)
    total=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
    line=$(sed -nE 's/.*on ([0-9]+) ranks, ([0-9]+) thread blocks, ([0-9]+) steps.*trace ([0-9.]+) ms, lower ([0-9.]+) ms, verify ([0-9.]+) ms \(check [0-9.]+, races [0-9.]+, [0-9]+ runs ([0-9.]+)\).*/\1,\2,\3,\4,\5,\6,\7/p' "$tmp/err")
    [ -n "$line" ] || { cat "$tmp/err" >&2; exit 1; }
    local r=${line%%,*} rest=${line#*,}
    if [ -z "$best_total" ] || awk -v a="$total" -v b="$best_total" 'BEGIN { exit !(a < b) }'; then
      best="$name,$r,$inst,$rest,$total"
      best_total=$total
    fi
  done
  echo "$best"
}
for r in 8 16 32 64; do
  for i in 1 2 4 8; do
    measure allreduce_ring "$i" allreduce_ring.lua ranks=$r instances=$i
  done
done
for r in 16 32 64 128; do
  measure alltoall_bruck 1 alltoall_bruck.lua ranks=$r
done
