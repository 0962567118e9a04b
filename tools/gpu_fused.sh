#!/usr/bin/env bash
# gpu_fused.sh -- fused operators on a lent GPU machine, in one `run` call:
# the gpu suite's fused tests, the GEMV opcode alone against cuBLAS (one
# rank: the fused program is the GEMV), GEMV + AllReduce against cuBLAS +
# NCCL on every GPU (two or more), and with ranks sharing GPU 0 (baton and
# cuBLAS only: the interpreter's costs, not NVLink's).
# First, here (Lua is here):
#   for n in 1 2 4 8; do tools/gpu_prep.sh --fused build/tools/baton algorithms - $n .device/algs/f$n; done
#   cp build/tools/baton build/tests/gpu_fused .device/
# Then there, carrying .device:  bash tools/gpu_fused.sh
# STAGES picks parts (default "test gemv fused share"); TYPES the element
# types (default "bf16 f32"); M and K the shape lists (defaults: the
# tensor-parallel decode shapes of docs/PERFORMANCE.md).  Writes NAME.txt /
# NAME.csv under $OUT; DEADLINE (seconds, default 540) skips what would
# start after it.
set -u
deadline=${DEADLINE:-540}
late() { if (( SECONDS > deadline )); then echo "-- skipped $1: past DEADLINE ${deadline} s"; return 0; fi; return 1; }
out=${OUT:-/tmp}
bin=${BIN:-.device}
algs=${ALGS:-.device/algs}
export NCCL_NVLS_ENABLE=0 BATON_TIMEOUT=${BATON_TIMEOUT:-20}
stages=" ${STAGES:-test gemv fused share} "
types=${TYPES:-bf16 f32}
M=${M:-8192,16384,32768,65536}
K=${K:-2048,4096,7168,8192,14336}
ngpu=$(nvidia-smi -L | wc -l)
nvidia-smi -L | head -8
fbench() {  # fbench NAME RANKS ARGS...: baton bench --fused with the fused programs for RANKS ranks
  local name=$1 ranks=$2; shift 2
  late $name && return
  echo "=== $name: baton bench --fused gemv_allreduce $*"
  BATON_ALGO_DIR=$algs/f$ranks/fused timeout 400 $bin/baton bench --fused gemv_allreduce "$@" --csv $out/$name.csv \
    > $out/$name.txt 2>&1
  echo "rc $?"
  grep -v "^#\s*$" $out/$name.txt | tail -24
}
if [[ $stages == *" test "* ]]; then
  for n in 1 2 4 8; do
    late fused_test_$n && continue
    thr=; [ $n = 8 ] && thr=BATON_NTHREADS=256
    env $thr timeout 240 $bin/gpu_fused --ranks $n --gpus 1 --dir $algs/f$n/fused > $out/fused_test_$n.txt 2>&1
    echo "== fused test, $n ranks on GPU 0: exit $?, $(grep -c '^ok' $out/fused_test_$n.txt) ok, $(grep -c '^not ok' $out/fused_test_$n.txt) not ok"
    grep '^not ok' -A3 $out/fused_test_$n.txt | head -12
  done
fi
for t in $types; do
  [[ $stages == *" gemv "* ]] && fbench gemv_$t 1 -g 1 -d $t -M $M -K $K -w 3 -n 20 -G 5 -R 3
  [[ $stages == *" fused "* ]] && [ "$ngpu" -ge 2 ] && fbench fused_${t}_$ngpu $ngpu -g $ngpu -d $t -M $M -K $K -w 3 -n 20 -G 5 -R 3
  [[ $stages == *" share "* ]] && fbench share4_$t 4 -g 4 --share 1 -d $t -M 8192,65536 -K 2048,7168 -w 3 -n 20 -G 5 -R 3
done
