#!/usr/bin/env bash
# unit suite: the baton command line -- help, exit codes and error messages.
# Usage: cli.sh BATON CORPUS_DIR SOURCE_ROOT   (TAP output)
set -u
baton=$1 corpus=$2 root=$3
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
check() {  # check DESCRIPTION WANT_STATUS WANT_TEXT COMMAND...
  local what=$1 want=$2 text=$3; shift 3
  if corpus_lacks "$@"; then skip "$what" "needs the MSCCL corpus, missing at $corpus (README, Tests)"; return; fi
  out=$("$@" 2>&1); st=$?
  local pass=0; [ $st -eq "$want" ] && grep -qF -- "$text" <<<"$out" && pass=1
  verdict $pass "$what" "status $st, wanted $want and '$text'" "$out"
}
# check_exact DESCRIPTION WANT_STATUS WANT_OUTPUT COMMAND...: standard output and error together are exactly WANT_OUTPUT.
check_exact() {
  local what=$1 want=$2 text=$3; shift 3
  if corpus_lacks "$@"; then skip "$what" "needs the MSCCL corpus, missing at $corpus (README, Tests)"; return; fi
  out=$("$@" 2>&1); st=$?
  local pass=0; [ $st -eq "$want" ] && [ "$out" = "$text" ] && pass=1
  verdict $pass "$what" "status $st, wanted $want and exactly '$text'" "$out"
}
check "baton --help lists commands" 0 "verify   validate IR files" "$baton" --help
check "baton --help: -d and -o take all" 0 "-d, --dtype T   f32, f64, f16, bf16, i32, u32, i64, u64, i8, u8, or (verify) all" "$baton" --help
check "baton --help: sizes take K, M, G" 0 "K, M, G suffixes, x1024, x1024^2, x1024^3 (64K is 65536)" "$baton" --help
check "no command is a usage error" 2 "usage: baton COMMAND" "$baton"
check "unknown command" 2 "unknown command 'frob'" "$baton" frob
for c in verify explain ops params; do check "$c --help" 0 "usage: baton $c" "$baton" $c --help; done
check "unknown dtype" 2 "unknown dtype 'f8'" "$baton" verify --dtype f8 x.xml
check "unknown op" 2 "unknown op 'xor'" "$baton" verify --op xor x.xml
check "options: getopt_long's forms (--count=5, a unique start --cou, -qv together)" 0 "" \
  "$baton" verify -qv --cou 5 --tile=1 "$root/tests/exchange_2r.xml"
check "options: -- before a file whose name starts with -" 0 "ok  allgather on 2 ranks" \
  bash -c "cp '$root/tests/exchange_2r.xml' '$tmp/-x.xml' && b=\$(realpath '$baton') && cd '$tmp' && \"\$b\" verify -- -x.xml"
check "options: a missing value in the command's words" 2 "baton compile: -o needs a value" "$baton" compile x.lua -o
check "options: an unknown letter in a bundle" 2 "baton verify: unknown option '-x'" "$baton" verify -qx a.xml
check "verify -o is refused: -o is an output file in baton's commands" 2 "the reduction operator is --op" \
  "$baton" verify -o sum x.xml
check "... -oall too" 2 "the reduction operator is --op" "$baton" verify -oall x.xml
check "bad count" 2 "bad --count '0'" "$baton" verify --count 0 x.xml
check "option without value" 2 "--expect needs a value" "$baton" verify x.xml --expect
check "bad --expect" 2 "--expect:3: expected 'r' near 'end of text'" "$baton" verify --expect 'o[' x.xml
check_exact "a missing file is missing, not invalid" 1 "nope.xml: cannot open: No such file or directory" "$baton" verify nope.xml
check "baton help CMD is CMD --help" 0 "usage: baton compile SCRIPT.lua" "$baton" help compile
check_exact "explain -q prints nothing for a valid file (a check)" 0 "" \
  "$baton" explain -q "$root/algorithms/ir/allreduce_ring_8r.xml"
check_exact "explain of a missing file says it cannot open it" 1 "nope.xml: cannot open: No such file or directory" \
  "$baton" explain -q nope.xml
check "set -v adds each program's compile summary" 0 "verified on the CPU" "$baton" set 1 -v -o "$tmp/setv"
check "baton help of an unknown command" 2 "baton: unknown command 'frob'" "$baton" help frob
check "a one-letter option takes its value attached (-oFILE), as getopt does" 0 "" \
  bash -c '"$0" compile -q "$1/algorithms/allreduce_ring.lua" -o"$2/attached.xml" && test -s "$2/attached.xml"' "$baton" "$root" "$tmp"
check_exact "a --param given twice is refused" 2 "baton compile: --param ranks is given twice (ranks=4, then ranks=8)" \
  "$baton" compile -q "$root/algorithms/allreduce_ring.lua" --param ranks=4 --param ranks=8
check_exact "an output path that cannot be written says why, in the command's words" 1 \
  "baton compile: cannot write $tmp/no/dir/x.xml: No such file or directory" \
  "$baton" compile -q "$root/algorithms/allreduce_ring.lua" -o "$tmp/no/dir/x.xml"
check "wrong rank count" 1 "is for 4 ranks, not 8" "$baton" verify --ranks 8 "$corpus/allgather_ring_4r_simple.xml"
check "custom without --expect" 1 "needs --expect" "$baton" verify "$corpus/alltonext_fwd_2n.xml" --outofplace
derive "$tmp/bad.xml" sed 's/type="rrcs"/type="rrx"/' "$corpus/allreduce_ring_4r_1c_1i_simple.xml"
check "verify names file, line, rank, tb and step" 1 "bad.xml:7: rank 0 tb 0 step 3: unknown opcode type=\"rrx\"" "$baton" verify "$tmp/bad.xml"
check "bad --dim" 2 "bad --dim 'K=-5' (NAME=N, N in 1..2147483648" "$baton" verify --dim K=-5 x.xml
check "an operand larger than baton takes" 1 "operand W of 4099 x 2147483648 elements is larger than baton takes" \
  "$baton" verify --dim K=2147483648 "$root/tests/fused_2r.xml"
# AddressSanitizer reserves terabytes of address space: no ulimit -v under it.
if grep -q __asan_init "$baton"; then n=$((n + 1)); echo "ok $n - operands that cannot be allocated are refused before the run # SKIP ASan build"
else
check "operands that cannot be allocated are refused before the run, with the count that fits" 1 \
  "the buffers and operands of a 4-byte type would need 32800209108 bytes, over the 4096000000 bytes of memory this machine gives the process; use --count 510 or less" \
  bash -c 'ulimit -v 4000000 && exec "$0" verify --dim K=1000000 "$1"' "$baton" "$root/tests/fused_2r.xml"
fi
check "explain prints the listing" 0 "rank 3  (input 4 chunks" "$baton" explain "$corpus/allreduce_ring_4r_1c_1i_simple.xml"
check "explain of a broken file fails" 1 "unknown opcode" "$baton" explain "$tmp/bad.xml"
check "ops prints the opcode table" 0 '| `rrcs` | RRCS |' "$baton" ops
check "params lists every parameter" 0 "BATON_EXEC_SLOTS" "$baton" params
check "params shows a set value" 0 "BATON_EXEC_TILE      int  0        64" env BATON_EXEC_TILE=64 "$baton" params
check "a malformed parameter is a WARN" 0 "BATON_EXEC_SLOTS=many is not an integer in 1..1024; using default 8" \
  env BATON_EXEC_SLOTS=many "$baton" verify -q "$corpus/allgather_ring_4r_simple.xml"
check "params shows a refused value beside the default used" 0 "BATON_EXEC_SLOTS     int  8        8 (refused: 'many')" \
  env BATON_EXEC_SLOTS=many "$baton" params
check "an integer parameter is decimal: 0600 is six hundred, not octal 384" 0 "BATON_NTHREADS=0600 is out of its range 32..512" \
  env BATON_NTHREADS=0600 "$baton" verify -q "$corpus/allgather_ring_4r_simple.xml"
check "... and 08 is an integer" 0 "BATON_EXEC_SLOTS set by environment to 08" \
  env BATON_DEBUG=INFO BATON_EXEC_SLOTS=08 "$baton" verify -q "$corpus/allgather_ring_4r_simple.xml"
check "params takes no arguments" 2 "baton params: takes no arguments, got '--bogus'" "$baton" params --bogus
check "ops takes no arguments" 2 "baton ops: takes no arguments, got 'junk'" "$baton" ops junk
check "compile --param =5 names no key" 2 "--param wants KEY=VALUE, not '=5'" "$baton" compile x.lua --param =5
check "--dim of a name the program lacks is refused" 1 "fused_2r.xml: --dim k: the program has no such dimension (its dimensions: K)" \
  "$baton" verify --dim k=64 "$root/tests/fused_2r.xml"
check "bench --fused --rows with 17 sizes names the limit" 2 "baton bench: --rows takes at most 16 values, got 17" \
  "$baton" bench --fused gemv_allreduce --rows 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17
long="$tmp/$(printf 'd%.0s' $(seq 1200)).xml"
check "a 1,200-character path keeps the reason at the end of its message" 1 ".xml: cannot open: File name too long" \
  "$baton" verify "$long"
check "INFO logs non-default parameters" 0 "BATON_EXEC_TILE set by environment to 16" \
  env BATON_DEBUG=INFO BATON_EXEC_TILE=16 "$baton" verify --tile 0 "$corpus/allgather_ring_4r_simple.xml"
check "NCCL_DEBUG=INFO sets baton's level when BATON_DEBUG is unset" 0 "BATON_EXEC_TILE set by environment to 16" \
  env -u BATON_DEBUG NCCL_DEBUG=INFO BATON_EXEC_TILE=16 "$baton" verify --tile 0 "$corpus/allgather_ring_4r_simple.xml"
if corpus_lacks "$corpus/allgather_ring_4r_simple.xml"; then
  skip "BATON_DEBUG=WARN wins over NCCL_DEBUG=INFO" "needs the MSCCL corpus, missing at $corpus (README, Tests)"
else
  out=$(env BATON_DEBUG=WARN NCCL_DEBUG=INFO BATON_EXEC_TILE=16 "$baton" verify --tile 0 "$corpus/allgather_ring_4r_simple.xml" 2>&1)
  pass=1; grep -q "baton INFO" <<<"$out" && pass=0
  verdict $pass "BATON_DEBUG=WARN wins over NCCL_DEBUG=INFO" "an INFO line was printed" "$out"
fi
check "compile --sizes writes the size range into the IR" 0 'maxBytes="262144"' \
  "$baton" compile -q "$root/algorithms/allreduce_allpairs.lua" --param ranks=4 --param shot=1 --sizes 1K:256K
check "compile --sizes with MIN above MAX is a usage error" 2 "--sizes wants MIN:MAX" \
  "$baton" compile -q "$root/algorithms/allreduce_allpairs.lua" --param ranks=4 --sizes 4M:1K
# Fusing steps found each candidate's readers by scanning every step: a
# 64-rank all-pairs program took 4 s to reach this refusal (2 cores); now
# 0.1 s, under the sanitizers a few times that, and more on a loaded
# machine (3 s leaves room for both and still catches the old 4 s).
check "a 64-rank all-pairs program with too many thread blocks is refused within 3 seconds" 1 \
  "rank 0 needs 256 thread blocks, more than the 108 a GPU runs at once" \
  env BATON_COMPILE_TIMEOUT=3 "$baton" compile -q "$root/algorithms/allreduce_allpairs.lua" --param ranks=64 --param shot=2 \
  --param instances=4 --param placement=paired -o "$tmp/ar64.xml"
check "compile a parallelize script (alternating rings, 2 instances)" 0 "allreduce on 8 ranks, 32 thread blocks, 480 steps" \
  "$baton" compile "$root/tests/alt_rings.lua" --param ranks=8 --param instances=2 -o "$tmp/alt.xml"
check "the compiled alternating rings verify (all types, uneven count, 2 slots)" 0 "ok  allreduce on 8 ranks, 32 tbs" \
  "$baton" verify --dtype all --count 37 --tile 3 --slots 2 "$tmp/alt.xml"
# Instances keep an instance's share of a multi-chunk message in one step:
# Bruck's rounds send 4 blocks per rank, so 2 instances make 2 x 24 sends.
check "compile Bruck with 2 instances (8 ranks)" 0 "alltoall on 8 ranks, 112 thread blocks, 268 steps" \
  "$baton" compile "$root/algorithms/alltoall_bruck.lua" --param ranks=8 --param instances=2 -o "$tmp/bruck2.xml"
check_exact "... each instance sends each round's 4 blocks as one message (48 sends)" 0 "48" \
  grep -c 'type="s" .*cnt="4"' "$tmp/bruck2.xml"
# Its messages are strided (runs of 2^i blocks 2^(i+1) apart) and it packs
# nothing: the sends of the first two rounds land strided in the receiver's
# work buffer, and it has fewer steps than the packing version's 208.
check_exact "... the sends of rounds 1 and 2 carry the receiver's pattern (32 sends)" 0 "32" \
  grep -c 'type="s" [^>]*dstrun=' "$tmp/bruck2.xml"
check "compile Bruck (8 ranks): 85 steps, strided" 0 "alltoall on 8 ranks, 56 thread blocks, 85 steps" \
  "$baton" compile "$root/algorithms/alltoall_bruck.lua" --param ranks=8 -o "$tmp/bruck1.xml"
# A step that waits for several thread blocks carries them all (xdeps),
# and no wait is written that another implies: no chain of nop steps (68
# of its 153 steps were nops with one wait each), 3 steps with two waits.
check_exact "... no nop steps" 1 "0" grep -c 'type="nop"' "$tmp/bruck1.xml"
check_exact "... steps that wait for several thread blocks at once" 0 "3" grep -c ' xdeps="' "$tmp/bruck1.xml"
check "... and MSCCL's loaders refuse the file (baton's protocol name)" 0 'proto="baton-Simple"' \
  grep -o 'proto="[^"]*"' "$tmp/bruck1.xml"
# verify --as-run: the program as a communicator loads and calls it.
check "verify --as-run: a step's further dependencies become nop steps, as the runtime loads it" 0 \
  "as run: 3 nop steps carry the dependencies past each step's first" "$baton" verify --as-run "$tmp/bruck1.xml"
check "... and that form passes with the runtime's FIFO slots" 0 "bruck1.xml: ok  alltoall on 8 ranks, 56 tbs, 88 steps" \
  "$baton" verify --as-run "$tmp/bruck1.xml"
check "... an in-place program runs in place and out of place" 0 "in-place), 17 tiles" \
  "$baton" verify --as-run "$root/tests/exchange_2r.xml"
check "... and out of place too" 0 "out-of-place), 17 tiles" "$baton" verify --as-run "$root/tests/exchange_2r.xml"
"$baton" compile -q "$root/algorithms/broadcast_tree.lua" --param ranks=4 -o "$tmp/bt4.xml"
check "... a rooted program runs for every root" 0 "ok  broadcast rooted at 3 on 4 ranks" "$baton" verify --as-run "$tmp/bt4.xml"
sed 's/slots="[0-9]*"/slots="4"/' "$tmp/bruck1.xml" > "$tmp/slots4.xml"
check "... a program proven for more slots than BATON_EXEC_SLOTS is refused, as the runtime refuses it" 1 \
  "slots4.xml: not run: it is proven deadlock-free with 4 FIFO slots per connection (slots=\"4\"), and BATON_EXEC_SLOTS is 2: a communicator does not load it" \
  env BATON_EXEC_SLOTS=2 "$baton" verify --as-run "$tmp/slots4.xml"
check "... --as-run with --root is a usage error" 2 "--as-run runs a rooted program for every root" \
  "$baton" verify --as-run --root 1 "$tmp/bt4.xml"
check_exact "... its strided steps (srcrun or dstrun): rounds, and the reversed copies out" 0 "48" \
  grep -c 'srcrun=\|dstrun=' "$tmp/bruck1.xml"
check "a program that deadlocks with 1 FIFO slot is refused before running" 1 \
  "exchange_2r.xml:10: rank 0 tb 0 step 1: deadlock with 1 FIFO slot per connection" "$baton" verify --slots 1 "$root/tests/exchange_2r.xml"
check "... and BATON_EXEC_SLOTS=1 means the same" 1 "deadlock with 1 FIFO slot per connection" \
  env BATON_EXEC_SLOTS=1 "$baton" verify "$root/tests/exchange_2r.xml"
check "... and it verifies with 2 slots" 0 "exchange_2r.xml: ok  allgather on 2 ranks" "$baton" verify --slots 2 "$root/tests/exchange_2r.xml"
check "compile refuses a ring that deadlocks with the runtime's slot count" 1 "deadlock with 1 FIFO slot per connection" \
  env BATON_EXEC_SLOTS=1 "$baton" compile "$root/algorithms/allreduce_ring.lua" --param ranks=4 -o "$tmp/ring1.xml"
check "... and writes nothing" 1 "absent" bash -c "test -e \"$tmp/ring1.xml\" && echo present || { echo absent; exit 1; }"
# A script whose program fails the deadlock proof (a ring with 1 slot): the
# error starts with the script line of the cycle's first step, and each
# run of steps in the path names its line.
check "a compiled deadlock starts with the script line of the cycle's first step" 1 \
  "algorithms/allreduce_ring.lua:13: rank 0 tb 0 step " \
  bash -c 'cd "$1" && BATON_EXEC_SLOTS=1 "$0" compile -q algorithms/allreduce_ring.lua --param ranks=4 -o "$2"' \
  "$(realpath "$baton")" "$root" "$tmp/ring1.xml"
check "... and names the line of every step in the cycle" 0 "4 of 4" \
  bash -c 'out=$(BATON_EXEC_SLOTS=1 "$0" compile -q "$1" --param ranks=4 -o "$2" 2>&1 | grep "deadlock with")
    echo "$(grep -oE "rank [0-9]+ tb 0 step [0-9.]+ \(allreduce_ring\.lua:13\) -\[slot\]-> " <<<"$out" | wc -l) of $(grep -oE -- "-\[slot\]-> " <<<"${out#*frees a slot): }" | wc -l)"' \
  "$baton" "$root/algorithms/allreduce_ring.lua" "$tmp/ring1.xml"
check "a long cycle's path is cut short, saying how much is left out" 1 \
  "(allreduce_ring.lua:13) -[slot]-> rank 63 tb 0 step " \
  env BATON_EXEC_SLOTS=1 "$baton" compile -q "$root/algorithms/allreduce_ring.lua" --param ranks=64 -o "$tmp/ring64.xml"
check "... in one bounded line" 0 "1 line under 1000 characters ending: more runs of steps) back" \
  bash -c 'env BATON_EXEC_SLOTS=1 "$0" compile -q "$1" --param ranks=64 -o "$2" 2>&1 | grep "deadlock with" |
    awk "length(\$0) < 1000 { n++; e = substr(\$0, length(\$0) - 23) } END { print n \" line under 1000 characters ending: \" e }"' \
  "$baton" "$root/algorithms/allreduce_ring.lua" "$tmp/ring64.xml"
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
  "typo2.lua:2: copy options: unknown option 'chanel' (it takes ch, sendtb, recvtb, run, stride, via)" \
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
derive "$tmp/agexp.xml" sed 's/inplace="1"/inplace="1" expect="o[r][c]=i[r][c]"/' "$corpus/allgather_ring_4r_simple.xml"
check "expect on a built-in collective is refused" 1 'agexp.xml:1: expect="o[r][c]=i[r][c]" is only for coll="custom"' "$baton" verify "$tmp/agexp.xml"
# DSL errors: one "script:line: message" line; the Lua traceback only with -v.
abs=$(realpath "$baton")
printf 'collective{kind="allreduce", ranks=2, chunks=1}\nlocal x = nil\nx.y = 1\n' > "$tmp/nil.lua"
check_exact "a Lua error is one script:line line" 1 "nil.lua:3: attempt to index a nil value (local 'x')" \
  bash -c 'cd "$1" && "$0" compile -q nil.lua -o nil.xml' "$abs" "$tmp"
check_exact "compile -v adds the Lua traceback" 1 $'nil.lua:3: attempt to index a nil value (local \'x\')\nstack traceback:\n\tnil.lua:3: in main chunk' \
  bash -c 'cd "$1" && "$0" compile -q -v nil.lua -o nil.xml' "$abs" "$tmp"
long="$tmp/a_directory_name_long_enough_that_lua_shortens_the_path_in_its_messages"
mkdir -p "$long" && cp "$tmp/nil.lua" "$long/"
check_exact "a long script path is not named twice (once, shortened by Lua)" 0 "1" \
  bash -c '"$0" compile -q "$1" 2>&1 | grep -o "nil.lua:3:" | wc -l' "$baton" "$long/nil.lua"
printf 'collective{kind="allreduce", ranks=2, chunks=1}\nerror({})\n' > "$tmp/obj.lua"
check_exact "an error object that is not a string gets the line" 1 "obj.lua:2: error object is a table value" \
  bash -c 'cd "$1" && "$0" compile -q obj.lua -o obj.xml' "$abs" "$tmp"
printf 'local function f() error("no position", 0) end\nf()\n' > "$tmp/lvl0.lua"
printf 'collective{ kind = "allreduce", ranks = 2, chunks = 1, inplace = true }\nlocal function send(a, b)\n  chunk(a, "input", 0):copy(b, "ouput", 0)\nend\nlocal function both()\n  send(0, 1)\nend\nboth()\n' > "$tmp/helper.lua"
check "an error in a helper names the helper's line, then its callers' (a traceback of the script's frames)" 1 \
  "helper.lua:3: 'ouput' is not a buffer: did you mean 'output'?" \
  bash -c 'cd "$1" && "$0" compile -q helper.lua -o helper.xml' "$abs" "$tmp"
check "... ending with the lines that called it" 1 "(called from helper.lua:6, helper.lua:8)" \
  bash -c 'cd "$1" && "$0" compile -q helper.lua -o helper.xml' "$abs" "$tmp"
check_exact "error(msg, 0) gets the script line, and the lines that called its function" 1 \
  "lvl0.lua:1: no position (called from lvl0.lua:2)" \
  bash -c 'cd "$1" && "$0" compile -q lvl0.lua -o lvl0.xml' "$abs" "$tmp"
check_exact "a DSL error is one line too" 1 \
  "typo.lua:1: collective{}: unknown field 'protocl' (it takes kind, ranks, chunks, inplace, protocol, instances, threads, name, minbytes, maxbytes, topology, expect, vars, tileorder, interleave, input_chunks, output_chunks, placement, via)" \
  bash -c 'cd "$1" && "$0" compile -q typo.lua -o typo.xml' "$abs" "$tmp"
# Channel overflow: the script line that asked for the channel.
printf 'collective{kind="custom", ranks=2, chunks=70, inplace=false, expect="o[r][c]=i[r-1][c] if r>=1"}\nfor c = 0, 69 do\n  chunk(0, "input", c):copy(1, "output", c, {ch = c})\nend\n' > "$tmp/ch.lua"
check_exact "too many channels names the line that asked" 1 \
  "ch.lua:3: ch=69: the program needs 70 channels, more than the 64 a program may have (a fixed limit: use fewer channels)" \
  bash -c 'cd "$1" && "$0" compile -q ch.lua -o ch.xml' "$abs" "$tmp"
sed 's/inplace=false,/inplace=false, instances=8,/; s/ch = c}/ch = c % 9}/' "$tmp/ch.lua" > "$tmp/ch8.lua"
check "... and the instances that multiply them" 1 "ch8.lua:3: ch=8: the program needs 72 channels (9 per instance x 8 instances set at ch8.lua:1)" \
  bash -c 'cd "$1" && "$0" compile -q ch8.lua -o ch8.xml' "$abs" "$tmp"
printf 'collective{kind="allreduce", ranks=2, chunks=1, inplace=true}\nparallelize(64, function()\n  chunk(1, "input", 0):reduce(chunk(0, "input", 0))\nend)\nchunk(1, "input", 0):copy(0, "input", 0)\n' > "$tmp/chp.lua"
check "... or the parallelize that replicates them" 1 "chp.lua:2: the program needs 65 channels (1 outside parallelize + 64 x 1 for parallelize(64) at chp.lua:2)" \
  bash -c 'cd "$1" && "$0" compile -q chp.lua -o chp.xml' "$abs" "$tmp"
# Thread blocks over the limit: the line that opens the most, and what the script can change.
printf 'collective{kind="alltoall", ranks=56, chunks=1}\nfor r = 0, 55 do for q = 0, 55 do chunk(r, "input", q):copy(q, "output", r) end end\n' > "$tmp/tbs.lua"
check_exact "too many thread blocks names the line and the peers, not channels or instances" 1 \
  "tbs.lua:2: rank 0 needs 111 thread blocks, more than the 108 a GPU runs at once: it sends to 55 peers and receives from 55, a thread block per peer and direction (110), plus 1 for local copies and reductions; use placement = \"paired\" (a peer's send and receive in one thread block), or fewer peers" \
  bash -c 'cd "$1" && "$0" compile -q tbs.lua -o tbs.xml' "$abs" "$tmp"
# An out-of-place program that writes its input: at the line, while tracing.
printf 'collective{kind="allreduce", ranks=2, chunks=1}\nlocal a = chunk(1, "input", 0):reduce(chunk(0, "input", 0))\na:copy(1, "output", 0)\na:copy(0, "output", 0)\n' > "$tmp/oop.lua"
check_exact "an out-of-place program that writes its input is refused at the line" 1 \
  "oop.lua:2: reduce into rank 1 input[0] writes the input buffer of an out-of-place collective (declared at oop.lua:1 without inplace = true), which a call must leave unchanged; write into output or a scratch buffer, or declare inplace = true" \
  bash -c 'cd "$1" && "$0" compile -q oop.lua -o oop.xml' "$abs" "$tmp"
# verify and compile refuse options that do not fit, at once, in one line.
ag="$corpus/allgather_ring_4r_simple.xml"
check_exact "--expect with a built-in collective is refused" 2 \
  "$ag: --expect is for custom collectives; allgather has its own postcondition (verify it without --expect)" \
  "$baton" verify --expect 'o[r][c]=i[r][c]' "$ag"
check "in a batch, --expect goes to the custom collective and a built-in one keeps its own" 0 \
  "allgather: its own postcondition (--expect is for the batch's custom collectives)" \
  "$baton" verify --outofplace --expect 'o[r][c]=i[r-1][c] if r>=1' "$corpus/alltonext_fwd_2n.xml" "$ag"
check "a batch ends with one line naming the files that failed, and exits by the worst" 1 \
  "baton verify: 2 files: 1 passed, 1 failed (alltonext_fwd_2n.xml)" \
  "$baton" verify -q "$ag" "$corpus/alltonext_fwd_2n.xml"
printf 'collective{ kind = "custom", ranks = 2, chunks = 1, inplace = false, expect = "o[r][c]=i[1][c]" }\nchunk(1, "input", 0):copy(1, "output", 0)\nchunk(1, "input", 0):copy(0, "output", 0)\n' > "$tmp/from1.lua"
"$baton" compile -q "$tmp/from1.lua" -o "$tmp/from1.xml"
check "a wrong result of a custom collective names the rule that applied" 1 \
  "expected 3 (input chunk 0 of rank 0, by rule 2: o[r][c]=i[0][c] if r==0)" \
  "$baton" verify --expect 'o[r][c]=i[1][c] if r==1; o[r][c]=i[0][c] if r==0' "$tmp/from1.xml"
check_exact "--inplace with --outofplace is refused" 2 \
  "baton verify: --inplace and --outofplace exclude each other; give one (or neither: the program's own placement)" \
  "$baton" verify --inplace --outofplace "$ag"
mkdir -p "$tmp/dir.xml" "$tmp/dir.lua"
check_exact "verify refuses a directory" 2 "baton verify: $tmp/dir.xml is a directory, not an IR file" "$baton" verify "$ag" "$tmp/dir.xml"
check_exact "compile refuses a directory" 2 "baton compile: $tmp/dir.lua is a directory, not a Lua script" "$baton" compile "$tmp/dir.lua"
check "a count too large for memory names the --count that fits" 1 "the buffers of a 8-byte type would need 10995116318720 bytes, over the" \
  "$baton" verify --dtype f64 --count 64G "$ag"
check "... and says which option to change" 1 "; use --count " "$baton" verify --dtype f64 --count 64G "$ag"
check "verify takes at most 256 files" 2 "baton verify: at most 256 files at a time" "$baton" verify $(for i in $(seq 257); do echo "$ag"; done)
# One option vocabulary: -d/-o with all, K/M/G on counts.
check "verify -d all --op all --count 4K --tile 1k" 0 "50 runs (all types all ops, count 4096, in-place)" \
  "$baton" verify -d all --op all --count 4K --tile 1k "$corpus/allreduce_1step_4r_ll.xml"
check "--count with an unknown suffix" 2 "bad --count '3T': not an integer (suffixes K, M, G allowed)" "$baton" verify --count 3T "$ag"
check "--count whose suffix overflows" 2 "bad --count '99999999999G': must be 1..281474976710656" "$baton" verify --count 99999999999G "$ag"
check "--slots takes a suffix (1K is 1024)" 0 "allgather_ring_4r_simple.xml: ok  allgather on 4 ranks" "$baton" verify --slots 1K "$ag"
check "... within its range" 2 "bad --slots '2K': must be 1..1024" "$baton" verify --slots 2K "$ag"
check "--dim takes a suffix" 1 "operand W of 4099 x 2147483648 elements is larger than baton takes" \
  "$baton" verify --dim K=2G "$root/tests/fused_2r.xml"
# Environment parameters: a WARN naming the parameter, the bad value and what is used.
check "an out-of-range parameter is a WARN" 0 "BATON_EXEC_SLOTS=0 is out of its range 1..1024; using default 8" \
  env BATON_EXEC_SLOTS=0 "$baton" verify -q "$ag"
check "a non-integer parameter is a WARN" 0 "BATON_EXEC_SLOTS=abc is not an integer in 1..1024; using default 8" \
  env BATON_EXEC_SLOTS=abc "$baton" verify -q "$ag"
check "an unknown BATON_DEBUG level is a WARN" 0 "BATON_DEBUG=LOUD is not one of NONE, WARN, INFO, TRACE, VERSION; using WARN" \
  env BATON_DEBUG=LOUD "$baton" verify -q "$ag"
check "an unknown NCCL_DEBUG level is a WARN" 0 "NCCL_DEBUG=LOUD is not one of NONE, WARN, INFO, TRACE, VERSION, ABORT; using WARN" \
  env -u BATON_DEBUG NCCL_DEBUG=LOUD "$baton" verify -q "$ag"
check_exact "NCCL_DEBUG=VERSION is no mistake" 0 "" env -u BATON_DEBUG NCCL_DEBUG=VERSION "$baton" verify -q "$ag"
check "an unknown subsystem is a WARN listing the known ones" 0 \
  "BATON_DEBUG_SUBSYS=IR,FOO: unknown subsystem 'FOO' (known: IR, EXEC, COMPILER, RUNTIME, BOOTSTRAP, TOOL, NCCL, ALL" \
  env BATON_DEBUG_SUBSYS=IR,FOO "$baton" verify -q "$ag"
check "a log file that cannot be opened is a WARN" 0 "BATON_DEBUG_FILE=$tmp/no/log: cannot open $tmp/no/log: No such file or directory; logging to standard error" \
  env BATON_DEBUG_FILE="$tmp/no/log" "$baton" verify -q "$ag"
check "an unknown BATON_PROTO is a WARN" 0 "BATON_PROTO=LL9 is not one of: Simple, or empty; using default (empty: each program runs its own protocol)" \
  env BATON_PROTO=LL9 "$baton" compile -q "$root/algorithms/allreduce_ring.lua" --param ranks=2 -o "$tmp/proto.xml"
check_exact "BATON_PROTO=simple is no mistake" 0 "" env BATON_PROTO=simple "$baton" verify -q "$ag"
check "BATON_FGEMV_UNROLL takes 1, 2, 4 or 8" 0 "(refused: '3')" env BATON_FGEMV_UNROLL=3 "$baton" params
check "BATON_FGEMV_UNROLL=4 is taken" 0 "BATON_FGEMV_UNROLL   str  \"\"       4 " env BATON_FGEMV_UNROLL=4 "$baton" params
check_exact "BATON_DEBUG=NONE silences them" 0 "" env BATON_DEBUG=NONE BATON_PROTO=LL9 BATON_DEBUG_SUBSYS=FOO BATON_EXEC_SLOTS=0 "$baton" verify -q "$ag"
# baton set: the rank count is checked; the slots a compiled program needs are recorded and bounded.
check "set: a rank count that is not one" 2 "bad RANKS 'abc'" "$baton" set abc -o "$tmp/set"
check "set: too many ranks" 2 "bad RANKS '5000': must be 1..4096" "$baton" set 5000 -o "$tmp/set"
check "set: 2 ranks, one program per collective and size range" 0 "64 programs for 2 ranks" "$baton" set 2 -o "$tmp/set2"
# The sets of 60 and 120 ranks run the code of the smaller ones, at 50 s of
# the sanitizer build's 100: a run that repeats the plain one
# (BATON_TEST_REPEAT=1: the sanitizer build's, the one without the corpus)
# leaves them to it.
big_sets=(60 120)
if [ "${BATON_TEST_REPEAT:-0}" = 1 ]; then
  for r in "${big_sets[@]}"; do skip "set: $r ranks" "a repeated run (the plain run with the corpus runs it)"; done
else
  check "set: 60 ranks, all-pairs programs paired (a thread block per peer)" 0 "" \
    bash -c '"$0" set 60 -q -o "$1" && test -f "$1"/allgather_1_allpairs_60r.xml && test -f "$1"/alltoall_3_direct_60r.xml' "$baton" "$tmp/set60"
  check "set: 120 ranks, the tree, the ring and Bruck where no all-pairs fits, and what it lacks said" 0 \
    "no Gather and Scatter (the direct programs' root needs a thread block per peer) at 120 ranks" \
    bash -c '"$0" set 120 -q -o "$1" && ls "$1" | tr "\n" " " | grep -q "allgather_3_ring_120r.xml allreduce_4_ring_120r.xml allreduce_4_tree_120r.xml alltoall_4_bruck_120r.xml" && echo listed' "$baton" "$tmp/set120"
fi
check "verify passes every program of the set, fused ones at dimensions and a count that fit them" 0 "" \
  bash -c 'exec "$0" verify -q "$1"/*.xml' "$baton" "$tmp/set2"
check "verify of a fused program says the dimensions it chose" 0 "count 4101, H=3, F=5, out-of-place" \
  "$baton" verify "$tmp/set2/moe_combine_2r.xml"
check "a count that does not fit a gemm says what would" 1 "it must hold rows x columns (bind those dimensions, or choose the count, to match)" \
  "$baton" verify --count 4099 "$tmp/set2/moe_combine_2r.xml"
check "compile records the FIFO slots the schedule needs" 0 ' slots="2"' "$baton" compile -q "$root/algorithms/allreduce_ring.lua" --param ranks=4 -o -
"$baton" compile -q "$root/algorithms/allreduce_ring.lua" --param ranks=4 -o - | sed 's/ slots="[0-9]*"/ slots="0"/' > "$tmp/slots0.xml"
check "a slots attribute out of range is an error at file:line" 1 'slots0.xml:1: slots=0 is out of range [1, 1024]' "$baton" verify "$tmp/slots0.xml"
# Rooted collectives: one program, every root (relabelled as the runtime does).
cat > "$tmp/bcast.lua" <<'LUA'
local n = param("ranks", 4)
collective{ kind = "broadcast", ranks = n, chunks = 2, inplace = false }
chunk(0, "input", 0, 2):copy(0, "output", 0)
for r = 1, n - 1 do chunk(r - 1, "output", 0, 2):copy(r, "output", 0) end
LUA
"$baton" compile -q "$tmp/bcast.lua" -o "$tmp/bcast.xml" 2>/dev/null
check "verify --root all: a broadcast from every root" 0 "ok  broadcast rooted at 3 on 4 ranks" "$baton" verify --root all "$tmp/bcast.xml"
check "verify --root 2" 0 "ok  broadcast rooted at 2 on 4 ranks" "$baton" verify --root 2 "$tmp/bcast.xml"
check "verify --root past the ranks" 2 "--root 4, but the program has ranks 0..3" "$baton" verify --root 4 "$tmp/bcast.xml"
check "verify --root on an unrooted collective" 2 "--root is for rooted collectives (broadcast, reduce, gather, scatter), not allgather" "$baton" verify --root 1 "$ag"
sed 's/type="r" srcbuf="o" srcoff="0" dstbuf="o"/type="r" srcbuf="o" srcoff="0" dstbuf="i"/' "$tmp/bcast.xml" > "$tmp/bcast_bad.xml"
check "a broadcast writing its input off the root is invalid, with its place" 1 "rank 3 tb 0 step 0: writes its input, which a broadcast has only on the root (rank 0)" "$baton" verify "$tmp/bcast_bad.xml"
# verify runs a compiled program with the FIFO slots its compiler recorded, unless --slots says otherwise.
check "verify -v: a compiled program runs with its recorded slots" 0 \
  "r4.xml: 2 FIFO slots per connection (the program's slots attribute: the fewest its schedule is proven deadlock-free with)" \
  "$baton" verify -v "$tmp/r4.xml"
check "verify -v: --slots overrides them" 0 "r4.xml: 5 FIFO slots per connection (--slots)" "$baton" verify -v --slots 5 "$tmp/r4.xml"
check "verify -v: a file without them runs with BATON_EXEC_SLOTS" 0 \
  "exchange_2r.xml: 3 FIFO slots per connection (BATON_EXEC_SLOTS: the program records no slots attribute)" \
  env BATON_EXEC_SLOTS=3 "$baton" verify -v "$root/tests/exchange_2r.xml"
sed 's/inplace="1">/inplace="1" slots="1">/' "$root/tests/exchange_2r.xml" > "$tmp/ex_s1.xml"
sed 's/inplace="1">/inplace="1" slots="2">/' "$root/tests/exchange_2r.xml" > "$tmp/ex_s2.xml"
check "a program that claims 1 slot but needs 2 is refused without --slots" 1 "deadlock with 1 FIFO slot per connection" \
  "$baton" verify "$tmp/ex_s1.xml"
check "... and runs with its recorded 2 even where BATON_EXEC_SLOTS is 1" 0 "ex_s2.xml: ok  allgather on 2 ranks" \
  env BATON_EXEC_SLOTS=1 "$baton" verify "$tmp/ex_s2.xml"
# placement=paired halves the all-pairs programs' thread blocks (a peer's send and receive in one).
for s in alltoall_direct allreduce_allpairs; do
  check "$s split: 120 thread blocks on 8 ranks" 0 "on 8 ranks, 120 thread blocks" \
    "$baton" compile "$root/algorithms/$s.lua" --param ranks=8 -o "$tmp/$s.split.xml"
  check "$s paired: 64" 0 "on 8 ranks, 64 thread blocks" \
    "$baton" compile "$root/algorithms/$s.lua" --param ranks=8 --param placement=paired -o "$tmp/$s.paired.xml"
  check "... and it verifies over every type and operator" 0 "ok  " "$baton" verify -d all --op all "$tmp/$s.paired.xml"
  check "$s at 64 ranks, split, is refused" 1 "rank 0 needs 127 thread blocks, more than the 108" \
    "$baton" compile -q "$root/algorithms/$s.lua" --param ranks=64 -o "$tmp/$s.64.xml"
  check "... paired, it compiles: 64 thread blocks per rank" 0 "on 64 ranks, 4096 thread blocks" \
    "$baton" compile "$root/algorithms/$s.lua" --param ranks=64 --param placement=paired -o "$tmp/$s.64.xml"
done
# Strided steps: runs of chunks a stride apart (backwards too), checked, raced and run exactly.
check "a strided program verifies" 0 "strided_2r.xml: ok  custom on 2 ranks" "$baton" verify -d all "$root/tests/strided_2r.xml"
check "explain shows the patterns" 0 "r    recv(0) -> o[3..3 -2 x2]" "$baton" explain "$root/tests/strided_2r.xml"
sed 's/srcoff="1" dstbuf="o" dstoff="0" cnt="2" srcrun="1" srcstride="2" dstrun="1" dststride="2"/srcoff="1" dstbuf="o" dstoff="1" cnt="2" srcrun="1" srcstride="2" dstrun="1" dststride="2"/' \
  "$root/tests/strided_2r.xml" > "$tmp/strided_race.xml"
check "strided writes that meet are a race" 1 "writes o[3..3 -2 x2] while tb 1 step 0 (cpy) writes o[1..1 +2 x2]" "$baton" verify "$tmp/strided_race.xml"
sed 's/srcoff="0" dstbuf="o" dstoff="3" cnt="2" srcrun="1" srcstride="2" dstrun="1" dststride="-2" depid/srcoff="3" dstbuf="o" dstoff="3" cnt="2" srcrun="1" srcstride="2" dstrun="1" dststride="-2" depid/' \
  "$root/tests/strided_2r.xml" > "$tmp/strided_oob.xml"
check "a strided source past the buffer is invalid" 1 "rank 0 tb 0 step 0: source i[3..5] is out of range" "$baton" verify "$tmp/strided_oob.xml"
sed 's/srcrun="1" srcstride="2" dstrun="1" dststride="2"/srcrun="2" srcstride="1" dstrun="1" dststride="2"/' "$root/tests/strided_2r.xml" > "$tmp/strided_ovl.xml"
check "overlapping runs are invalid" 1 "source runs of 2 chunks 1 apart overlap" "$baton" verify "$tmp/strided_ovl.xml"
# Direct programs (put, get, getr, sig, wait): verified, explained, drawn, and refused where they break a rule.
d2="$root/tests/direct_2r.xml" dll="$root/tests/direct_ll_4r.xml"
check "a Simple direct two-shot verifies (all types and ops, in place)" 0 "direct_2r.xml: ok  allreduce on 2 ranks, 2 tbs, 14 steps; 50 runs" \
  "$baton" verify -d all --op all "$d2"
check "... and out of place" 0 "direct_2r.xml: ok  allreduce on 2 ranks" "$baton" verify --outofplace --count 37 --tile 5 "$d2"
check "an LL direct one-shot verifies (all types and ops)" 0 "direct_ll_4r.xml: ok  allreduce on 4 ranks, 4 tbs, 28 steps; 50 runs" \
  "$baton" verify -d all --op all "$dll"
check "explain shows a getr and a put with their peers' chunks" 0 "getr o[0] (op)= 1:i[0]" "$baton" explain "$d2"
check "... and a put into a landing" 0 "put  i[0] -> 3:s[0]" "$baton" explain "$dll"
check "explain --dot: signal edges in red, landing edges dotted green" 0 "4 signals, 12 landings" \
  bash -c 'echo "$(grep -c "color=red" <("$0" explain --dot "$1")) signals, $(grep -c "color=darkgreen, style=dotted" <("$0" explain --dot "$2")) landings"' \
  "$baton" "$d2" "$dll"
sed 's/proto="baton-LL"/proto="baton-LL128"/' "$dll" > "$tmp/dll128.xml"
check "the same program in LL128 verifies (all types and ops)" 0 "dll128.xml: ok  allreduce on 4 ranks, 4 tbs, 28 steps; 50 runs" \
  "$baton" verify -d all --op all "$tmp/dll128.xml"
sed 's/type="put" srcbuf="i" srcoff="0" dstbuf="s"/type="put" srcbuf="i" srcoff="0" dstbuf="o"/' "$tmp/dll128.xml" > "$tmp/dll128_o.xml"
check "... and a put past its peer's scratch is refused there as in LL" 1 "in a direct LL128 program a put lands in its peer's scratch" \
  "$baton" verify "$tmp/dll128_o.xml"
sed 's/dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0" peer="0"/dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0" peer="0"/' "$dll" > "$tmp/dll_twice.xml"
check "two puts landing in one scratch chunk are refused" 1 \
  "rank 2 tb 0 step 0: put lands in rank 0's s[0], as rank 1 tb 0 step 0's put does: a scratch chunk is the landing of one put" \
  "$baton" verify "$tmp/dll_twice.xml"
grep -v '<step s="6" type="wait" .* peer="0"' "$d2" > "$tmp/d2_short.xml"
check "a signal stream whose waits take fewer signals than it carries is refused" 1 \
  "rank 0 tb 0 step 0: 2 sigs to rank 1 on channel 0, but rank 1's waits for rank 0 on channel 0 take 1" "$baton" verify "$tmp/d2_short.xml"
# baton bench: usage, the sweep without a GPU, and a clean failure where no GPU is (or no CUDA build).
check "bench --help" 0 "usage: baton bench" "$baton" bench --help
check "bench --dry-run: nccl-tests' sweep" 0 "allreduce on 8 ranks, f32, out of place, 25 sizes" "$baton" bench -b 8 -e 128M -f 2 -g 8 --dry-run
check "bench --dry-run: the largest size" 0 "   134217728     33554432" "$baton" bench -b 8 -e 128M -f 2 -g 8 --dry-run
check "bench --dry-run needs -g" 2 "--dry-run needs -g N" "$baton" bench --dry-run
check "bench --dry-run: a broadcast names its root" 0 "broadcast on 4 ranks, root 3, f32, out of place, 3 sizes" \
  "$baton" bench --collective broadcast -r 3 -g 4 -b 1K -e 4K -f 2 --dry-run
check "bench --dry-run: a broadcast's count is bytes / type size, busbw factor 1" 0 \
  "        4096         1024         1024         1024         1.0000" "$baton" bench --collective broadcast -g 4 -b 1K -e 4K -f 2 --dry-run
check "bench --dry-run: a gather names its root" 0 "gather on 4 ranks, root 3, f32, out of place, 3 sizes" \
  "$baton" bench --collective gather -r 3 -g 4 -b 1K -e 4K -f 2 --dry-run
check "bench --dry-run: a gather's count is a rank's block, busbw factor (n-1)/n" 0 \
  "        4096          256          256         1024         0.7500" "$baton" bench --collective gather -g 4 -b 1K -e 4K -f 2 --dry-run
check "bench: a root past the ranks" 2 "-r 4 is not a rank: the root is one of 0..3 (4 ranks)" \
  "$baton" bench --collective reduce -r 4 -g 4 --dry-run
check "bench: a bad option" 2 "unknown option '--frob'" "$baton" bench --frob
# baton sim: usage, the SPEC's refusals at their line, a run, and SIMULATION.md's table of keys.
check "sim --help" 0 "usage: baton sim PROGRAM.xml --system SPEC" "$baton" sim --help
check "sim without --system is a usage error" 2 "usage: baton sim" "$baton" sim "$root/tests/exchange_2r.xml"
printf 'gpus 4\nnvlink.bw_gbs -3\n' > "$tmp/bad.spec"
check "sim: a SPEC value out of range is refused at its line" 1 "bad.spec:2: nvlink.bw_gbs -3 is out of range" \
  "$baton" sim "$root/tests/exchange_2r.xml" --system "$tmp/bad.spec"
check "sim: a system with fewer GPUs than the program's ranks" 1 "2 ranks, but the system (one) has 1 nodes x 1 GPUs" \
  bash -c "printf 'name one\ngpus 1\n' > '$tmp/one.spec' && '$baton' sim '$root/tests/exchange_2r.xml' --system '$tmp/one.spec'"
check "sim: a run prints the predicted time per size" 0 "        1024 " \
  "$baton" sim "$root/tests/exchange_2r.xml" --system default --sizes 1K,1M
check "sim --trace writes a Chrome-trace timeline" 0 '{"traceEvents":[' \
  bash -c "'$baton' sim '$root/tests/exchange_2r.xml' --system default --sizes 1M --trace '$tmp/t.json' -q >/dev/null && head -c 16 '$tmp/t.json'"
"$baton" compile -q "$root/algorithms/allreduce_ring.lua" --param ranks=4 -o "$tmp/ar_ring4.xml"
"$baton" compile -q "$root/algorithms/allreduce_allpairs.lua" --param ranks=4 --param shot=1 -o "$tmp/ar_one4.xml"
check "sim A B: two programs side by side, the fastest per size" 0 "# from 2097152 bytes A is the fastest (B before)" \
  "$baton" sim "$tmp/ar_ring4.xml" "$tmp/ar_one4.xml" --system "$root/sim/systems/h200x4.spec" --sizes 8:64M:4
check "sim A B of two collectives is refused" 2 "compare programs of one collective and rank count" \
  "$baton" sim "$tmp/ar_ring4.xml" "$root/tests/exchange_2r.xml" --system default
check "sim across nodes: an LL program runs as Simple, as the runtime runs it" 0 "LL run as Simple across nodes" \
  "$baton" sim "$tmp/ar_one4.xml" --system "$root/sim/systems/h200x4_sockets.spec" --sizes 1K
# An earlier comparison predicted again on another SPEC: the ring's 4 MiB row, measured 10% over what h200x4.spec says.
mkdir -p "$tmp/again" && cp "$tmp/ar_ring4.xml" "$tmp/again/"
ring4=$("$baton" sim "$tmp/ar_ring4.xml" --system "$root/sim/systems/h200x4.spec" --sizes 4M -q | awk 'NR == 2 {print $2}')
printf 'collective,program,bytes,measured_us,predicted_us\nallreduce,ar_ring4.xml,4194304,%s,0\n' \
  "$(awk -v t="$ring4" 'BEGIN {printf "%.3f", t * 1.1}')" > "$tmp/again.csv"
check "sim_calibrate.py predicts an earlier comparison's rows again" 0 "1 of 1 rows meet the target" \
  python3 "$root/tools/measure/sim_calibrate.py" "$baton" "$root/sim/systems/h200x4.spec" "$tmp/again" "$tmp/again.csv"
check "... and on a SPEC that moves them, says they miss" 0 "0 of 1 rows meet the target" \
  bash -c "sed 's/^nvlink.bw_gbs .*/nvlink.bw_gbs 36/' '$root/sim/systems/h200x4.spec' > '$tmp/slow.spec' &&
    python3 '$root/tools/measure/sim_calibrate.py' '$baton' '$tmp/slow.spec' '$tmp/again' '$tmp/again.csv'"
for sh in "$root"/tools/measure/*.sh; do   # the GPU machines' scripts at least parse here
  check "tools/measure/$(basename "$sh") parses" 0 "" bash -n "$sh"
done
for spec in "$root"/sim/systems/*.spec; do   # every system shipped reads, and runs a 2-rank program
  check "sim: $(basename "$spec") reads and runs" 0 "        1024 " \
    "$baton" sim "$root/tests/exchange_2r.xml" --system "$spec" --sizes 1K
done
# baton sim --dim: a fused program at chosen dimensions, and what it refuses.
"$baton" compile -q "$root/algorithms/moe_combine.lua" --param ranks=4 -o "$tmp/moe4.xml"
check "sim --dim: a malformed one" 2 "baton sim: bad --dim 'H=4x' (NAME=N, N in 1..2147483648, at most 8)" \
  "$baton" sim "$tmp/moe4.xml" --system default --dim H=4x
check "sim --dim: one the program does not have" 1 "moe4.xml: --dim Q: the program has no such dimension (its dimensions: T, F, H)" \
  "$baton" sim "$tmp/moe4.xml" --system default --dim Q=2
check "sim: a gemm's dimensions not given" 1 "dimension F is not bound: a gemm's multiply-adds per output element are the columns of X; give it with --dim F=N" \
  "$baton" sim "$tmp/moe4.xml" --system default --sizes 1M --dim H=4096
check "sim --dim: a size that is not whole rows" 1 "1000 bytes: a rank's input of 500 elements is not whole rows of H = 4096" \
  "$baton" sim "$tmp/moe4.xml" --system default --sizes 1000 --dim H=4096 --dim F=2048
check "sim --dim: the MoE combine at H=4096, F=2048 (bf16, the type its gemm takes)" 0 "), bf16, H=4096, F=2048" \
  "$baton" sim "$tmp/moe4.xml" --system "$root/sim/systems/h200x4.spec" --sizes 1M:16M --dim H=4096 --dim F=2048
# A rank's GEMM costs compute.gemm_us once and then its multiply-adds: 3 + 2 x 128 x 256 x 64 / 10^6 us at
# 1 TFLOPS, its 16 tiles paying no Simple step (100 us each here).
"$baton" compile -q "$root/algorithms/moe_combine.lua" --param ranks=1 -o "$tmp/moe1.xml"
printf 'name g\ngpus 1\nlaunch_us 0\ncall_us 0\nsimple.step_us 100\ncompute.gemm_us 3\ncompute.gemm_tflops 1\n' > "$tmp/gemm.spec"
check "sim: one rank's GEMM, its fixed cost once and its multiply-adds (7.19 us)" 0 "         65536         7.19 " \
  "$baton" sim "$tmp/moe1.xml" --system "$tmp/gemm.spec" --sizes 65536 --dim H=256 --dim F=64 -q
# baton set --system: the ranges follow the simulated crossovers, without gaps, and the set verifies.
check "set --system: ranges moved to the simulated crossovers" 0 "allreduce_3_allpairs2_chain_oop_ll128_4r.xml: bytes 1048576..16777215 (was 524289..8388608)" \
  "$baton" set 4 --system "$root/sim/systems/h200x4.spec" -o "$tmp/tuned4"
check "... the tuned set verifies" 0 "" "$baton" verify -q "$tmp/tuned4"/allreduce_*.xml "$tmp/tuned4"/reduce*.xml
n=$((n + 1))
gaps=$(for f in "$tmp"/tuned4/allreduce_[1-4]_*.xml; do a=$(grep -o '<algo[^>]*>' "$f"); lo=$(grep -o 'minBytes="[0-9]*"' <<<"$a" | tr -dc 0-9); hi=$(grep -o 'maxBytes="[0-9]*"' <<<"$a" | tr -dc 0-9)
  echo "${lo:-0} ${hi:-0}"; done | sort -n -u | awk 'NR > 1 && $1 != prev + 1 {bad = 1} {prev = $2} END {print bad ? "gap" : "none"}')
if [ "$gaps" = none ]; then echo "ok $n - ... the FIFO AllReduce's ranges follow one another, from 0 with no gap"
else echo "not ok $n - the tuned FIFO AllReduce's ranges leave a gap"; failed=$((failed + 1)); fi
check "set --system with more ranks than the system has GPUs compiles nothing" 2 "8 ranks, but the system (h200x4) has 1 nodes x 4 GPUs" \
  "$baton" set 8 --system "$root/sim/systems/h200x4.spec" -q -o "$tmp/none8"
check "set --system with a bad description compiles nothing" 2 "bad.spec:2: nvlink.bw_gbs -3 is out of range" \
  "$baton" set 4 --system "$tmp/bad.spec" -q -o "$tmp/none4"
# baton compile --tune: a variant per run of sizes, each with its range, all verified.
check "compile --tune: the fastest variant for each run of sizes, with its range" 0 "protocol=LL128 instances=1 channels=1, bytes 8388608.." \
  "$baton" compile "$root/algorithms/allreduce_ring.lua" --param ranks=4 --tune "$root/sim/systems/h200x4.spec" -o "$tmp/tuned_ring"
check "... its programs verify" 0 "" "$baton" verify -q "$tmp/tuned_ring"/*.xml
check_exact "... the first from 0, the last without a bound" 0 "1 1" \
  bash -c "echo \$(grep -L minBytes '$tmp'/tuned_ring/*_0_4r.xml | wc -l) \$(ls '$tmp'/tuned_ring/*.xml | sort -t_ -k3 -n | tail -1 | xargs grep -L maxBytes | wc -l)"
check "compile --tune needs -o for its folder" 2 "--tune writes several programs: -o names their folder" \
  "$baton" compile "$root/algorithms/allreduce_ring.lua" --tune default
check "compile --tune on a system too small says so" 1 "8 ranks, but the system (h200x4) has 1 nodes x 4 GPUs" \
  "$baton" compile "$root/algorithms/allgather_ring.lua" --param ranks=8 --tune "$root/sim/systems/h200x4.spec" -o "$tmp/t8"
check "sim: bad sizes" 2 "baton sim: bad --sizes" "$baton" sim "$root/tests/exchange_2r.xml" --system default --sizes 1K:x
n=$((n + 1))
if "$baton" sim --fields > "$tmp/fields.md" && grep -qF -f "$tmp/fields.md" "$root/docs/SIMULATION.md" &&
   [ "$(grep -cFx -f "$tmp/fields.md" "$root/docs/SIMULATION.md")" = "$(wc -l < "$tmp/fields.md")" ]; then
  echo "ok $n - docs/SIMULATION.md holds every SPEC key as baton sim --fields prints it"
else echo "not ok $n - docs/SIMULATION.md's SPEC table is not baton sim --fields'"; failed=$((failed + 1)); fi
for mode in "" "-P"; do
  n=$((n + 1))
  out=$(CUDA_VISIBLE_DEVICES="" "$baton" bench $mode -g 2 -b 8 -e 64 2>&1); st=$?
  if [ $st -eq 2 ] && grep -qE "baton bench: no GPU to run on|no baton-bench beside this baton" <<<"$out"; then echo "ok $n - bench $mode without a GPU (or without a CUDA build): a clear error, status 2"
  else echo "not ok $n - bench $mode without a GPU (status $st)"; echo "$out" | sed 's/^/#   /' | head; failed=$((failed + 1)); fi
done
tap_end
