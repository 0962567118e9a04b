#!/usr/bin/env bash
# verify suite: every algorithm in algorithms/ compiles for several shapes,
# and each result passes `baton verify` over all types and operators.
# Usage: compile_library.sh BATON ALGORITHMS_DIR   (TAP output)
set -u
baton=$1 algs=$2
n=0 failed=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
case_() {  # case_ SCRIPT PARAMS...: compile and verify
  local script=$1; shift
  local name params=() out
  name="$(basename "$script" .lua) $*"
  for p in "$@"; do params+=(--param "$p"); done
  out="$tmp/out.xml"
  n=$((n + 1))
  if msg=$("$baton" compile -q "$algs/$script" "${params[@]}" -o "$out" 2>&1) &&
     msg=$("$baton" verify -q --dtype all --op all "$out" 2>&1) &&
     msg=$("$baton" verify -q --outofplace --count 5 --tile 1 --slots 2 --dtype i8 --op all "$out" 2>&1); then
    echo "ok $n - $name"
  else
    echo "not ok $n - $name"; echo "$msg" | sed 's/^/#   /' | head -20; failed=$((failed + 1))
  fi
}
for r in 2 4 8 16; do case_ allreduce_ring.lua ranks=$r; done
case_ allreduce_ring.lua ranks=8 channels=2
case_ allreduce_ring.lua ranks=4 channels=4 protocol=LL128
for r in 2 4 8 16; do
  case_ allgather_ring.lua ranks=$r
  case_ reducescatter_ring.lua ranks=$r
  case_ alltoall_direct.lua ranks=$r
  case_ allreduce_allpairs.lua ranks=$r shot=1
  case_ allreduce_allpairs.lua ranks=$r shot=2
done
case_ allgather_ring.lua ranks=8 channels=2
case_ reducescatter_ring.lua ranks=8 channels=2
case_ alltoall_direct.lua ranks=4 chunks=3
case_ allreduce_ring.lua ranks=8 instances=2
case_ allreduce_ring.lua ranks=4 channels=2 instances=2
case_ alltoall_direct.lua ranks=4 chunks=2 instances=2
case_ allreduce_allpairs.lua ranks=4 shot=2 instances=2
case_ allgather_ring.lua ranks=4 instances=3
echo "1..$n"
[ $failed -eq 0 ]
