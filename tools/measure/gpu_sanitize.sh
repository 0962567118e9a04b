#!/usr/bin/env bash
# gpu_sanitize.sh -- compute-sanitizer over the gpu suite at small sizes:
# the runtime (--quick), the fused suites (GEMV + AllReduce, embedding
# bags + AllToAll, GEMM + AllToAll), window registration, and the GEMM +
# AllToAll with a process per rank, each under every tool of TOOLS.
# RANKS ranks share GPUS GPUs (rank r on GPU r % GPUS).  Each run goes into
# $OUT/TOOL_SUITE.txt; a line per run says its TAP counts and the
# sanitizer's errors, the reports of failed CUDA calls apart: baton asks
# the driver about pointers it may not own (cuMemGetAddressRange on host
# memory, cudaIpcGetMemHandle on cuMem memory, cuMemRetainAllocationHandle
# on cudaMalloc memory) and takes the refusal as the answer, and the
# sanitizer reports each such refusal.  Exit 1 when a run has a not-ok
# line or an error that is not such a report.
#   First, here (Lua is here; the GPU machine has none):
#     tools/measure/gpu_prep.sh build/tools/baton algorithms - 2 .device/algs/r2
#     tools/measure/gpu_prep.sh --fused build/tools/baton algorithms - 2 .device/algs/r2
#   Then there, with the build and .device carried:
#     ALGS=.device/algs/r2 RANKS=2 GPUS=1 bash tools/measure/gpu_sanitize.sh
# TOOLS (default "memcheck synccheck"); DEADLINE (seconds, default 540)
# skips a run that would start after it; LIMIT (default 300) stops one;
# RUNS (default 1) runs the runtime suite that many times under each tool
# (a wrong result the sanitizer's timing brings out may take several: the
# LL128 line stored flag first came in 4 of 7 runs).  SUITES (default
# "runtime fused embed moe register moe_procs") picks the suites: racecheck
# stops with an internal error on the GEMM tile engine's kernel (gpu_moe's),
# so TOOLS=racecheck takes SUITES="runtime fused embed register".
set -u
ranks=${RANKS:-2} gpus=${GPUS:-1} algs=${ALGS:-build/algs/r2}
tools=${TOOLS:-memcheck synccheck} deadline=${DEADLINE:-540} limit=${LIMIT:-300} runs=${RUNS:-1}
all_suites="runtime fused embed moe register moe_procs"
out=${OUT:-/tmp} suites=${SUITES:-$all_suites}
mkdir -p "$out" || exit 2
for s in $suites; do
  [[ " $all_suites " == *" $s "* ]] || { echo "gpu_sanitize.sh: SUITES has '$s'; the suites are $all_suites" >&2; exit 2; }
done
case "$ranks$gpus$runs" in *[!0-9]* | '') echo "gpu_sanitize.sh: RANKS, GPUS and RUNS are numbers" >&2; exit 2 ;; esac
runs=$((10#$runs)); ((runs >= 1)) || { echo "gpu_sanitize.sh: RUNS=$runs would skip the runtime suite; give 1 or more" >&2; exit 2; }
command -v compute-sanitizer > /dev/null || { echo "gpu_sanitize.sh: no compute-sanitizer on PATH" >&2; exit 2; }
. "$(dirname "$0")/gpu_lib.sh"
export NCCL_NVLS_ENABLE=0
t=./build/tests
bad=0

# san TOOL NAME ARGS...: one suite under one tool (gpu_test runs it and
# counts its checks), then the sanitizer's errors.
san() {
  local tool=$1 name=$1_$2 extra=()
  shift 2
  local f=$out/$name.txt
  [[ " $* " == *" --procs "* ]] && extra=(--target-processes all)
  gpu_test "$name" "$limit" compute-sanitizer --tool "$tool" "${extra[@]}" --print-limit 100 --error-exitcode 9 "$@"
  [ -n "$gpu_test_rc" ] || return   # skipped: past DEADLINE
  local rc=$gpu_test_rc total api notok
  total=$(grep -m1 -o 'ERROR SUMMARY: [0-9]*' "$f" | grep -o '[0-9]*$')
  api=$(grep -c 'Program hit .* on CUDA API call' "$f")
  notok=$(grep -c '^not ok' "$f")
  echo "   sanitizer: ${total:-no summary} errors, $api of them refused CUDA calls"
  grep '=========' "$f" | grep -v 'Program hit .* on CUDA API call\|Host Frame\|Saved host\|COMPUTE-SANITIZER\|ERROR SUMMARY\|^=========\s*$' |
    sed 's/ \[0x[0-9a-f]*\]//' | sort | uniq -c | sort -rn | head -8
  if ((notok > 0)) || [ -z "$total" ] || ((total > api)) || { ((rc != 0)) && ((rc != 9)); }; then bad=1; fi
}

# has SUITE: whether SUITES names it.
has() { [[ " $suites " == *" $1 "* ]]; }

for tool in $tools; do
  if has runtime; then
    for ((i = 1; i <= runs; i++)); do
      san "$tool" "runtime$( ((runs > 1)) && echo "_$i")" $t/gpu_runtime --ranks "$ranks" --gpus "$gpus" --quick --dir "$algs/default"
    done
  fi
  has fused && san "$tool" fused $t/gpu_fused --ranks "$ranks" --gpus "$gpus" --dir "$algs/fused"
  has embed && san "$tool" embed $t/gpu_embed --ranks "$ranks" --gpus "$gpus" --dir "$algs/fused"
  has moe && san "$tool" moe $t/gpu_moe --ranks "$ranks" --gpus "$gpus" --dir "$algs/fused"
  has register && san "$tool" register $t/gpu_register --ranks "$ranks" --gpus "$gpus" --dir "$algs"
  has moe_procs && san "$tool" moe_procs $t/gpu_moe --ranks "$ranks" --gpus "$gpus" --dir "$algs/fused" --procs
done
exit $bad
