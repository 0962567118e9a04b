#!/usr/bin/env bash
# gpu_prep.sh -- compiles the algorithm library for RANKS ranks into OUTDIR
# (and copies IR files from CORPUS there), ready for BATON_ALGO_DIR or the
# GPU tests.  Run it where Lua is (the GPU machines have none) and carry
# OUTDIR.   Usage: tools/measure/gpu_prep.sh [--fused] BATON ALGORITHMS_DIR CORPUS_DIR RANKS OUTDIR
# OUTDIR/default/ gets one program per collective and size range, for
# BATON_ALGO_DIR (the drop-in library, nccl-tests, baton_gemv_allreduce):
# `baton set RANKS` makes it.  OUTDIR/fused/ gets the fused programs (GEMV +
# AllReduce, embedding bags + AllToAll, GEMM + AllToAll) in every form,
# for tests/gpu_fused, gpu_embed and gpu_moe; --fused makes only those.
set -eu
only_fused=0
if [ "${1:-}" = --fused ]; then only_fused=1; shift; fi
baton=$1 algs=$2 corpus=$3 ranks=$4 out=$5
mkdir -p "$out/fused"
fused() {  # fused NAME PARAMS...: a fused program into OUTDIR/fused
  local name=$1; shift
  local params=()
  for p in "$@"; do params+=(--param "$p"); done
  local script=$algs/gemv_allreduce.lua
  case $name in embedding*) script=$algs/embedding_alltoall.lua ;; moe*) script=$algs/moe_combine.lua ;; esac
  "$baton" compile -q "$script" --param ranks="$ranks" "${params[@]}" -o "$out/fused/${name}_${ranks}r.xml"
}
fused gemv_allreduce_allpairs
fused gemv_allreduce_allpairs_zc zerocopy=1
fused gemv_allreduce_allpairs_c2_simple chunks=2 protocol=Simple sync=group:2
fused gemv_allreduce_ring_ll128 form=ring protocol=LL128 sync=stride:3
fused embedding_alltoall_sum
fused embedding_alltoall_mean_ll mode=mean protocol=LL
fused embedding_alltoall_w_c2 weighted=1 chunks=2 protocol=LL128 sync=group:2
fused moe_combine
fused moe_combine_c2_ll128 chunks=2 protocol=LL128 sync=group:2
if [ "$only_fused" = 1 ]; then exit 0; fi
compile() {  # compile NAME SCRIPT PARAMS...
  local name=$1 script=$2; shift 2
  local params=()
  for p in "$@"; do params+=(--param "$p"); done
  "$baton" compile -q "$algs/$script" "${params[@]}" -o "$out/${name}_${ranks}r.xml"
}
half=$((ranks / 2))
r=ranks=$ranks
compile allreduce_ring allreduce_ring.lua $r
compile allreduce_ring_2ch allreduce_ring.lua $r channels=2
compile allreduce_ring_2inst allreduce_ring.lua $r instances=2
compile allreduce_allpairs1 allreduce_allpairs.lua $r shot=1
compile allreduce_allpairs2 allreduce_allpairs.lua $r shot=2
compile allgather_ring allgather_ring.lua $r
compile allgather_allpairs allgather_allpairs.lua $r
compile allreduce_allpairs1_oop allreduce_allpairs.lua $r shot=1 inplace=0
compile allreduce_allpairs2_oop allreduce_allpairs.lua $r shot=2 inplace=0
compile allgather_allpairs_oop allgather_allpairs.lua $r inplace=0
compile allgather_allpairs_oop_simple allgather_allpairs.lua $r inplace=0 protocol=Simple
compile reducescatter_allpairs reducescatter_allpairs.lua $r
compile reducescatter_allpairs_simple reducescatter_allpairs.lua $r protocol=Simple
compile allreduce_allpairs2_oop_simple allreduce_allpairs.lua $r shot=2 inplace=0 protocol=Simple
compile allreduce_ring_2inst_t256 allreduce_ring.lua $r instances=2 threads=256
compile reducescatter_ring reducescatter_ring.lua $r
compile reducescatter_ring_oop reducescatter_ring.lua $r inplace=0
compile reducescatter_ring_oop_2inst reducescatter_ring.lua $r inplace=0 instances=2
compile allreduce_allpairs1_chain_oop allreduce_allpairs.lua $r shot=1 inplace=0 chain=1
compile allreduce_allpairs2_chain_oop allreduce_allpairs.lua $r shot=2 inplace=0 chain=1
compile allreduce_allpairs2_chain_oop_simple allreduce_allpairs.lua $r shot=2 inplace=0 chain=1 protocol=Simple
compile allreduce_allpairs2_chain allreduce_allpairs.lua $r shot=2 chain=1
compile allreduce_allpairs1_chain allreduce_allpairs.lua $r shot=1 chain=1
compile allreduce_allpairs1_chain_ll128 allreduce_allpairs.lua $r shot=1 chain=1 protocol=LL128
compile allreduce_allpairs2_chain_oop_ll128_agch allreduce_allpairs.lua $r shot=2 inplace=0 chain=1 protocol=LL128 agch=1
compile allreduce_allpairs2_chain_ll128_agch allreduce_allpairs.lua $r shot=2 chain=1 protocol=LL128 agch=1
compile reducescatter_allpairs_chain reducescatter_allpairs.lua $r chain=1
compile reducescatter_allpairs_chain_simple reducescatter_allpairs.lua $r chain=1 protocol=Simple
compile allreduce_allpairs2_chain_oop_ll128 allreduce_allpairs.lua $r shot=2 inplace=0 chain=1 protocol=LL128
compile allreduce_allpairs1_chain_oop_ll128 allreduce_allpairs.lua $r shot=1 inplace=0 chain=1 protocol=LL128
compile reducescatter_allpairs_chain_ll128 reducescatter_allpairs.lua $r chain=1 protocol=LL128
compile alltoall_direct alltoall_direct.lua $r
compile alltoall_direct_ll alltoall_direct.lua $r protocol=LL
compile alltoall_direct_ll128 alltoall_direct.lua $r protocol=LL128
compile alltoall_swap alltoall_direct.lua $r inplace=1 swap=1
compile alltoall_swap_ll128 alltoall_direct.lua $r inplace=1 swap=1 protocol=LL128 chunks=2
compile allgather_ring_ll allgather_ring.lua $r protocol=LL
compile reducescatter_ring_ll reducescatter_ring.lua $r protocol=LL
compile allreduce_tree allreduce_tree.lua $r
compile allreduce_tree_ll128 allreduce_tree.lua $r protocol=LL128 chunks=2
compile allgather_rd allgather_rd.lua $r
compile alltoall_bruck alltoall_bruck.lua $r
compile alltoall_bruck_ll alltoall_bruck.lua $r protocol=LL chunks=2
compile allreduce_rd allreduce_rd.lua $r
compile allreduce_rd_ll allreduce_rd.lua $r protocol=LL
compile alltoall_direct_paired alltoall_direct.lua $r placement=paired
compile allreduce_allpairs2_paired allreduce_allpairs.lua $r shot=2 placement=paired
compile allreduce_direct1 allreduce_allpairs.lua $r shot=1 via=direct
compile allreduce_direct1_oop allreduce_allpairs.lua $r shot=1 inplace=0 via=direct
compile allreduce_direct2 allreduce_allpairs.lua $r shot=2 chain=1 protocol=Simple via=direct
compile allreduce_direct2_oop allreduce_allpairs.lua $r shot=2 inplace=0 chain=1 protocol=Simple via=direct
compile allreduce_direct2_staged allreduce_allpairs.lua $r shot=2 chain=1 protocol=Simple via=direct stage=1
compile allreduce_direct2_staged_oop allreduce_allpairs.lua $r shot=2 inplace=0 chain=1 protocol=Simple via=direct stage=1
compile allreduce_direct2_put allreduce_allpairs.lua $r shot=2 chain=1 protocol=Simple via=put
compile allreduce_direct1_ll128 allreduce_allpairs.lua $r shot=1 via=direct protocol=LL128
compile allreduce_direct1_ll128_oop allreduce_allpairs.lua $r shot=1 inplace=0 via=direct protocol=LL128
compile allreduce_direct2_ll128 allreduce_allpairs.lua $r shot=2 via=direct protocol=LL128
compile allreduce_direct2_ll128_oop allreduce_allpairs.lua $r shot=2 inplace=0 via=direct protocol=LL128
compile allgather_direct allgather_allpairs.lua $r via=direct protocol=Simple
compile allgather_direct_ll allgather_allpairs.lua $r via=direct protocol=LL inplace=0
compile reducescatter_direct reducescatter_allpairs.lua $r via=direct protocol=Simple chain=1
compile alltoall_direct_put alltoall_direct.lua $r via=direct protocol=Simple
compile alltoall_direct_put_ll alltoall_direct.lua $r via=direct protocol=LL
compile alltoall_direct_land alltoall_direct.lua $r via=direct protocol=Simple land=1
compile broadcast_chain broadcast_chain.lua $r
compile broadcast_direct_put broadcast_direct.lua $r inplace=1 via=direct
compile broadcast_direct_land broadcast_direct.lua $r inplace=1 via=direct land=1 chunks=2
compile broadcast_chain_put broadcast_chain.lua $r inplace=1 chunks=8 via=direct
compile broadcast_tree_ll128 broadcast_tree.lua $r chunks=1 protocol=LL128
compile reduce_chain reduce_chain.lua $r
compile reduce_tree_ll reduce_tree.lua $r protocol=LL
compile broadcast_tree_ip broadcast_tree.lua $r inplace=1
compile reduce_chain_ip_ll128 reduce_chain.lua $r inplace=1 protocol=LL128
compile gather_direct gather_direct.lua $r
compile scatter_direct_ll128 scatter_direct.lua $r chunks=2 protocol=LL128
if [ $((ranks & (ranks - 1))) -eq 0 ]; then compile allreduce_rhd allreduce_rhd.lua $r; fi
if [ "$half" -ge 1 ] && [ $((ranks % 2)) -eq 0 ]; then
  compile allreduce_hier allreduce_hier.lua nodes=2 gpus=$half
  compile alltoall_twostep alltoall_twostep.lua nodes=2 gpus=$half
  compile alltonext alltonext.lua nodes=2 gpus=$half
  compile allreduce_altring allreduce_altring.lua nodes=2 gpus=$half
fi
# The default set: one program per collective and size range (baton set).
"$baton" set "$ranks" -q --algorithms "$algs" -o "$out/default"
if [ -d "$corpus" ]; then cp "$corpus"/*.xml "$out/" 2>/dev/null || true; fi
