#!/usr/bin/env bash
# gpu_fused.sh -- the fused operators on a lent GPU machine, in one `run`
# call: the gpu suite's fused tests (GEMV + AllReduce, embedding bags +
# AllToAll, GEMM + AllToAll, with ranks sharing GPU 0), each opcode alone
# against its library (one rank: cuBLAS GEMV, cuBLAS GEMM; the embedding
# bag against PyTorch when it is installed), each fused operator against
# its library baseline on every GPU (two or more: cuBLAS + NCCL, pooling +
# NCCL + shuffle, cuBLAS GEMM + NCCL and baton's own GEMM + NCCL), and
# with ranks sharing GPU 0 (no NCCL there: the interpreter's costs, not
# NVLink's).
# First, here (Lua is here):
#   for n in 1 2 4 8; do tools/measure/gpu_prep.sh --fused build/tools/baton algorithms - $n .device/algs/f$n; done
#   cp build/tools/baton build/tests/gpu_fused build/tests/gpu_embed build/tests/gpu_moe .device/
#   cp build/libbaton.so.0.1.0 .device/libbaton.so     # tools/measure/torch_moe.py (stage moe) loads it
# Then there, carrying .device:  bash tools/measure/gpu_fused.sh
# The test stage also runs gpu_fused on every GPU, in one process and with
# a process per GPU (--procs), where there are two GPUs or more.
# STAGES picks parts (default "test gemv fused share embed moe"; "procs":
# a process per GPU through PyTorch, eager and graphs, and the examples
# under torchrun); TYPES the
# GEMV's element types (default "bf16 f32"); M and K its shape lists
# (defaults: the tensor-parallel decode shapes of docs/PERFORMANCE.md).
# Writes NAME.txt / NAME.csv under $OUT; DEADLINE (seconds, default 540)
# skips what would start after it.
set -u
deadline=${DEADLINE:-540}
out=${OUT:-/tmp}
. "$(dirname "$0")/gpu_lib.sh"
bin=${BIN:-.device}
algs=${ALGS:-.device/algs}
export NCCL_NVLS_ENABLE=0 BATON_TIMEOUT=${BATON_TIMEOUT:-20}
stages=" ${STAGES:-test gemv fused share embed moe} "
types=${TYPES:-bf16 f32}
M=${M:-8192,16384,32768,65536}
K=${K:-2048,4096,7168,8192,14336}
ngpu=$(nvidia-smi -L | wc -l)
nvidia-smi -L | head -8
fbench() {  # fbench NAME OPERATOR RANKS ARGS...: baton bench --fused OPERATOR with the fused programs for 1 and RANKS ranks
  local name=$1 op=$2 ranks=$3; shift 3
  late $name && return
  local dir=/tmp/gpu_fused_algs_$ranks
  mkdir -p $dir && cp $algs/f1/fused/*.xml $algs/f$ranks/fused/*.xml $dir/ 2>/dev/null
  echo "=== $name: baton bench --fused $op $*"
  BATON_ALGO_DIR=$dir timeout 400 $bin/baton bench --fused $op "$@" --csv $out/$name.csv > $out/$name.txt 2>&1
  echo "rc $?"
  grep -v "^#\s*$" $out/$name.txt | tail -24
}
if [[ $stages == *" test "* ]]; then
  for test in gpu_fused gpu_embed gpu_moe; do
    for n in 1 2 4 8; do
      [ $test = gpu_moe ] && [ $n = 8 ] && continue
      late ${test}_$n && continue
      thr=; [ $n = 8 ] && thr=BATON_NTHREADS=256
      env $thr timeout 240 $bin/$test --ranks $n --gpus 1 --dir $algs/f$n/fused > $out/${test}_$n.txt 2>&1
      echo "== $test, $n ranks on GPU 0: exit $?, $(grep -c '^ok' $out/${test}_$n.txt) ok, $(grep -c '^not ok' $out/${test}_$n.txt) not ok"
      grep '^not ok' -A3 $out/${test}_$n.txt | head -12
    done
  done
  # GEMV + AllReduce on every GPU, one process, then a process per GPU
  # (the direct one-shot kernel through the windows both ways).
  for mode in "" --procs; do
    [ "$ngpu" -ge 2 ] || break
    name=gpu_fused_${ngpu}gpus${mode:+_procs}
    late $name && continue
    timeout 240 $bin/gpu_fused --ranks $ngpu --dir $algs/f$ngpu/fused $mode > $out/$name.txt 2>&1
    echo "== gpu_fused, $ngpu ranks on $ngpu GPUs ${mode:-(one process)}: exit $?, $(grep -c '^ok' $out/$name.txt) ok, $(grep -c '^not ok' $out/$name.txt) not ok"
    grep '^not ok' -A3 $out/$name.txt | head -12
  done
fi
for t in $types; do
  [[ $stages == *" gemv "* ]] && fbench gemv_$t gemv_allreduce 1 -g 1 -d $t --rows $M --cols $K -w 3 -n 20 -G 5 --rounds 3
  [[ $stages == *" fused "* ]] && [ "$ngpu" -ge 2 ] &&
    fbench fused_${t}_$ngpu gemv_allreduce $ngpu -g $ngpu -d $t --rows $M --cols $K -w 3 -n 20 -G 5 --rounds 3
  [[ $stages == *" share "* ]] &&
    fbench share4_$t gemv_allreduce 4 -g 4 --share 1 -d $t --rows 8192,65536 --cols 2048,7168 -w 3 -n 20 -G 5 --rounds 3
done
# Embedding bags + AllToAll: every GPU against pooling + NCCL AllToAll +
# shuffle (the grid of 2048 samples), else 4 ranks sharing GPU 0.
if [[ $stages == *" embed "* ]]; then
  if [ "$ngpu" -ge 2 ]; then
    for t in f32 bf16; do fbench embed_${t}_$ngpu embedding_alltoall $ngpu -g $ngpu -d $t --batch 2048 --tables 16,64,256 --dim 64,128,256 -G 5 --rounds 3; done
  else
    fbench embed_share4 embedding_alltoall 4 -g 4 --share 1 --batch 2048 --tables 16,64 --dim 64,128 -G 5 --rounds 3
  fi
fi
# GEMM + AllToAll: every GPU against cuBLAS + NCCL and baton's own GEMM +
# NCCL over the MoE grid, then PyTorch's matmul + all_to_all_single
# (one process per GPU: the FIFO exchange); else 4 ranks sharing GPU 0.
if [[ $stages == *" moe "* ]]; then
  if [ "$ngpu" -ge 2 ]; then
    fbench moe_$ngpu gemm_alltoall $ngpu -g $ngpu --grid -G 5 --rounds 3
    if ! late moe_torch_$ngpu && python3 -c 'import torch' 2>/dev/null; then
      echo "=== moe_torch_$ngpu: tools/measure/torch_moe.py --ranks $ngpu"
      BATON_ALGO_DIR=$algs/f$ngpu/fused timeout 400 python3 tools/measure/torch_moe.py --ranks $ngpu --lib $bin/libbaton.so \
        --csv $out/moe_torch_$ngpu.csv > $out/moe_torch_$ngpu.txt 2>&1
      echo "rc $?"; tail -34 $out/moe_torch_$ngpu.txt
    fi
  else
    fbench moe_share4 gemm_alltoall 4 -g 4 --share 1 --tokens 1024,4096 --out_cols 4096,8192 --in_cols 1024,14336 -G 5 --rounds 3
  fi
fi
# A process per GPU through PyTorch (two or more GPUs): every operator in
# CUDA graphs and eagerly, the eager fused AllToAlls also on registered
# outputs, and the examples under torchrun.
if [[ $stages == *" procs "* ]] && [ "$ngpu" -ge 2 ] && python3 -c 'import torch' 2>/dev/null; then
  tp() {  # tp NAME TIMEOUT SCRIPT ARGS...: a PyTorch run, a process per GPU
    local name=$1 to=$2; shift 2
    late $name && return
    echo "=== $name: $*"
    BATON_ALGO_DIR=$algs/f$ngpu/fused timeout $to python3 "$@" --lib $bin/libbaton.so --csv $out/$name.csv \
      > $out/$name.txt 2>&1
    echo "rc $?"; grep -v "^\s*$" $out/$name.txt | tail -6
  }
  tp torch_gemv_graph_$ngpu 200 tools/measure/torch_fused.py --op gemv --ranks $ngpu --graph
  tp torch_embed_graph_$ngpu 200 tools/measure/torch_fused.py --op embed --ranks $ngpu --graph
  tp torch_embed_eager_$ngpu 200 tools/measure/torch_fused.py --op embed --ranks $ngpu
  tp torch_embed_reg_$ngpu 200 tools/measure/torch_fused.py --op embed --ranks $ngpu --register
  tp torch_moe_graph_$ngpu 300 tools/measure/torch_moe.py --ranks $ngpu --graph
  tp torch_moe_eager_$ngpu 300 tools/measure/torch_moe.py --ranks $ngpu --quick
  tp torch_moe_reg_$ngpu 300 tools/measure/torch_moe.py --ranks $ngpu --quick --register
  for ex in gemv_allreduce embedding_alltoall moe_combine; do
    for g in "" --graph; do
      late example_$ex && break
      BATON_ALGO_DIR=$algs/f$ngpu/fused timeout 120 torchrun --nproc-per-node $ngpu examples/$ex.py $g \
        --lib $bin/libbaton.so > $out/example_${ex}${g:+_graph}.txt 2>&1
      echo "== torchrun examples/$ex.py $g: exit $?"; grep -v "^\s*$" $out/example_${ex}${g:+_graph}.txt | tail -2
    done
  done
fi

