#!/usr/bin/env bash
# gpu_pass8.sh -- the pass of a machine of 8 GPUs (GPUS=N for another
# count), in stages that each fit one 10-minute `run` call: STAGES picks
# them, DEADLINE (seconds, default 540) skips a step that would start
# after it.  Every benchmark runs NCCL beside baton in the same run.
#   suite   gpu_runtime --big in one process and with a process per GPU,
#           gpu_chain both ways, gpu_kill, gpu_faults
#   coll    the default set against NCCL under CUDA graphs, one process and
#           a process per GPU: AllReduce 8 B-1 GiB, AllGather,
#           ReduceScatter, AllToAll, Broadcast 1 KiB-256 MiB; AllReduce
#           eager too (one process, and a process per GPU in place)
#   eager   eager calls with a process per GPU on unregistered buffers:
#           AllReduce (bf16), AllGather, ReduceScatter, AllToAll (both
#           placements) and Broadcast 1 MiB-512 MiB, as the defaults run them
#           (from BATON_EAGER_EXCHANGE_MB a peer the ranks exchange their
#           buffers), then with the exchange off (_x0: the windows' scratch,
#           then the FIFO programs past it)
#   fused   the fused suites (gpu_fused, gpu_embed, gpu_moe, both ways), and
#           GEMV + AllReduce, GEMM + AllToAll and embedding bags + AllToAll
#           against their baselines, in one process and with -P
#   dropin  nccl-tests all_reduce ... alltoall with -G 5, on NCCL and through
#           baton's libnccl.so.2 (NCCL_TESTS=DIR of the *_perf binaries);
#           tools/measure/torch_check.py through baton's, and
#           tools/measure/torch_bench.py --ranks N on each (PyTorch there)
#   net     every rank its own node group (BATON_NODE_RANKS=1) over loopback
#           sockets, NCCL on its socket transport beside it (P2P and shared
#           memory off), so that every pair crosses sockets on both sides
#   sim     tools/measure/sim_check.sh -g N (sim/systems/h200xN.spec)
# First, here (Lua is here; the GPU machine has none):
#   tools/measure/gpu_prep.sh build/tools/baton algorithms CORPUS 8 .device/algs/r8
#   tools/measure/gpu_prep.sh --fused build/tools/baton algorithms - 8 .device/algs/f8
#   tools/measure/gpu_prep.sh --fused build/tools/baton algorithms - 1 .device/algs/f1
# Then there, with the build and .device carried, one stage a call:
#   ALGS=.device/algs STAGES=suite bash tools/measure/gpu_pass8.sh
# Writes NAME.txt (and NAME.csv for a benchmark) under $OUT.
set -u
n=${GPUS:-8}
case $n in '' | *[!0-9]* | 0 | 1) echo "gpu_pass8.sh: GPUS=$n: a number of GPUs, 2 or more" >&2; exit 2 ;; esac
deadline=${DEADLINE:-540}
out=${OUT:-/tmp}
algs=${ALGS:-build/algs}
set_dir=$algs/r$n/default fused_dir=$algs/f$n/fused
b=./build/tools/baton
stages=" ${STAGES:-suite} "
export NCCL_NVLS_ENABLE=0 BATON_TIMEOUT=${BATON_TIMEOUT:-20}
. "$(dirname "$0")/gpu_lib.sh"
bn() {  # bn NAME LIMIT ARGS...: baton bench ARGS, NCCL beside it, into NAME.csv
  local name=$1 lim=$2
  shift 2
  gpu_bench "$name" "$lim" $b bench "$@"
}
nvidia-smi -L | head -"$n"
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -lt "$n" ]; then echo "gpu_pass8.sh: fewer than $n GPUs here"; exit 2; fi

if [[ $stages == *" suite "* ]]; then
  gpu_test big 200 ./build/tests/gpu_runtime --big --ranks "$n" --dir "$set_dir"
  gpu_test big_procs 200 ./build/tests/gpu_runtime --big --ranks "$n" --dir "$set_dir" --procs
  gpu_test chain 60 ./build/tests/gpu_chain --ranks "$n" --dir "$set_dir"
  gpu_test chain_procs 60 ./build/tests/gpu_chain --ranks "$n" --dir "$set_dir" --procs
  gpu_test kill 60 ./build/tests/gpu_kill --ranks "$n" --dir "$set_dir"
  gpu_test faults 60 ./build/tests/gpu_faults --ranks "$n" --dir "$set_dir"
fi

if [[ $stages == *" coll "* ]]; then
  export BATON_ALGO_DIR=$set_dir
  common=(-g "$n" -w 5 -n 20 --rounds 3)
  bn ar_I2G 90 --collective allreduce -b 8 -e 1G -f 4 --inplace 2 -G 5 "${common[@]}"
  bn ar_PG 90 --collective allreduce -b 8 -e 1G -f 4 -G 5 -P "${common[@]}"
  for c in allgather reducescatter alltoall broadcast; do
    bn ${c}_I2G 60 --collective $c -b 1K -e 256M -f 4 --inplace 2 -G 5 "${common[@]}"
    bn ${c}_PG 60 --collective $c -b 1K -e 256M -f 4 -G 5 -P "${common[@]}"
  done
  bn ar_eager 60 --collective allreduce -b 8 -e 256M -f 8 "${common[@]}"
  bn ar_PI_eager 60 --collective allreduce -b 8 -e 256M -f 8 -P --inplace 1 -d bf16 "${common[@]}"
  unset BATON_ALGO_DIR
fi

if [[ $stages == *" eager "* ]]; then
  export BATON_ALGO_DIR=$set_dir
  common=(-g "$n" -w 5 -n 20 --rounds 3 -P -b 1M -e 512M -f 4)
  for x in "" 0; do
    if [ -n "$x" ]; then export BATON_EAGER_EXCHANGE_MB=$x; fi
    for c in allreduce allgather reducescatter alltoall broadcast; do
      bn ${c}_P${x:+_x$x} 90 --collective $c -d bf16 "${common[@]}"
    done
    bn alltoall_PI${x:+_x$x} 90 --collective alltoall --inplace 1 "${common[@]}"
  done
  unset BATON_EAGER_EXCHANGE_MB
  unset BATON_ALGO_DIR
fi

if [[ $stages == *" fused "* ]]; then
  gpu_test fused 100 ./build/tests/gpu_fused --ranks "$n" --dir "$fused_dir"
  gpu_test embed 100 ./build/tests/gpu_embed --ranks "$n" --dir "$fused_dir"
  gpu_test moe 100 ./build/tests/gpu_moe --ranks "$n" --dir "$fused_dir"
  gpu_test moe_procs 100 ./build/tests/gpu_moe --ranks "$n" --dir "$fused_dir" --procs
  both=$out/f1$n; mkdir -p "$both"   # baton's own GEMM baseline runs the one-rank programs
  cp "$algs"/f1/fused/*.xml "$fused_dir"/*.xml "$both"/ 2>/dev/null
  gpu_test fused_procs 100 ./build/tests/gpu_fused --ranks "$n" --dir "$fused_dir" --procs
  gpu_test embed_procs 100 ./build/tests/gpu_embed --ranks "$n" --dir "$fused_dir" --procs
  for P in "" -P; do   # one process, then a process per GPU
    BATON_ALGO_DIR=$fused_dir bn gemv${P:+_P} 120 --fused gemv_allreduce -g "$n" $P -d bf16 \
      --rows 4096,8192,16384,32768,65536 --cols 1024,2048,4096,7168 -w 3 -n 20 -G 5 --rounds 3
    BATON_ALGO_DIR=$both bn moe${P:+_P} 150 --fused gemm_alltoall -g "$n" $P --grid -G 5 --rounds 3
    BATON_ALGO_DIR=$both bn embed${P:+_P} 100 --fused embedding_alltoall -g "$n" $P -d f32 --batch 2048 \
      --tables 16,64,256 --dim 64,128,256 -G 5 --rounds 3
  done
fi

if [[ $stages == *" dropin "* ]]; then
  export BATON_ALGO_DIR=$set_dir
  for c in all_reduce all_gather reduce_scatter alltoall; do
    bin=${NCCL_TESTS:-}/${c}_perf
    if [ ! -x "$bin" ]; then echo "-- no $bin (set NCCL_TESTS)"; break; fi
    late nt_$c && break
    timeout 120 "$bin" -b 8 -e 256M -f 8 -g "$n" -c 1 -G 5 -w 5 -n 20 > "$out/nt_${c}_nccl.txt" 2>&1
    echo "== nt_${c}_nccl rc $?"
    LD_LIBRARY_PATH=$PWD/build timeout 120 "$bin" -b 8 -e 256M -f 8 -g "$n" -c 1 -G 5 -w 5 -n 20 > "$out/nt_${c}_baton.txt" 2>&1
    echo "== nt_${c}_baton rc $?"
    grep -E 'Out of bounds|Avg bus' "$out/nt_${c}_nccl.txt" "$out/nt_${c}_baton.txt"
  done
  if python3 -c 'import torch' 2>/dev/null && ! late torch; then
    gpu_test torch_check 200 env LD_PRELOAD="$PWD/build/libnccl.so.2" python3 tools/measure/torch_check.py --ranks "$n"
    timeout 150 python3 tools/measure/torch_bench.py --ranks "$n" --between --csv "$out/torch_nccl.csv" > "$out/torch_nccl.txt" 2>&1
    echo "== torch_nccl rc $?"
    LD_PRELOAD=$PWD/build/libnccl.so.2 timeout 150 python3 tools/measure/torch_bench.py --ranks "$n" --between \
      --csv "$out/torch_baton.csv" > "$out/torch_baton.txt" 2>&1
    echo "== torch_baton rc $?"
  fi
  unset BATON_ALGO_DIR
fi

if [[ $stages == *" net "* ]]; then
  export BATON_ALGO_DIR=$set_dir BATON_NODE_RANKS=1 BATON_NET=socket BATON_SOCKET_IFNAME=lo
  export NCCL_NET=Socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo
  for c in allreduce alltoall; do
    bn net_${c}_G 150 --collective $c -g "$n" -b 1K -e 64M -f 4 -w 2 -n 10 --rounds 3 -G 5
  done
  bn net_allreduce_PG 150 --collective allreduce -g "$n" -b 1K -e 64M -f 4 -w 2 -n 10 --rounds 3 -G 5 -P
  unset BATON_ALGO_DIR BATON_NODE_RANKS BATON_NET BATON_SOCKET_IFNAME NCCL_NET NCCL_P2P_DISABLE NCCL_SHM_DISABLE
fi

if [[ $stages == *" sim "* ]] && ! late sim; then
  timeout $((deadline - SECONDS > 60 ? deadline - SECONDS : 60)) tools/measure/sim_check.sh -g "$n" "$out/sim$n" | tail -30
fi
