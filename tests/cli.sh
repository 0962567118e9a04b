#!/usr/bin/env bash
# unit suite: the baton command line -- help, exit codes and error messages.
# Usage: cli.sh BATON CORPUS_DIR SOURCE_ROOT   (TAP output)
set -u
baton=$1 corpus=$2 root=$3
n=0 failed=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() {  # check DESCRIPTION WANT_STATUS WANT_TEXT COMMAND...
  local what=$1 want=$2 text=$3; shift 3
  n=$((n + 1))
  out=$("$@" 2>&1); st=$?
  if [ $st -eq "$want" ] && grep -qF -- "$text" <<<"$out"; then echo "ok $n - $what"
  else echo "not ok $n - $what (status $st, wanted $want and '$text')"; echo "$out" | sed 's/^/#   /' | head; failed=$((failed + 1)); fi
}
check "baton --help lists commands" 0 "verify   validate IR files" "$baton" --help
check "no command is a usage error" 2 "usage: baton COMMAND" "$baton"
check "unknown command" 2 "unknown command 'frob'" "$baton" frob
for c in verify explain ops params; do check "$c --help" 0 "usage: baton $c" "$baton" $c --help; done
check "unknown dtype" 2 "unknown dtype 'f8'" "$baton" verify --dtype f8 x.xml
check "unknown op" 2 "unknown op 'xor'" "$baton" verify --op xor x.xml
check "bad count" 2 "bad --count '0'" "$baton" verify --count 0 x.xml
check "option without value" 2 "--expect needs a value" "$baton" verify x.xml --expect
check "bad --expect" 2 "--expect:3: expected 'r' near 'end of text'" "$baton" verify --expect 'o[' x.xml
check "missing file" 1 "nope.xml: cannot open" "$baton" verify nope.xml
check "wrong rank count" 1 "is for 4 ranks, not 8" "$baton" verify --ranks 8 "$corpus/allgather_ring_4r_simple.xml"
check "custom without --expect" 1 "needs --expect" "$baton" verify "$corpus/alltonext_fwd_2n.xml" --outofplace
sed 's/type="rrcs"/type="rrx"/' "$corpus/allreduce_ring_4r_1c_1i_simple.xml" > "$tmp/bad.xml"
check "verify names file, line, rank, tb and step" 1 "bad.xml:7: rank 0 tb 0 step 3: unknown opcode type=\"rrx\"" "$baton" verify "$tmp/bad.xml"
check "bad --dim" 2 "bad --dim 'K=-5' (NAME=N, N in 1..2147483648" "$baton" verify --dim K=-5 x.xml
check "an operand larger than baton takes" 1 "operand W of 4099 x 2147483648 elements is larger than baton takes" \
  "$baton" verify --dim K=2147483648 "$root/tests/fused_2r.xml"
# AddressSanitizer reserves terabytes of address space: no ulimit -v under it.
if grep -q __asan_init "$baton"; then n=$((n + 1)); echo "ok $n - a run that cannot allocate says so # SKIP ASan build"
else
check "a run that cannot allocate says so" 1 "FAILED (out of memory) with f32 sum" \
  bash -c 'ulimit -v 4000000 && exec "$0" verify --dim K=1000000 "$1"' "$baton" "$root/tests/fused_2r.xml"
fi
check "explain prints the listing" 0 "rank 3  (input 4 chunks" "$baton" explain "$corpus/allreduce_ring_4r_1c_1i_simple.xml"
check "explain of a broken file fails" 1 "unknown opcode" "$baton" explain "$tmp/bad.xml"
check "ops prints the opcode table" 0 '| `rrcs` | RRCS |' "$baton" ops
check "params lists every parameter" 0 "BATON_EXEC_SLOTS" "$baton" params
check "params shows a set value" 0 "BATON_EXEC_TILE      int  0        64" env BATON_EXEC_TILE=64 "$baton" params
check "a malformed parameter is a WARN" 0 "BATON_EXEC_SLOTS=many is not an integer in 1..1024; using default 8" \
  env BATON_EXEC_SLOTS=many "$baton" verify -q "$corpus/allgather_ring_4r_simple.xml"
check "INFO logs non-default parameters" 0 "BATON_EXEC_TILE set by environment to 16" \
  env BATON_DEBUG=INFO BATON_EXEC_TILE=16 "$baton" verify --tile 0 "$corpus/allgather_ring_4r_simple.xml"
check "NCCL_DEBUG=INFO sets baton's level when BATON_DEBUG is unset" 0 "BATON_EXEC_TILE set by environment to 16" \
  env -u BATON_DEBUG NCCL_DEBUG=INFO BATON_EXEC_TILE=16 "$baton" verify --tile 0 "$corpus/allgather_ring_4r_simple.xml"
n=$((n + 1))
out=$(env BATON_DEBUG=WARN NCCL_DEBUG=INFO BATON_EXEC_TILE=16 "$baton" verify --tile 0 "$corpus/allgather_ring_4r_simple.xml" 2>&1)
if ! grep -q "baton INFO" <<<"$out"; then echo "ok $n - BATON_DEBUG=WARN wins over NCCL_DEBUG=INFO"
else echo "not ok $n - BATON_DEBUG=WARN wins over NCCL_DEBUG=INFO"; failed=$((failed + 1)); fi
check "compile --sizes writes the size range into the IR" 0 'maxBytes="262144"' \
  "$baton" compile -q "$root/algorithms/allreduce_allpairs.lua" --param ranks=4 --param shot=1 --sizes 1K:256K
check "compile --sizes with MIN above MAX is a usage error" 2 "--sizes wants MIN:MAX" \
  "$baton" compile -q "$root/algorithms/allreduce_allpairs.lua" --param ranks=4 --sizes 4M:1K
check "compile a parallelize script (alternating rings, 2 instances)" 0 "allreduce on 8 ranks, 32 thread blocks, 480 steps" \
  "$baton" compile "$root/tests/alt_rings.lua" --param ranks=8 --param instances=2 -o "$tmp/alt.xml"
check "the compiled alternating rings verify (all types, uneven count, 2 slots)" 0 "ok  allreduce on 8 ranks, 32 tbs" \
  "$baton" verify --dtype all --count 37 --tile 3 --slots 2 "$tmp/alt.xml"
check "a program that deadlocks with 1 FIFO slot is refused before running" 1 \
  "exchange_2r.xml:10: rank 0 tb 0 step 1: deadlock with 1 FIFO slot per connection" "$baton" verify --slots 1 "$root/tests/exchange_2r.xml"
check "... and BATON_EXEC_SLOTS=1 means the same" 1 "deadlock with 1 FIFO slot per connection" \
  env BATON_EXEC_SLOTS=1 "$baton" verify "$root/tests/exchange_2r.xml"
check "... and it verifies with 2 slots" 0 "exchange_2r.xml: ok  allgather on 2 ranks" "$baton" verify --slots 2 "$root/tests/exchange_2r.xml"
check "compile refuses a ring that deadlocks with the runtime's slot count" 1 "deadlock with 1 FIFO slot per connection" \
  env BATON_EXEC_SLOTS=1 "$baton" compile "$root/algorithms/allreduce_ring.lua" --param ranks=4 -o "$tmp/ring1.xml"
check "... and writes nothing" 1 "absent" bash -c "test -e \"$tmp/ring1.xml\" && echo present || { echo absent; exit 1; }"
"$baton" compile -q "$root/algorithms/allreduce_ring.lua" --param ranks=4 -o "$tmp/r4.xml" --dot "$tmp/r4.dot" 2>/dev/null
dotsum="$(grep -c 'allreduce_ring.lua:[0-9]*"\]' "$tmp/r4.dot") steps, $(grep -c 'color=blue' "$tmp/r4.dot") messages,\
 $(grep -c 'subgraph cluster_r[0-3]_t0 ' "$tmp/r4.dot") tbs, $(grep -c 'r0t0s0 -> r1t0s1 \[color=blue' "$tmp/r4.dot") r0->r1"
check "compile --dot: a cluster per rank and tb, each step with provenance, each message an edge" 0 \
  "28 steps, 24 messages, 4 tbs, 1 r0->r1" echo "$dotsum"
check "explain --dot refuses an invalid program" 1 "no graph for an invalid program" \
  env BATON_EXEC_SLOTS=1 "$baton" explain --dot "$root/tests/exchange_2r.xml"
# The standard modules come from BATON_ALGO_LIB when it is set.
mkdir "$tmp/lib"
printf 'return { allreduce = function() error("the override was loaded") end }\n' > "$tmp/lib/ring.lua"
printf 'local ring = require "baton.ring"\ncollective{kind="allreduce", ranks=2, chunks=2, inplace=true}\nring.allreduce({0, 1}, "input", 0)\n' > "$tmp/s.lua"
check "BATON_ALGO_LIB overrides the built-in modules" 1 "s.lua:3: baton.ring:1: the override was loaded" \
  env BATON_ALGO_LIB="$tmp/lib" "$baton" compile "$tmp/s.lua"
printf 'error("bad module")\n' > "$tmp/lib/bad.lua"
printf 'assert(not pcall(require, "baton.bad"))\nrequire "baton.bad"\n' > "$tmp/bad.lua"
check "a module that fails to load fails again when required again" 1 "bad.lua:2: baton.bad:1: bad module" \
  env BATON_ALGO_LIB="$tmp/lib" "$baton" compile "$tmp/bad.lua"
check "a module missing from BATON_ALGO_LIB" 1 "s.lua:1: module 'baton.ring' not found: cannot open $tmp/nope/ring.lua (BATON_ALGO_LIB)" \
  env BATON_ALGO_LIB="$tmp/nope" "$baton" compile "$tmp/s.lua"
check "compile -o - writes the IR to standard output" 0 '<algo name="allreduce_ring"' \
  bash -c 'cd "$1" && "$0" compile -q "$2" --param ranks=2 -o -' "$(realpath "$baton")" "$tmp" "$root/algorithms/allreduce_ring.lua"
n=$((n + 1))
if [ ! -e "$tmp/-" ]; then echo "ok $n - compile -o - creates no file named '-'"
else echo "not ok $n - compile -o - created a file named '-'"; failed=$((failed + 1)); fi
check "a --param the script never reads is an error naming it" 1 \
  "allreduce_ring.lua: --param chanels is never read by this script (it reads: ranks, channels" \
  "$baton" compile -q "$root/algorithms/allreduce_ring.lua" --param ranks=2 --param chanels=2 -o "$tmp/typo.xml"
printf 'collective{kind="allreduce", ranks=2, protocl="LL"}\n' > "$tmp/typo.lua"
check "an unknown collective{} field is an error naming it and the script line" 1 \
  "typo.lua:1: collective{}: unknown field 'protocl' (it takes kind, ranks" "$baton" compile -q "$tmp/typo.lua" -o "$tmp/typo.xml"
printf 'collective{kind="allreduce", ranks=2}\nfor r = 0, 1 do chunk(r, "input", 0):copy((r + 1) %% 2, "scratch", 0, {chanel = 1}) end\n' > "$tmp/typo2.lua"
check "an unknown copy option is an error naming it and the script line" 1 \
  "typo2.lua:2: copy/reduce options: unknown option 'chanel' (it takes ch, sendtb, recvtb)" \
  "$baton" compile -q "$tmp/typo2.lua" -o "$tmp/typo2.xml"
check "the built-in modules need no files" 0 "allreduce on 2 ranks" "$baton" compile "$tmp/s.lua" -o "$tmp/s.xml"
# A compiled custom collective carries its postcondition (expect=) in the IR.
printf 'collective{kind="custom", ranks=4, chunks=2, inplace=false, expect="o[r][c]=i[r-1][c] if r>=1"}\nfor r = 0, 2 do chunk(r, "input", 0, 2):copy(r + 1, "output", 0) end\n' > "$tmp/next.lua"
check "a custom collective compiles" 0 "custom on 4 ranks" "$baton" compile "$tmp/next.lua" -o "$tmp/next.xml"
check "the IR carries expect (escaped)" 0 'expect="o[r][c]=i[r-1][c] if r&gt;=1"' cat "$tmp/next.xml"
check "verify takes the program's expect" 0 "next.xml: ok  custom on 4 ranks" "$baton" verify --dtype all "$tmp/next.xml"
check "--expect overrides it" 1 "rank 1 output chunk 0 element 0" "$baton" verify --expect 'o[r][c]=i[r][c] if r>=1' "$tmp/next.xml"
sed 's/ if r&gt;=1"/ iff r"/' "$tmp/next.xml" > "$tmp/badexp.xml"
check "a malformed expect attribute names file and line" 1 "badexp.xml:1: bad expect attribute: expect:19: unexpected text near 'iff r'" "$baton" verify "$tmp/badexp.xml"
sed 's/inplace="1"/inplace="1" expect="o[r][c]=i[r][c]"/' "$corpus/allgather_ring_4r_simple.xml" > "$tmp/agexp.xml"
check "expect on a built-in collective is refused" 1 'agexp.xml:1: expect="o[r][c]=i[r][c]" is only for coll="custom"' "$baton" verify "$tmp/agexp.xml"
# baton bench: usage, the sweep without a GPU, and a clean failure where no GPU is (or no CUDA build).
check "bench --help" 0 "usage: baton bench" "$baton" bench --help
check "bench --dry-run: nccl-tests' sweep" 0 "allreduce on 8 ranks, f32, out of place, 25 sizes" "$baton" bench -b 8 -e 128M -f 2 -g 8 --dry-run
check "bench --dry-run: the largest size" 0 "   134217728     33554432" "$baton" bench -b 8 -e 128M -f 2 -g 8 --dry-run
check "bench --dry-run needs -g" 2 "--dry-run needs -g N" "$baton" bench --dry-run
check "bench: a bad option" 2 "unknown option '--frob'" "$baton" bench --frob
for mode in "" "-P"; do
  n=$((n + 1))
  out=$(CUDA_VISIBLE_DEVICES="" "$baton" bench $mode -g 2 -b 8 -e 64 2>&1); st=$?
  if [ $st -eq 2 ] && grep -qE "baton bench: (rank 0: )?no GPU|needs a CUDA build" <<<"$out"; then echo "ok $n - bench $mode without a GPU: a clear error, status 2"
  else echo "not ok $n - bench $mode without a GPU (status $st)"; echo "$out" | sed 's/^/#   /' | head; failed=$((failed + 1)); fi
done
echo "1..$n"
[ $failed -eq 0 ]
