#!/usr/bin/env bash
# gpu_prep.sh -- compiles the algorithm library for RANKS ranks into OUTDIR
# (and copies IR files from CORPUS there), ready for BATON_ALGO_DIR or the
# GPU tests.  Run it where Lua is (the GPU machines have none) and carry
# OUTDIR.   Usage: tools/gpu_prep.sh BATON ALGORITHMS_DIR CORPUS_DIR RANKS OUTDIR
set -eu
baton=$1 algs=$2 corpus=$3 ranks=$4 out=$5
mkdir -p "$out"
compile() {  # compile NAME SCRIPT PARAMS...
  local name=$1 script=$2; shift 2
  local params=()
  for p in "$@"; do params+=(--param "$p"); done
  "$baton" compile -q "$algs/$script" --param ranks="$ranks" "${params[@]}" -o "$out/${name}_${ranks}r.xml"
}
compile allreduce_ring allreduce_ring.lua
compile allreduce_ring_2ch allreduce_ring.lua channels=2
compile allreduce_ring_2inst allreduce_ring.lua instances=2
compile allreduce_allpairs1 allreduce_allpairs.lua shot=1
compile allreduce_allpairs2 allreduce_allpairs.lua shot=2
compile allgather_ring allgather_ring.lua
compile reducescatter_ring reducescatter_ring.lua
compile alltoall_direct alltoall_direct.lua
if [ -d "$corpus" ]; then cp "$corpus"/*.xml "$out/" 2>/dev/null || true; fi
