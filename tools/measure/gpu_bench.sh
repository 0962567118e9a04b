#!/usr/bin/env bash
# gpu_bench.sh -- one GPU pass of correctness and side-by-side benchmarks on
# a lent 4-GPU machine, sized to fit one `run` call (under 10 minutes).
# First, here: for n in 2 4; do tools/measure/gpu_prep.sh build/tools/baton algorithms CORPUS $n build/algs/r$n; done
# Then on the GPU machine:  bash tools/measure/gpu_bench.sh   (ALGS=DIR if the rN folders are elsewhere)
# Writes NAME.txt / NAME.csv per benchmark under $OUT; STAGES picks parts
# (default "probe check bench sweep procs"; "two" adds the same benches
# on 2 GPUs; "default" benches the size-ranged set DIR/default on 4 and 2
# GPUs, one process and one per GPU, with graphs; "lat" compares the
# receive-reduce chains with the scratch programs, small sizes with graphs
# and one process per GPU; "trace" writes the kernel's timeline, BATON_TRACE,
# of one size per program and summarizes it; "launch" measures a group's launches from one thread per GPU against
# one thread, and nccl-tests all_reduce on NCCL and on baton's libnccl.so.2; "share", for a machine of one GPU:
# the test suite and the default set with 2, 4 and 8 ranks sharing GPU 0, baton alone, after
# for n in 2 4 8; do tools/measure/gpu_prep.sh ... $n build/algs/r$n; done).  DEADLINE (seconds, default 540) skips what
# would start after it, so one pass ends inside a 10-minute call.  "rooted"
# benches Broadcast, Reduce, Gather and Scatter of the default set against
# NCCL from roots 1 (one process, in and out of place) and 0 (a process per
# GPU, graphs).  "sim" checks baton sim against this machine
# (tools/measure/sim_check.sh -g 4 and -g 2, into $OUT/sim4 and $OUT/sim2).
set -u
deadline=${DEADLINE:-540}
out=${OUT:-/tmp}
. "$(dirname "$0")/gpu_lib.sh"
algs=${ALGS:-build/algs}   # where tools/measure/gpu_prep.sh put the rN folders
export NCCL_NVLS_ENABLE=0 BATON_TIMEOUT=${BATON_TIMEOUT:-20}   # a hang costs 20 s, not 60
b=./build/tools/baton
a=$algs/r4
stages=" ${STAGES:-probe check bench sweep procs} "
nvidia-smi -L | head -4
check() {  # check NAME ARGS...: the GPU test suite, quick sizes
  local name=$1
  shift
  gpu_test "$name" 200 ./build/tests/gpu_runtime "$@" --quick
}
run_bench() {  # run_bench NAME VAR=VALUE ARGS...: baton bench ARGS with the algorithms VAR names
  local name=$1 algos=$2
  shift 2
  gpu_bench "$name" 150 env "$algos" $b bench "$@"
}
dbench() { local name=$1 dir=$2; shift 2; run_bench $name BATON_ALGO_DIR=$dir "$@"; }     # every program of DIR
bench() { local name=$1 file=$2; shift 2; run_bench $name BATON_ALGO_FILES=$a/$file "$@"; }  # one file of $a
if [[ $stages == *" probe "* ]]; then   # the hardware floor, no baton code
  timeout 60 ./build/tests/gpu_p2p_probe 256 | tee $out/p2p_probe.txt
fi
if [[ $stages == *" check "* ]]; then
  check r4 --ranks 4 --dir $a
  check r2 --ranks 2 --dir $algs/r2
fi
if [[ $stages == *" bench "* ]]; then
  bench ar_allpairs1 allreduce_allpairs1_4r.xml --collective allreduce -b 8 -e 8M -f 4 -g 4 -w 5 -n 50 --rounds 3
  bench ar_allpairs2 allreduce_allpairs2_4r.xml --collective allreduce -b 64K -e 32M -f 4 -g 4 -w 5 -n 20 --rounds 3
  bench ar_ring2inst allreduce_ring_2inst_4r.xml --collective allreduce -b 64K -e 512M -f 8 -g 4 -w 3 -n 10 --rounds 3
  bench ag_allpairs allgather_allpairs_4r.xml --collective allgather -b 1K -e 4M -f 4 -g 4 -w 5 -n 20 --rounds 3
  bench ag_ring allgather_ring_4r.xml --collective allgather -b 1K -e 256M -f 16 -g 4 -w 3 -n 10 --rounds 3
  bench rs_ring reducescatter_ring_4r.xml --collective reducescatter -b 1K -e 256M -f 16 -g 4 -w 3 -n 10 --rounds 3
  bench rs_ring_ll reducescatter_ring_ll_4r.xml --collective reducescatter -b 1K -e 4M -f 4 -g 4 -w 5 -n 20 --rounds 3
  bench a2a_direct alltoall_direct_4r.xml --collective alltoall -b 1K -e 256M -f 16 -g 4 -w 3 -n 10 --rounds 3
  bench a2a_direct_ll alltoall_direct_ll_4r.xml --collective alltoall -b 1K -e 4M -f 4 -g 4 -w 5 -n 20 --rounds 3
  export BATON_PROTO=Simple; bench ar_allpairs1_simple allreduce_allpairs1_4r.xml --collective allreduce -b 8 -e 8M -f 8 -g 4 -w 5 -n 50 --rounds 3; unset BATON_PROTO
  bench ar_ring_ll128 allreduce_ring_4r_2c_1i_ll128.xml --collective allreduce -b 64K -e 64M -f 8 -g 4 -w 3 -n 10 --rounds 3
  bench ar_allpairs1_G allreduce_allpairs1_4r.xml --collective allreduce -b 8 -e 8M -f 8 -g 4 -w 5 -n 20 --rounds 3 -G 5
fi
if [[ $stages == *" share "* ]]; then   # ranks sharing GPU 0: correctness, and the interpreter's own costs
  check s2 --ranks 2 --gpus 1 --dir $algs/r2
  check s4 --ranks 4 --gpus 1 --dir $a
  check s8 --ranks 8 --gpus 1 --dir $algs/r8
  for n in 2 4 8; do
    d=$algs/r$n/default
    dbench share_r${n}_ar $d --collective allreduce -b 8 -e 64M -f 8 -g $n --share 1 -w 5 -n 20 --rounds 3
    dbench share_r${n}_ar_G $d --collective allreduce -b 8 -e 1M -f 8 -g $n --share 1 -w 5 -n 20 --rounds 3 -G 5
    dbench share_r${n}_ar_IG $d --collective allreduce -b 8 -e 1M -f 8 -g $n --share 1 -w 5 -n 20 --rounds 3 --inplace 1 -G 5
  done
  d=$a/default
  dbench share_r4_ag $d --collective allgather -b 1K -e 64M -f 8 -g 4 --share 1 -w 5 -n 20 --rounds 3
  dbench share_r4_rs $d --collective reducescatter -b 1K -e 64M -f 8 -g 4 --share 1 -w 5 -n 20 --rounds 3
  dbench share_r4_a2a $d --collective alltoall -b 1K -e 64M -f 8 -g 4 --share 1 -w 5 -n 20 --rounds 3
fi
if [[ $stages == *" default "* ]]; then   # what BATON_ALGO_DIR=DIR/default gives, every size
  d=$a/default
  dbench def_ar $d --collective allreduce -b 8 -e 512M -f 4 -g 4 -w 5 -n 20 --rounds 3
  dbench def_ag $d --collective allgather -b 1K -e 256M -f 4 -g 4 -w 5 -n 20 --rounds 3
  dbench def_rs $d --collective reducescatter -b 1K -e 256M -f 4 -g 4 -w 5 -n 20 --rounds 3
  dbench def_a2a $d --collective alltoall -b 1K -e 256M -f 4 -g 4 -w 5 -n 20 --rounds 3
  dbench def_ar_P $d --collective allreduce -b 8 -e 64M -f 8 -g 4 -P -w 5 -n 20 --rounds 3
  dbench def_ar_G $d --collective allreduce -b 8 -e 64M -f 8 -g 4 -w 5 -n 20 --rounds 3 -G 5
  dbench def_ar_PG $d --collective allreduce -b 8 -e 64M -f 8 -g 4 -P -w 5 -n 20 --rounds 3 -G 5
  BATON_LANES=64 BATON_NTHREADS=256 dbench def_ar_l64t256 $d --collective allreduce -b 16M -e 512M -f 4 -g 4 -w 3 -n 10 --rounds 3
  d=$algs/r2/default
  dbench r2_def_ar $d --collective allreduce -b 8 -e 512M -f 8 -g 2 -w 5 -n 20 --rounds 3
  dbench r2_def_ag $d --collective allgather -b 1K -e 256M -f 8 -g 2 -w 5 -n 20 --rounds 3
  dbench r2_def_rs $d --collective reducescatter -b 1K -e 256M -f 8 -g 2 -w 5 -n 20 --rounds 3
  dbench r2_def_a2a $d --collective alltoall -b 1K -e 256M -f 8 -g 2 -w 5 -n 20 --rounds 3
fi
if [[ $stages == *" lat "* ]]; then   # receive-reduce chains, folded into one block or not
  c1=allreduce_allpairs1_chain_oop_4r.xml
  bench lat_1chain_G5 $c1 --collective allreduce -b 8 -e 256K -f 8 -g 4 -w 5 -n 20 --rounds 3 -G 5
  BATON_FOLD_CHAINS=0 bench lat_1chain_nofold_G5 $c1 --collective allreduce -b 8 -e 256K -f 8 -g 4 -w 5 -n 20 --rounds 3 -G 5
  bench lat_1chain_P $c1 --collective allreduce -b 8 -e 256K -f 8 -g 4 -w 5 -n 20 --rounds 3 -P
  bench lat_1chain_PG5 $c1 --collective allreduce -b 8 -e 256K -f 8 -g 4 -w 5 -n 20 --rounds 3 -P -G 5
  bench lat_a2a_ll_G5 alltoall_direct_ll_4r.xml --collective alltoall -b 32 -e 64K -f 8 -g 4 -w 5 -n 20 --rounds 3 -G 5
  bench lat_rs_chain_ll reducescatter_allpairs_chain_4r.xml --collective reducescatter -b 1K -e 1M -f 4 -g 4 -w 5 -n 20 --rounds 3
  BATON_FOLD_CHAINS=0 bench lat_rs_chain_ll_nofold reducescatter_allpairs_chain_4r.xml --collective reducescatter -b 1K -e 1M -f 4 -g 4 -w 5 -n 20 --rounds 3
  bench lat_rs_chain_simple reducescatter_allpairs_chain_simple_4r.xml --collective reducescatter -b 1M -e 256M -f 4 -g 4 -w 3 -n 10 --rounds 3
  BATON_FOLD_CHAINS=0 bench lat_rs_chain_simple_nofold reducescatter_allpairs_chain_simple_4r.xml --collective reducescatter -b 1M -e 256M -f 4 -g 4 -w 3 -n 10 --rounds 3
fi
if [[ $stages == *" trace "* ]]; then   # where a call's time goes: the timeline of the last call
  trace() {  # trace NAME FILE ARGS...
    local name=$1 file=$2; shift 2
    BATON_TRACE=$out/tr_$name bench tr_$name $file "$@"
    python3 tools/measure/trace_summary.py $out/tr_$name > $out/tr_$name.sum.txt 2>&1
    tail -6 $out/tr_$name.sum.txt
  }
  trace a2a_ll alltoall_direct_ll_4r.xml --collective alltoall -b 256 -e 256 -g 4 -w 5 -n 20 --rounds 1 -G 5
  trace 1chain allreduce_allpairs1_chain_oop_4r.xml --collective allreduce -b 8 -e 8 -g 4 -w 5 -n 20 --rounds 1 -G 5
  BATON_NTHREADS=128 trace 1chain_t128 allreduce_allpairs1_chain_oop_4r.xml --collective allreduce -b 8 -e 8 -g 4 -w 5 -n 20 --rounds 1 -G 5
  trace 1chain_P allreduce_allpairs1_chain_oop_4r.xml --collective allreduce -b 8 -e 8 -g 4 -w 5 -n 20 --rounds 1 -P
  trace 1chain_32K allreduce_allpairs1_chain_oop_4r.xml --collective allreduce -b 32K -e 32K -g 4 -w 5 -n 20 --rounds 1 -G 5
  trace 2chain_512K allreduce_allpairs2_chain_oop_4r.xml --collective allreduce -b 512K -e 512K -g 4 -w 5 -n 20 --rounds 1 -G 5
  trace 2simple_2M allreduce_allpairs2_oop_simple_4r.xml --collective allreduce -b 2M -e 2M -g 4 -w 5 -n 20 --rounds 1 -G 5
  trace ring_8M allreduce_ring_2inst_t256_4r.xml --collective allreduce -b 8M -e 8M -g 4 -w 5 -n 20 --rounds 1 -G 5
  trace rs_chain_64M reducescatter_allpairs_chain_simple_4r.xml --collective reducescatter -b 64M -e 64M -g 4 -w 3 -n 10 --rounds 1
fi
if [[ $stages == *" launch "* ]]; then   # a group's launches: one host thread per GPU (BATON_LAUNCH_THREADS=1) or not
  d=$a/default
  dbench launch_ar $d --collective allreduce -b 8 -e 8M -f 4 -g 4 -w 10 -n 50 --rounds 3
  BATON_LAUNCH_THREADS=0 dbench launch_ar_t0 $d --collective allreduce -b 8 -e 8M -f 4 -g 4 -w 10 -n 50 --rounds 3
  dbench launch_ar_G $d --collective allreduce -b 8 -e 8M -f 8 -g 4 -w 10 -n 50 --rounds 3 -G 5
  dbench launch_rs $d --collective reducescatter -b 1K -e 1M -f 4 -g 4 -w 10 -n 50 --rounds 3
  dbench launch_ag $d --collective allgather -b 1K -e 1M -f 4 -g 4 -w 10 -n 50 --rounds 3
  dbench launch_a2a $d --collective alltoall -b 1K -e 1M -f 4 -g 4 -w 10 -n 50 --rounds 3
  dbench launch_r2_ar $algs/r2/default --collective allreduce -b 8 -e 8M -f 4 -g 2 -w 10 -n 50 --rounds 3
  BATON_TRACE=$out/tr_launch dbench tr_launch $d --collective allreduce -b 8 -e 8 -g 4 -w 10 -n 50 --rounds 1
  python3 tools/measure/trace_summary.py $out/tr_launch > $out/tr_launch.sum.txt 2>&1; tail -6 $out/tr_launch.sum.txt
  # nccl-tests itself, NCCL alone and through baton's libnccl.so.2 (no INFO log: it costs host time).
  if [[ -x ${NCCL_TESTS:-.device/nccl-tests}/all_reduce_perf ]]; then
    for lib in nccl baton; do
      late nt_$lib && continue
      ll=; [[ $lib == baton ]] && ll=$PWD/build
      LD_LIBRARY_PATH=$ll BATON_ALGO_DIR=$d timeout 120 ${NCCL_TESTS:-.device/nccl-tests}/all_reduce_perf \
        -b 8 -e 8M -f 4 -g 4 -w 20 -n 200 -c 1 > $out/nt_ar_$lib.txt 2>&1
      echo "== nccl-tests all_reduce_perf -g 4 on $lib: rc $?"
      grep -E "^ +[0-9]+ " $out/nt_ar_$lib.txt | awk '{print $1, $6, $10, $9}' | tr '\n' ';'; echo
    done
  fi
fi
if [[ $stages == *" rooted "* ]]; then   # Broadcast, Reduce, Gather, Scatter of the default set, roots 0 and 1
  d=$a/default
  for c in broadcast reduce gather scatter; do
    dbench def_${c}_r1 $d --collective $c -r 1 -b 8 -e 256M -f 8 -g 4 --inplace both -w 5 -n 20 --rounds 3
    dbench def_${c}_r0_PG $d --collective $c -r 0 -b 8 -e 16M -f 8 -g 4 -P -w 5 -n 20 --rounds 3 -G 5
  done
fi
if [[ $stages == *" tune "* ]]; then   # the default set's AllReduce and ReduceScatter, and candidates
  d=$a/default
  dbench tune_ar $d --collective allreduce -b 8 -e 512M -f 4 -g 4 -w 5 -n 20 --rounds 3
  dbench tune_rs $d --collective reducescatter -b 1K -e 256M -f 4 -g 4 -w 5 -n 20 --rounds 3
  bench tune_ar_2shot_simple allreduce_allpairs2_oop_simple_4r.xml --collective allreduce -b 256K -e 16M -f 2 -g 4 -w 5 -n 20 --rounds 3
  BATON_LANES=64 bench tune_ar_ring_l64_t512 allreduce_ring_2inst_4r.xml --collective allreduce -b 64M -e 512M -f 2 -g 4 -w 3 -n 10 --rounds 3
  BATON_LANES=32 bench tune_ar_ring_l32_t256 allreduce_ring_2inst_t256_4r.xml --collective allreduce -b 64M -e 512M -f 2 -g 4 -w 3 -n 10 --rounds 3
  d=$algs/r2/default
  dbench tune_r2_ar $d --collective allreduce -b 8 -e 512M -f 8 -g 2 -w 5 -n 20 --rounds 3
  dbench tune_r2_rs $d --collective reducescatter -b 1K -e 256M -f 8 -g 2 -w 5 -n 20 --rounds 3
fi
if [[ $stages == *" sweep "* ]]; then
  # lanes, slot bytes, slots, threads per block
  for cfg in "1 131072 8 512" "16 131072 8 512" "32 131072 8 512" "32 524288 4 512" "16 524288 8 512" \
             "32 262144 8 512" "64 131072 8 256"; do
    set -- $cfg
    export BATON_LANES=$1 BATON_SLOT_BYTES=$2 BATON_EXEC_SLOTS=$3 BATON_NTHREADS=$4
    bench sweep_l$1_s$2_n$3_t$4 allreduce_ring_2inst_4r.xml --collective allreduce -b 256M -e 256M -g 4 -w 2 -n 5 --rounds 2
  done
  unset BATON_LANES BATON_SLOT_BYTES BATON_EXEC_SLOTS BATON_NTHREADS
fi
if [[ $stages == *" two "* ]]; then
  a=$algs/r2
  bench r2_ar_allpairs1 allreduce_allpairs1_2r.xml --collective allreduce -b 8 -e 8M -f 8 -g 2 -w 5 -n 50 --rounds 3
  bench r2_ar_ring2inst allreduce_ring_2inst_2r.xml --collective allreduce -b 64K -e 512M -f 8 -g 2 -w 3 -n 10 --rounds 3
  bench r2_ag_ring allgather_ring_2r.xml --collective allgather -b 1K -e 256M -f 16 -g 2 -w 3 -n 10 --rounds 3
  bench r2_a2a_direct alltoall_direct_2r.xml --collective alltoall -b 1K -e 256M -f 16 -g 2 -w 3 -n 10 --rounds 3
  a=$algs/r4
fi
if [[ $stages == *" sim "* ]]; then   # baton sim's calibration on this machine, 4 GPUs and 2
  for n in 4 2; do
    late sim$n && continue
    bash tools/measure/sim_check.sh -g $n $out/sim$n > $out/sim$n.txt 2>&1
    echo "== sim_check -g $n exit $?"; grep -E "^# probe|rows meet" $out/sim$n.txt
  done
fi
if [[ $stages == *" procs "* ]]; then
  bench ar_allpairs1_P allreduce_allpairs1_4r.xml --collective allreduce -b 8 -e 1M -f 8 -g 4 -P -w 5 -n 50 --rounds 3
  # NCCL advises one GPU per process for CUDA graphs: the graph mode there too.
  bench ar_allpairs1_PG allreduce_allpairs1_4r.xml --collective allreduce -b 8 -e 1M -f 8 -g 4 -P -w 5 -n 20 --rounds 3 -G 5
  check r4_procs --ranks 4 --dir $a --procs
fi
