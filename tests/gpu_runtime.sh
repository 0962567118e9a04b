#!/usr/bin/env bash
# gpu suite: compiles the algorithm library for RANKS ranks, adds the MSCCL
# corpus, and runs every algorithm on RANKS GPUs through tests/gpu_runtime.
# Usage: gpu_runtime.sh BATON GPU_RUNTIME ALGORITHMS_DIR CORPUS_DIR RANKS [gpu_runtime options]
set -u
baton=$1 runner=$2 algs=$3 corpus=$4 ranks=$5; shift 5
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Without the GPUs the test needs, it skips before compiling anything.
"$runner" --ranks "$ranks" "$@" --probe
case $? in 0) ;; 77) exit 0 ;; *) exit 1 ;; esac
if ! msg=$("$(dirname "$0")/../tools/measure/gpu_prep.sh" "$baton" "$algs" "$corpus" "$ranks" "$tmp" 2>&1); then
  echo "1..1"; echo "not ok 1 - compiling the library for $ranks ranks"; echo "$msg" | sed 's/^/#   /'; exit 1
fi
"$runner" --ranks "$ranks" --dir "$tmp" "$@"
