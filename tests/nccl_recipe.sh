#!/usr/bin/env bash
# nccl_recipe.sh -- the drop-in recipe of docs/NCCL.md, as a user runs it,
# on the GPUs this machine has (one rank per GPU): make the algorithm set
# for N ranks, preload baton's libnccl.so.2 in front of PyTorch's NCCL,
# run tools/measure/torch_check.py (torch.distributed collectives checked against
# the host), and read the end-of-run summary line; then the same with
# BATON_ENABLE=0, which must run everything on NCCL and say so.
# Usage: nccl_recipe.sh BATON LIBNCCL_SO_2 TORCH_CHECK_PY.  Skips (a TAP plan of 0)
# without a GPU or without PyTorch.
set -u
baton=$1 lib=$2 check=$3
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || { echo "1..0 # SKIP no GPU"; exit 0; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || { echo "1..0 # SKIP no PyTorch with CUDA"; exit 0; }
n=$(python3 -c 'import torch; print(min(torch.cuda.device_count(), 8))')
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
k=0 fails=0
ok() { k=$((k + 1)); echo "ok $k - $1"; }
bad() { k=$((k + 1)); fails=$((fails + 1)); echo "not ok $k - $1"; }
# PyTorch's own NCCL (a wheel brings one): the real NCCL behind baton's.
real=$(python3 - <<'PY'
import glob, os, torch
d = os.path.dirname(torch.__file__)
hits = glob.glob(os.path.join(d, '..', 'nvidia', 'nccl', 'lib', 'libnccl.so.2')) + glob.glob(os.path.join(d, 'lib', 'libnccl.so*'))
print(os.path.realpath(hits[0]) if hits else '')
PY
)

# 1. The set for N ranks.
if "$baton" set "$n" -q -o "$t/set"; then ok "baton set $n"; else bad "baton set $n"; fi
# 2. The one line.
BATON_ALGO_DIR=$t/set BATON_NCCL_LIB=$real BATON_DEBUG=INFO BATON_DEBUG_SUBSYS=NCCL BATON_DEBUG_FILE=$t/on.%p.log \
  LD_PRELOAD=$lib timeout 200 python3 "$check" --ranks "$n" >"$t/on.txt" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q '^ok' "$t/on.txt" && ! grep -q '^not ok' "$t/on.txt"; then
  ok "torch_check.py --ranks $n through baton's libnccl.so.2: $(grep -c '^ok' "$t/on.txt") checks pass"
else
  bad "torch_check.py --ranks $n through baton's libnccl.so.2 (exit $rc)"; grep -v '^ok' "$t/on.txt" | tail -15 | sed 's/^/# /'
fi
cat "$t"/on.*.log > "$t/on.log" 2>/dev/null
sum=$(grep -h 'destroyed: [0-9]* collective calls ran on baton' "$t/on.log" | head -1)
nb=$(echo "$sum" | sed -n 's/.*destroyed: \([0-9]*\) collective calls.*/\1/p')
if [ -n "$nb" ] && [ "$nb" -gt 0 ]; then ok "the end-of-run summary: ${sum#*NCCL }"; else
  bad "no summary line with calls on baton"; grep -h 'WARN\|destroyed' "$t/on.log" | head -5 | sed 's/^/# /'; fi
if grep -q "baton runs the calls its [0-9]* algorithms fit" "$t/on.log"; then ok "the creation line says baton is on"; else
  bad "no creation line"; fi
# 3. Off without unloading it.
BATON_ENABLE=0 BATON_ALGO_DIR=$t/set BATON_NCCL_LIB=$real BATON_DEBUG_FILE=$t/off.%p.log LD_PRELOAD=$lib \
  timeout 200 python3 "$check" --ranks "$n" >"$t/off.txt" 2>&1
rc=$?
cat "$t"/off.*.log > "$t/off.log" 2>/dev/null
if [ $rc -eq 0 ] && ! grep -q '^not ok' "$t/off.txt"; then ok "BATON_ENABLE=0: the checks pass on NCCL"; else
  bad "BATON_ENABLE=0: exit $rc"; tail -5 "$t/off.txt" | sed 's/^/# /'; fi
if grep -q 'WARN NCCL communicator of .* destroyed: none of its [0-9]* .* ran on baton, all on NCCL (BATON_ENABLE=0)' "$t/off.log"; then
  ok "and the end-of-run WARN says nothing ran on baton, because of BATON_ENABLE=0"
else bad "no WARN summary with BATON_ENABLE=0"; head -5 "$t/off.log" | sed 's/^/# /'; fi
echo "1..$k"
[ $fails -eq 0 ]
