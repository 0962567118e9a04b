#!/usr/bin/env bash
# unit suite: hostile IR files and option values -- each refused with a message naming where, what and the limit's parameter, in bounded time and memory.
# Usage: hostile_ir.sh BATON CORPUS_DIR SOURCE_ROOT   (TAP output)
set -u
baton=$1 corpus=$2 root=$3
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ag="$corpus/allgather_ring_4r_simple.xml"
# A sanitizer build reserves terabytes of address space: no ulimit -v there.
asan=0; grep -qa __asan_init "$baton" && asan=1
check() {  # check DESCRIPTION WANT_STATUS WANT_TEXT COMMAND...   (at most 120 s)
  local what=$1 want=$2 text=$3; shift 3
  if corpus_lacks "$@"; then skip "$what" "needs the MSCCL corpus, missing at $corpus (README, Tests)"; return; fi
  local t0=$SECONDS
  if declare -F "$1" >/dev/null; then out=$("$@" 2>&1); else out=$(timeout 120 "$@" 2>&1); fi; st=$?
  local pass=0; [ $st -eq "$want" ] && grep -qF -- "$text" <<<"$out" && pass=1
  [ $pass -eq 1 ] && what="$what ($((SECONDS - t0)) s)"
  verdict $pass "$what" "status $st, wanted $want and '$text'" "$out"
}
limited() {  # limited KB COMMAND...: runs COMMAND with its address space bounded (not under ASan)
  local kb=$1; shift
  if [ $asan -eq 1 ]; then "$@"; else (ulimit -v "$kb"; exec "$@"); fi
}

# --- a race check skipped for size is a verdict of its own, never "ok" ---
awk 'BEGIN { print "<algo name=\"wide\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"1\" ngpus=\"1\" coll=\"allgather\" inplace=\"0\">"
  print "  <gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">"
  for (t = 0; t < 4096; t++) { printf "    <tb id=\"%d\" send=\"-1\" recv=\"-1\" chan=\"0\">\n", t
    for (s = 0; s < 5; s++) printf "      <step s=\"%d\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" />\n", s
    print "    </tb>" }
  print "  </gpu>"; print "</algo>" }' > "$tmp/wide.xml"
check "4,096 thread blocks racing on one chunk, past the race check's size: NOT VERIFIED, not ok" 1 \
  "wide.xml: NOT VERIFIED: the race check was skipped on 1 of 1 ranks" "$baton" verify "$tmp/wide.xml"

# --- the routes are checked exactly, whatever the count ---
# With 9 input values, block b of rank a and block a of rank b hold the same
# values when the count is 4 modulo 9 (4099, verify's default): value runs
# alone passed an AllToAll that moved no block, and one whose xchg traded
# the inputs of an out-of-place call.
a2a() {  # a2a FILE STEPS_OF_RANK_0 STEPS_OF_RANK_1: a 2-rank out-of-place AllToAll of one thread block a rank
  { echo '<algo name="t" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="alltoall" inplace="0" baton="1">'
    for r in 0 1; do
      echo "  <gpu id=\"$r\" i_chunks=\"2\" o_chunks=\"2\" s_chunks=\"0\"><tb id=\"0\" send=\"-1\" recv=\"-1\" chan=\"0\">"
      local k=0; while read -r ty sb so db do pe; do
        [ -n "$ty" ] || continue
        printf '    <step s="%d" type="%s" srcbuf="%s" srcoff="%s" dstbuf="%s" dstoff="%s" cnt="1" depid="-1" deps="-1" hasdep="0"%s />\n' \
          $k "$ty" "$sb" "$so" "$db" "$do" "$([ "$pe" != - ] && echo " peer=\"$pe\"")"
        k=$((k + 1))
      done <<<"$([ $r = 0 ] && echo "$2" || echo "$3")"
      echo "  </tb></gpu>"
    done
    echo '</algo>'; } > "$1"
}
a2a "$tmp/noop.xml" "cpy i 0 o 0 -
cpy i 1 o 1 -" "cpy i 0 o 0 -
cpy i 1 o 1 -"
check "an AllToAll that moves no block: WRONG ROUTE at the default count" 1 \
  "noop.xml: WRONG ROUTE with every element's origin traced" "$baton" verify "$tmp/noop.xml"
a2a "$tmp/swapin.xml" "wait i -1 o -1 1
xchg i 1 i 0 1
cpy i 1 o 1 -
cpy i 0 o 0 -
sig i -1 o -1 1" "sig i -1 o -1 0
wait i -1 o -1 0
cpy i 0 o 0 -
cpy i 1 o 1 -"
check "an out-of-place AllToAll whose xchg trades the callers' inputs: refused, the inputs named" 1 \
  "swapin.xml: rank 0 input chunk 1 was overwritten by an out-of-place run" "$baton" verify "$tmp/swapin.xml"

# --- option values: no overflow, no wrap, a reason ---
for c in 4611686018427387904 9223372036854775807 99999999999999999999; do
  check "--count $c is refused with its range" 2 "bad --count '$c': must be 1..281474976710656" "$baton" verify --count "$c" "$ag"
done
check "--count 12x is not an integer" 2 "bad --count '12x': not an integer" "$baton" verify --count 12x "$ag"
check "--count 2^48: the buffers would exceed what baton addresses" 1 \
  "--count 281474976710656: rank 0's buffers would hold more than 281474976710656 elements, the most baton addresses; this program takes a count of at most 70368744177664" \
  "$baton" verify --count 281474976710656 "$ag"
check "--count 10^13: the buffers would not fit this machine" 1 \
  "--count 10000000000000: the buffers of a 4-byte type would need 800000000020480 bytes, over the" "$baton" verify --count 10000000000000 "$ag"
check "--count 10^13 with --dtype all sizes the largest type" 1 "the buffers of a 8-byte type would need" \
  "$baton" verify --dtype all --count 10000000000000 "$ag"
check "--slots 0" 2 "bad --slots '0': must be 1..1024" "$baton" verify --slots 0 "$ag"
check "--slots 100000" 2 "bad --slots '100000': must be 1..1024" "$baton" verify --slots 100000 "$ag"
check "--slots past long" 2 "bad --slots '99999999999999999999999': must be 1..1024" "$baton" verify --slots 99999999999999999999999 "$ag"
check "--tile -1" 2 "bad --tile '-1': must be 0..281474976710656" "$baton" verify --tile -1 "$ag"
check "--tile past int64" 2 "bad --tile '99999999999999999999'" "$baton" verify --tile 99999999999999999999 "$ag"
check "--ranks abc" 2 "bad --ranks 'abc': not an integer" "$baton" verify --ranks abc "$ag"
check "--ranks 0" 2 "bad --ranks '0': must be 1..4096" "$baton" verify --ranks 0 "$ag"
check "bench --fused --rows past int64 with a unit: no shift overflow" 2 "bad value '9999999999999999999G' for --rows" \
  "$baton" bench --fused gemv_allreduce --rows 9999999999999999999G -g 1 --dry-run
check "a sane run still passes" 0 "ok  allgather on 4 ranks" "$baton" verify --count 1000 --slots 1024 --tile 7 "$ag"

# --- limits of an IR file, each naming its parameter ---
{ echo '<algo name="pad" ngpus="1" coll="allreduce" nchunksperloop="1"><!--'
  head -c 2200000 /dev/zero | tr '\0' 'x'; echo '--><gpu id="0"/></algo>'; } > "$tmp/big.xml"
check "an IR file over BATON_IR_MAX_MB" 1 "bytes (3 MiB), over the limit of 1 MiB (BATON_IR_MAX_MB raises it)" \
  env BATON_IR_MAX_MB=1 "$baton" verify "$tmp/big.xml"
check "... read from a pipe too (reading stops past the limit)" 1 "IR file is more than 1 MiB, over the limit of 1 MiB (BATON_IR_MAX_MB raises it)" \
  env BATON_IR_MAX_MB=1 "$baton" verify <(cat "$tmp/big.xml")
check "ngpus over BATON_MAX_RANKS" 1 "allgather_ring_4r_simple.xml:1: ngpus=4 is over the limit of 2 ranks (BATON_MAX_RANKS raises it)" \
  env BATON_MAX_RANKS=2 "$baton" verify "$ag"
check "ngpus of 2^31-1" 1 "ngpus=2147483647 is over the limit of 4096 ranks (BATON_MAX_RANKS raises it)" \
  bash -c 'sed "s/ngpus=\"4\"/ngpus=\"2147483647\"/" "$1" > "$2" && exec "$0" verify "$2"' "$baton" "$ag" "$tmp/ranks.xml"
check "thread blocks over BATON_IR_MAX_TBS" 1 \
  "allgather_allpairs_4r_ll128.xml:7: rank 0: more than 1 thread blocks, the most a rank may have (BATON_IR_MAX_TBS raises it)" \
  env BATON_IR_MAX_TBS=1 "$baton" verify "$corpus/allgather_allpairs_4r_ll128.xml"
check "steps over BATON_IR_MAX_STEPS" 1 \
  "allgather_ring_4r_simple.xml:6: rank 0 tb 0: more than 2 steps, the most a thread block may have (BATON_IR_MAX_STEPS raises it)" \
  env BATON_IR_MAX_STEPS=2 "$baton" verify "$ag"
check "chunks over BATON_MAX_CHUNKS" 1 \
  "allgather_ring_4r_simple.xml:1: the buffers of the 4 ranks have 20 chunks together (i, o and s), over the limit of 8 (BATON_MAX_CHUNKS raises it)" \
  env BATON_MAX_CHUNKS=8 "$baton" verify "$ag"
check "2^31-1 scratch chunks" 1 "over the limit of 1048576 (BATON_MAX_CHUNKS raises it)" \
  bash -c 'sed "s/s_chunks=\"0\"/s_chunks=\"2147483647\"/" "$1" > "$2" && exec "$0" verify "$2"' "$baton" "$ag" "$tmp/scratch.xml"

# --- XML attacks: a DOCTYPE ends the parse before any entity is declared ---
{ echo '<?xml version="1.0"?>'; echo '<!DOCTYPE algo ['; echo '<!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">'
  p=a; for e in b c d e f g h i j k; do printf '<!ENTITY %s "%s">\n' $e "$(printf "&$p;%.0s" 1 2 3 4 5 6 7 8 9 10)"; p=$e; done
  echo ']>'; echo '<algo name="&k;" ngpus="1" coll="allreduce" nchunksperloop="1"><gpu id="0"/></algo>'; } > "$tmp/laughs.xml"
check "a billion laughs is refused at its DOCTYPE" 1 "laughs.xml:2: DOCTYPE declarations are not allowed in IR files" \
  limited 1000000 "$baton" verify "$tmp/laughs.xml"
printf '<?xml version="1.0"?>\n<!DOCTYPE algo [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<algo name="&x;" ngpus="1" coll="allreduce" nchunksperloop="1"><gpu id="0"/></algo>\n' > "$tmp/xxe.xml"
check "an external entity (XXE) is refused, nothing is read" 1 "xxe.xml:2: DOCTYPE declarations are not allowed" "$baton" verify "$tmp/xxe.xml"
check "... and the file's text appears nowhere" 0 "no passwd" bash -c '"$0" verify "$1" 2>&1 | grep -q "root:" && echo leaked || echo "no passwd"' "$baton" "$tmp/xxe.xml"
{ echo '<algo ngpus="1" coll="allreduce" nchunksperloop="1">'; for i in $(seq 300); do printf '<x>'; done; echo; } > "$tmp/deep.xml"
check "elements nested 300 deep: libxml2's depth bound" 1 "deep.xml:2: Excessive depth in document: 256 use XML_PARSE_HUGE option" "$baton" verify "$tmp/deep.xml"

# --- quadratic work made linear ---
awk 'BEGIN { print "<algo ngpus=\"2\" coll=\"custom\" nchunksperloop=\"1\">"; print "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\">"
  for (t = 0; t < 20000; t++) printf "<tb id=\"%d\" send=\"1\" chan=\"0\"/>\n", t
  print "</gpu><gpu id=\"1\" i_chunks=\"1\"/></algo>" }' > "$tmp/conn.xml"
check "20,000 thread blocks on one connection, within 30 s (was a minute or more)" 1 \
  "conn.xml:4: rank 0 tb 1: connection to rank 1 on channel 0 is already used for sending by tb 0" \
  timeout 30 env BATON_IR_MAX_TBS=100000 "$baton" verify "$tmp/conn.xml"
awk 'BEGIN { print "<algo ngpus=\"1\" coll=\"custom\" nchunksperloop=\"1\" expect=\"o[r][c]=i[r][c]\">"; print "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\">"
  for (t = 0; t < 2; t++) { printf "<tb id=\"%d\">\n", t
    for (s = 0; s < 20000; s++) printf "<step s=\"%d\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\"/>\n", s
    print "</tb>" }
  print "</gpu></algo>" }' > "$tmp/race.xml"
check "2 thread blocks x 20,000 copies to one chunk: the race in 1.5 GB of address space (was 9 GiB)" 1 \
  "race.xml:4: rank 0: data race: tb 0 step 0 (cpy) writes o[0] while tb 1 step 0 (cpy) writes o[0]" \
  limited 1500000 "$baton" verify "$tmp/race.xml"

# --- direct steps: peer= names another rank, only on put, get, getr, sig and wait ---
check "a fused program's operands count against memory (--dim K=65536 --count 65536 grew to 16.5 GB)" 1 \
  "fused_2r.xml: --count 65536: the buffers and operands of a 4-byte type would need 34363421696 bytes, over the" \
  limited 2000000 "$baton" verify --dim K=65536 --count 65536 "$root/tests/fused_2r.xml"
d2="$root/tests/direct_2r.xml"
peer() {  # peer SED_EXPR OUT: the first sig of direct_2r.xml edited, then verified
  sed "$1" "$d2" > "$2" && "$baton" verify "$2"
}
# operand types: a matrix or vector holds "call" (the call's type) or names a float type the call must have
f2="$root/tests/fused_2r.xml"
opnd() { sed "s/kind=\"vector\" dtype=\"call\"/kind=\"vector\" dtype=\"$1\"/" "$f2" > "$tmp/op_$1.xml" && shift && "$baton" verify "$@"; }
check "an operand dtype=\"garbage\" is refused (it ran as f32)" 1 \
  "op_garbage.xml:3: operand x: a vector operand has dtype=\"garbage\"; it takes \"call\" (the call's type), f32, f16 or bf16" \
  opnd garbage "$tmp/op_garbage.xml"
check "an operand dtype=\"u8\" is refused" 1 "a vector operand has dtype=\"u8\"" opnd u8 "$tmp/op_u8.xml"
check "a bf16 vector runs as bf16" 0 "1 run (bf16 sum" opnd bf16 "$tmp/op_bf16.xml"
check "... and an f32 run of it is refused" 1 "its compute steps do not take f32 (they take bf16)" \
  opnd bf16 -d f32 "$tmp/op_bf16.xml"
check "srcstride without srcrun is refused (it was ignored)" 1 \
  "stride.xml:6: rank 0 tb 0 step 2: srcstride without srcrun (a stride spaces runs of chunks)" \
  peer '6s/srcoff="0"/srcoff="0" srcstride="2"/' "$tmp/stride.xml"
check "a peer out of range" 1 "peer7.xml:4: rank 0 tb 0 step 0: sig: peer 7 is not another rank in [0, 2)" \
  peer '0,/ peer="1"/s// peer="7"/' "$tmp/peer7.xml"
check "a peer that is the step's own rank" 1 "rank 0 tb 0 step 0: sig: peer 0 is not another rank in [0, 2)" \
  peer '0,/ peer="1"/s// peer="0"/' "$tmp/peer0.xml"
check "a peer past 32 bits" 1 "peer=99999999999 is out of range [-1, 2147483647]" \
  peer '0,/ peer="1"/s// peer="99999999999"/' "$tmp/peerbig.xml"
check "a direct step without its peer" 1 "nopeer.xml:4: <step> lacks attribute peer" \
  peer '0,/ peer="1"/s///' "$tmp/nopeer.xml"
check "peer= on a local step" 1 "cpypeer.xml:6: rank 0 tb 0 step 2: peer= is for direct steps (put, get, getr, xchg, sig, wait), not cpy" \
  peer 's|type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"|& peer="1"|' "$tmp/cpypeer.xml"

# --- a custom collective whose expected chunk sits elsewhere in its block ---
printf '<algo name="far" ngpus="1" coll="custom" nchunksperloop="8" expect="o[r][c]=i[r][c+7] if c==0">\n<gpu id="0" i_chunks="8" o_chunks="8">\n<tb id="0"><step s="0" type="cpy" srcbuf="i" srcoff="7" dstbuf="o" dstoff="0" cnt="1"/></tb>\n</gpu></algo>\n' > "$tmp/far.xml"
check "an expected chunk with fewer valid elements than the output chunk (count 1, 8 chunks)" 0 "far.xml: ok  custom on 1 ranks" \
  "$baton" verify --count 1 --outofplace "$tmp/far.xml"
# expect expressions come from files too: 64-bit arithmetic that cannot overflow.
a2n=$corpus/alltonext_fwd_2n.xml
check "an expect number past 64 bits" 2 "--expect:14: a number past 64 bits" \
  "$baton" verify --outofplace --expect 'o[r][c]=i[r][99999999999999999999]' "$a2n"
check "an expect value past 64 bits" 1 "expect: rule 1 overflows (a value past 64 bits, or a rank or chunk past 32) at rank 1 chunk 1" \
  "$baton" verify --outofplace --expect 'o[r][c]=i[r][c*9223372036854775807*4]' "$a2n"
check "an expect rank past 32 bits" 1 "expect: rule 1 overflows" \
  "$baton" verify --outofplace --expect 'o[r][c]=i[4294967296][c]' "$a2n"
tap_end
