#!/usr/bin/env bash
# nccl_exports.sh -- what baton's libnccl.so.2 exports: its soname, exactly
# ncclX and pncclX for every row of runtime/nccl/rt_nccl.def, every host function
# nccl.h declares, and every function PyTorch's ProcessGroupNCCL and
# nccl-tests call.  TAP output.
# Usage: nccl_exports.sh LIBNCCL_SO RT_NCCL_DEF NCCL_H
set -u
lib=$1 def=$2 header=$3
n=0 failed=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libnccl.so.2 ]; ok $? "the soname is libnccl.so.2 (got '$soname')"

# Every global defined dynamic symbol, and what the table says there must be.
nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}' | sort > "$tmp/exported"
sed -n 's/^F([^,]*, *\([A-Za-z0-9]*\),.*/\1/p' "$def" | sort -u > "$tmp/rows"
[ "$(wc -l < "$tmp/rows")" -ge 40 ]; ok $? "the table has $(wc -l < "$tmp/rows") functions"
sed 's/^/nccl/' "$tmp/rows" > "$tmp/want"
sed 's/^/pnccl/' "$tmp/rows" >> "$tmp/want"
sort -o "$tmp/want" "$tmp/want"
extra=$(comm -13 "$tmp/want" "$tmp/exported" | tr '\n' ' ')
missing=$(comm -23 "$tmp/want" "$tmp/exported" | tr '\n' ' ')
[ -z "$missing" ]; ok $? "every table row is exported as ncclX and pncclX${missing:+ (missing: $missing)}"
[ -z "$extra" ]; ok $? "nothing else is exported${extra:+ (also: $extra)}"

# nccl.h's host API: every function it declares.
grep -oE '^(ncclResult_t|const char\*) +nccl[A-Za-z]+\(' "$header" | sed -E 's/.* (nccl[A-Za-z]+)\(/\1/' | sort -u \
  > "$tmp/header"
[ "$(wc -l < "$tmp/header")" -ge 35 ]; ok $? "nccl.h declares $(wc -l < "$tmp/header") host functions"
missing=$(comm -23 "$tmp/header" "$tmp/exported" | tr '\n' ' ')
[ -z "$missing" ]; ok $? "every function of nccl.h is exported${missing:+ (missing: $missing)}"

# What the two main users call.  PyTorch 2.x, torch/csrc/distributed/c10d
# (ProcessGroupNCCL.cpp, NCCLUtils.{hpp,cpp}, NCCL memory pool and symmetric
# memory): creation, split and shrink, finalize/abort/destroy, async errors,
# the collectives and point to point, PreMulSum for averaging, registration
# and windows, the NCCL allocator.
pytorch="ncclGetVersion ncclGetUniqueId ncclCommInitRank ncclCommInitRankConfig ncclCommInitRankScalable
ncclCommSplit ncclCommShrink ncclCommFinalize ncclCommAbort ncclCommDestroy ncclCommGetAsyncError ncclCommCount
ncclCommUserRank ncclGetErrorString ncclGetLastError ncclGroupStart ncclGroupEnd ncclAllReduce ncclBroadcast
ncclReduce ncclAllGather ncclReduceScatter ncclAlltoAll ncclSend ncclRecv ncclGather ncclScatter
ncclRedOpCreatePreMulSum ncclRedOpDestroy ncclCommRegister ncclCommDeregister ncclCommWindowRegister
ncclCommWindowDeregister ncclMemAlloc ncclMemFree"
# nccl-tests (NVIDIA/nccl-tests src/*.cu, built with NCCL 2.28 headers).
nccltests="ncclGetVersion ncclGetUniqueId ncclCommInitRank ncclCommInitRankConfig ncclCommInitAll ncclCommDestroy
ncclCommAbort ncclCommGetAsyncError ncclCommCount ncclCommUserRank ncclGetErrorString ncclGetLastError ncclGroupStart
ncclGroupEnd ncclAllReduce ncclAllGather ncclBroadcast ncclBcast ncclReduce ncclReduceScatter ncclAlltoAll ncclGather
ncclScatter ncclSend ncclRecv ncclRedOpCreatePreMulSum ncclRedOpDestroy ncclMemAlloc ncclMemFree ncclCommRegister
ncclCommDeregister ncclCommWindowRegister ncclCommWindowDeregister ncclDevCommCreate ncclDevCommDestroy"
for who in pytorch nccltests; do
  missing=""
  for f in ${!who}; do grep -qx "$f" "$tmp/exported" || missing="$missing $f"; done
  [ -z "$missing" ]; ok $? "every function $who calls is exported${missing:+ (missing:$missing)}"
done

echo "1..$n"
[ "$failed" = 0 ]
