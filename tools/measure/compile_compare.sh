#!/usr/bin/env bash
# compile_compare.sh -- two `baton` commands compile the same cases turn
# about, and the fastest of REPEAT (default 7) compiles of each is kept:
# a machine whose load changes slows both alike.  Prints the Markdown
# table of docs/PERFORMANCE.md, "Compiler speed": steps, trace, lower
# (the compiler's own timings) and the whole command's wall time, in ms.
# Usage: tools/measure/compile_compare.sh BEFORE_BATON NOW_BATON
set -u
[ $# -eq 2 ] || { echo "usage: compile_compare.sh BEFORE_BATON NOW_BATON" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
repeat=${REPEAT:-7}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cases=("allreduce_ring 8 1" "allreduce_ring 32 8" "allreduce_ring 64 1" "allreduce_ring 64 8"
       "alltoall_bruck 16 1" "alltoall_bruck 32 1" "alltoall_bruck 64 1" "alltoall_bruck 128 1")
echo "| algorithm | ranks | instances | steps before | steps now | trace before | trace now | lower before | lower now | total before | total now |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in "${cases[@]}"; do
  read -r alg ranks inst <<<"$c"
  params=(--param "ranks=$ranks")
  [ "$alg" = allreduce_ring ] && params+=(--param "instances=$inst")
  declare -A best=() got=()
  for ((k = 0; k < repeat; k++)); do
    for side in 1 2; do
      b=${!side}
      s=$(date +%s%N)
      "$b" compile "$root/algorithms/$alg.lua" "${params[@]}" -o "$tmp/x.xml" 2>"$tmp/e" || { cat "$tmp/e" >&2; exit 1; }
      e=$(date +%s%N)
      t=$(( (e - s) / 100000 ))   # tenths of a ms
      if [ -z "${best[$side]:-}" ] || [ "$t" -lt "${best[$side]}" ]; then
        best[$side]=$t
        got[$side]=$(sed -nE 's/.* ([0-9]+) steps;.*trace ([0-9.]+) ms, lower ([0-9.]+) ms.*/\1 \2 \3/p' "$tmp/e")
      fi
    done
  done
  read -r s1 t1 l1 <<<"${got[1]}"
  read -r s2 t2 l2 <<<"${got[2]}"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d.%d | %d.%d |\n' "$alg" "$ranks" "$inst" "$s1" "$s2" "$t1" "$t2" \
    "$l1" "$l2" $((best[1] / 10)) $((best[1] % 10)) $((best[2] / 10)) $((best[2] % 10))
  unset best got
done
