#!/usr/bin/env bash
# gpu_pass.sh -- the whole GPU test pass on a lent GPU machine (no Lua there):
# first, here: for n in 2 4; do tools/measure/gpu_prep.sh build/tools/baton algorithms CORPUS $n build/algs/r$n; done
# then on the GPU machine:  bash tools/measure/gpu_pass.sh   (ALGS=DIR if the rN folders are elsewhere; MODES="single procs", QUICK=--quick)
# It ends with tests/gpu_kill (a rank's process killed, one GPU per rank) on 2 and 4 GPUs.
set -u
out=${OUT:-/tmp}
algs=${ALGS:-build/algs}   # where tools/measure/gpu_prep.sh put the rN folders
nvidia-smi -L
./build/tests/gpu_reduce > $out/reduce.txt 2>&1; echo "reduce exit $? $(grep -c '^ok' $out/reduce.txt) ok"
for n in 2 4; do
  for m in ${MODES:-single procs}; do
    mode=""; extra="--big"; [ "$m" = procs ] && mode="--procs"
    name=r$n${mode:+_procs}
    start=$SECONDS
    timeout 280 ./build/tests/gpu_runtime --ranks $n --dir $algs/r$n $mode $extra ${QUICK:-} > $out/$name.txt 2>&1
    rc=$?
    echo "== $name exit $rc in $((SECONDS - start)) s: $(grep -c '^ok' $out/$name.txt) ok, $(grep -c '^not ok' $out/$name.txt) not ok"
    grep -v '^ok' $out/$name.txt | head -30
  done
done
for n in 2 4; do
  timeout 200 ./build/tests/gpu_kill --ranks $n --dir $algs/r$n > $out/kill$n.txt 2>&1
  echo "== kill$n exit $?: $(grep -c '^ok' $out/kill$n.txt) ok, $(grep -c '^not ok' $out/kill$n.txt) not ok"
  grep '^not ok' $out/kill$n.txt | head -10
done
