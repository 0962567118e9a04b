#!/usr/bin/env bash
# gpu_nccl.sh -- the drop-in proof on a lent 4-GPU machine (docs/NCCL.md):
# nccl-tests' all_reduce/all_gather/reduce_scatter/alltoall/broadcast/reduce/
# gather/scatter with -c 1, all_reduce -G 5 and -R 2 (NCCL alone and through
# baton), and
# tools/measure/torch_check.py, each with baton's libnccl.so.2 in front of NCCL.
# nccl-tests is not part of baton: build it from its public source where
# you like and set NCCL_TESTS to the folder holding the *_perf binaries.
#   NCCL_TESTS=DIR ALGS=DIR bash tools/measure/gpu_nccl.sh   (ALGS: baton set 4 -o DIR)
set -u
out=${OUT:-/tmp}
export NCCL_NVLS_ENABLE=0 BATON_DEBUG=${BATON_DEBUG:-INFO} BATON_DEBUG_SUBSYS=${BATON_DEBUG_SUBSYS:-NCCL,RUNTIME}
export BATON_ALGO_DIR=${ALGS:?set ALGS to the set for 4 ranks (baton set 4 -o DIR)}
lib=$PWD/build
for t in all_reduce all_gather reduce_scatter alltoall broadcast reduce gather scatter; do
  bin=${NCCL_TESTS:?set NCCL_TESTS}/${t}_perf
  echo "=== LD_LIBRARY_PATH=build $bin -b 8 -e 64M -f 4 -g 4 -c 1"
  LD_LIBRARY_PATH=$lib timeout 150 $bin -b 8 -e 64M -f 4 -g 4 -c 1 > $out/nt_$t.txt 2>&1
  echo "rc $?"
  grep -v "baton INFO" $out/nt_$t.txt | grep -E "^ +[0-9]+|Avg bus|Out of bounds|wrong|error|Error" | tail -16
  echo "calls on baton: $(grep -c 'INFO NCCL .*: baton ' $out/nt_$t.txt), on NCCL: $(grep -c 'INFO NCCL .*: NCCL (' $out/nt_$t.txt)"
  grep -m2 'INFO NCCL .*: baton \|INFO NCCL .*: NCCL (' $out/nt_$t.txt
done
# CUDA graphs through the drop-in (nccl-tests -G: each call captured, the graph replayed).
bin=$NCCL_TESTS/all_reduce_perf
echo "=== LD_LIBRARY_PATH=build $bin -b 8 -e 64M -f 8 -g 4 -c 1 -G 5"
LD_LIBRARY_PATH=$lib timeout 150 $bin -b 8 -e 64M -f 8 -g 4 -c 1 -G 5 > $out/nt_all_reduce_G.txt 2>&1
echo "rc $?"
grep -v "baton INFO" $out/nt_all_reduce_G.txt | grep -E "^ +[0-9]+|Avg bus|Out of bounds|wrong|error|Error" | tail -12
echo "calls on baton: $(grep -c 'INFO NCCL .*: baton ' $out/nt_all_reduce_G.txt), on NCCL: $(grep -c 'INFO NCCL .*: NCCL (' $out/nt_all_reduce_G.txt)"
# NCCL's strongest small-message path, its symmetric-memory kernels (buffers
# from ncclMemAlloc registered with ncclCommWindowRegister: nccl-tests -R 2),
# NCCL alone, then the same command through baton's library.
for lp in "" "$lib"; do
  name=nt_all_reduce_R2${lp:+_baton}
  echo "=== ${lp:+LD_LIBRARY_PATH=build }$bin -b 8 -e 1M -f 2 -g 4 -c 1 -R 2"
  LD_LIBRARY_PATH=$lp timeout 150 $bin -b 8 -e 1M -f 2 -g 4 -c 1 -R 2 > $out/$name.txt 2>&1
  echo "rc $?"
  grep -v "baton INFO" $out/$name.txt | grep -E "^ +[0-9]+|Avg bus|Out of bounds|wrong|error|Error" | tail -12
done
if python3 -c 'import torch' 2>/dev/null; then
  # The NCCL functions PyTorch's libraries import, against what this library exports.
  tl=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  nm -D --defined-only $lib/libnccl.so.2 | awk '{print $3}' | sed 's/@.*//' | sort -u > $out/exports.txt
  for f in $tl/*.so*; do nm -D --undefined-only "$f" 2>/dev/null | awk '{print $2}' | sed 's/@.*//' | grep '^nccl'; done | sort -u > $out/torch_imports.txt
  echo "PyTorch ($tl) imports $(wc -l < $out/torch_imports.txt) nccl* functions; not exported here: $(comm -23 $out/torch_imports.txt $out/exports.txt | tr '\n' ' ')"
  cat $out/torch_imports.txt | tr '\n' ' '; echo
  echo "=== LD_PRELOAD=build/libnccl.so.2 python3 tools/measure/torch_check.py --ranks 4"
  LD_PRELOAD=$lib/libnccl.so.2 timeout 300 python3 tools/measure/torch_check.py --ranks 4 > $out/torch.txt 2>&1
  echo "rc $?"
  grep -v "^ok" $out/torch.txt | grep -v "baton INFO" | tail -12
  echo "calls on baton: $(grep -c 'INFO NCCL .*: baton ' $out/torch.txt), on NCCL: $(grep -c 'INFO NCCL .*: NCCL (' $out/torch.txt)"
  grep -m4 'INFO NCCL .*: baton \|INFO NCCL .*: NCCL (' $out/torch.txt
fi
