#!/usr/bin/env bash
# gpu suite: compiles the fused programs of the algorithm library for RANKS
# ranks and runs them through tests/gpu_fused.
# Usage: gpu_fused.sh BATON GPU_FUSED ALGORITHMS_DIR RANKS [gpu_fused options]
set -u
baton=$1 runner=$2 algs=$3 ranks=$4; shift 4
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Without the GPUs the test needs, it skips before compiling anything.
"$runner" --ranks "$ranks" "$@" --probe
case $? in 0) ;; 77) exit 0 ;; *) exit 1 ;; esac
if ! msg=$("$(dirname "$0")/../tools/measure/gpu_prep.sh" --fused "$baton" "$algs" - "$ranks" "$tmp" 2>&1); then
  echo "1..1"; echo "not ok 1 - compiling the fused programs for $ranks ranks"; echo "$msg" | sed 's/^/#   /'; exit 1
fi
"$runner" --ranks "$ranks" --dir "$tmp/fused" "$@"
