#!/usr/bin/env bash
# verify suite: every algorithm in algorithms/ compiles for several shapes
# (2, 4, 8, 16 ranks and multi-node nodes x gpus), and each result passes
# `baton verify` over every type by sum and every operator in f32 (an IR
# program moves the same chunks whatever the type and operator: each one's
# arithmetic is the executor's, which its own tests cover), then out of
# place with one-element tiles and two FIFO slots in i8, every operator;
# the multi-node scripts' traffic is checked to use the rails as they
# promise.
# Usage: compile_library.sh BATON ALGORITHMS_DIR   (TAP output)
set -u
baton=$1 algs=$2
n=0 failed=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
out="$tmp/out.xml"
pass() { n=$((n + 1)); echo "ok $n - $1"; }
fail() { n=$((n + 1)); echo "not ok $n - $1"; echo "$2" | sed 's/^/#   /' | head -20; failed=$((failed + 1)); }
compile() {  # compile SCRIPT PARAMS...: into $out; message in $msg
  local script=$1; shift
  local params=()
  for p in "$@"; do params+=(--param "$p"); done
  msg=$("$baton" compile -q "$algs/$script" "${params[@]}" -o "$out" 2>&1)
}
case_() {  # case_ SCRIPT PARAMS...: compile and verify
  local name="$(basename "$1" .lua) ${*:2}"
  if compile "$@" &&
     msg=$("$baton" verify -q --dtype all --op sum "$out" 2>&1) &&
     msg=$("$baton" verify -q --dtype f32 --op all "$out" 2>&1) &&
     msg=$("$baton" verify -q --outofplace --count 5 --tile 1 --slots 2 --dtype i8 --op all "$out" 2>&1); then
    pass "$name"
  else
    fail "$name" "$msg"
  fi
}
refuses() {  # refuses SCRIPT MESSAGE PARAMS...: compiling must fail with MESSAGE
  local script=$1 want=$2; shift 2
  if compile "$script" "$@"; then fail "$script $* is refused" "it compiled"
  elif grep -qF -- "$want" <<<"$msg"; then pass "$script $* is refused: $want"
  else fail "$script $* is refused with '$want'" "$msg"; fi
}
# Lines "RANK SEND" for every thread block of $out that sends.
senders() { awk -F'"' '/<gpu id=/ { r = $2 } /<tb id=/ { if ($4 >= 0) print r, $4 }' "$out"; }
rails() {  # rails NAME WANT GPUS COMMAND: COMMAND (awk over senders) must print WANT
  local name=$1 want=$2 gpus=$3; shift 3
  local got; got=$(senders | awk -v G="$gpus" "$@")
  if [ "$got" = "$want" ]; then pass "$name"; else fail "$name" "got '$got', wanted '$want'"; fi
}

for r in 2 4 8 16; do
  case_ allreduce_ring.lua ranks=$r
  case_ allgather_ring.lua ranks=$r
  case_ reducescatter_ring.lua ranks=$r
  case_ reducescatter_ring.lua ranks=$r inplace=0
  case_ alltoall_direct.lua ranks=$r
  case_ alltoall_pairwise.lua ranks=$r
  case_ alltoall_bruck.lua ranks=$r
  case_ allreduce_allpairs.lua ranks=$r shot=1
  case_ allreduce_allpairs.lua ranks=$r shot=2
  case_ allgather_allpairs.lua ranks=$r
  case_ allreduce_rhd.lua ranks=$r
  case_ allreduce_allpairs.lua ranks=$r shot=1 inplace=0
  case_ allreduce_allpairs.lua ranks=$r shot=2 inplace=0
  case_ allgather_allpairs.lua ranks=$r inplace=0
  case_ reducescatter_allpairs.lua ranks=$r
  case_ allreduce_allpairs.lua ranks=$r shot=1 inplace=0 chain=1
  case_ allreduce_allpairs.lua ranks=$r shot=1 chain=1
  case_ allreduce_allpairs.lua ranks=$r shot=1 chain=1 protocol=LL128
  case_ allreduce_allpairs.lua ranks=$r shot=2 inplace=0 chain=1 agch=1
  case_ allreduce_allpairs.lua ranks=$r shot=2 chain=1
  case_ allreduce_allpairs.lua ranks=$r shot=2 inplace=0 chain=1
  case_ reducescatter_allpairs.lua ranks=$r chain=1
  case_ reducescatter_allpairs.lua ranks=$r chain=1 inplace=1
  case_ reducescatter_allpairs.lua ranks=$r inplace=1 via=direct protocol=Simple chain=1
  case_ allreduce_tree.lua ranks=$r
  case_ allgather_rd.lua ranks=$r
  case_ allreduce_rd.lua ranks=$r
  case_ broadcast_chain.lua ranks=$r
  case_ broadcast_tree.lua ranks=$r
  case_ reduce_chain.lua ranks=$r
  case_ reduce_tree.lua ranks=$r
  case_ broadcast_tree.lua ranks=$r inplace=1
  case_ reduce_chain.lua ranks=$r inplace=1
  case_ gather_direct.lua ranks=$r
  case_ scatter_direct.lua ranks=$r chunks=2
  case_ broadcast_direct.lua ranks=$r chunks=2
  case_ broadcast_direct.lua ranks=$r inplace=1 via=direct
  case_ broadcast_chain.lua ranks=$r inplace=1 chunks=4 via=direct
done
# The trees and recursive doubling on rank counts that are not powers of
# two (the extra ranks of recursive doubling, the shifted second tree).
for r in 3 5 6 7 12; do
  case_ allreduce_tree.lua ranks=$r
  case_ allgather_rd.lua ranks=$r
  case_ allreduce_rd.lua ranks=$r
  case_ broadcast_tree.lua ranks=$r
  case_ reduce_tree.lua ranks=$r
done
case_ allreduce_rd.lua ranks=6 chunks=3 instances=2 protocol=LL
case_ allreduce_tree.lua ranks=8 chunks=1
case_ allreduce_tree.lua ranks=5 chunks=3 instances=2 protocol=LL
case_ allgather_rd.lua ranks=6 chunks=2 instances=2
case_ allgather_rd.lua ranks=8 chunks=3 protocol=LL128
case_ broadcast_chain.lua ranks=5 chunks=1 protocol=LL
case_ broadcast_tree.lua ranks=6 chunks=2 instances=3
case_ reduce_chain.lua ranks=7 chunks=8 instances=2
case_ reduce_tree.lua ranks=12 chunks=1 protocol=LL128
case_ reducescatter_allpairs.lua ranks=4 chunks=3 chain=1
case_ reducescatter_allpairs.lua ranks=4 chunks=3
case_ allreduce_ring.lua ranks=8 channels=2
case_ allreduce_ring.lua ranks=4 channels=4 protocol=LL128
case_ allgather_ring.lua ranks=8 channels=2
case_ reducescatter_ring.lua ranks=8 channels=2
case_ reducescatter_ring.lua ranks=8 channels=2 inplace=0 instances=2
case_ alltoall_direct.lua ranks=4 chunks=3
case_ allgather_allpairs.lua ranks=4 chunks=3
case_ allreduce_ring.lua ranks=8 instances=2
case_ allreduce_ring.lua ranks=4 channels=2 instances=2
case_ alltoall_direct.lua ranks=4 chunks=2 instances=2
case_ allreduce_allpairs.lua ranks=4 shot=2 instances=2
case_ allgather_ring.lua ranks=4 instances=3
case_ allreduce_rhd.lua ranks=8 instances=2
refuses allreduce_tree.lua "allreduce_tree.lua:19: chunks=40000 out of range [1, 32768]" chunks=40000
refuses allreduce_rhd.lua "allreduce_rhd.lua:13: recursive halving-doubling needs a power-of-two number of ranks, not 6" ranks=6
refuses allreduce_allpairs.lua "shot must be 1 or 2, not 3" shot=3
# The in-place one-shot chain sums into scratch and copies the sum back:
# the copy of the input into scratch must be forwarded into the first
# receive-reduce (one step fewer; cc_lower.c forward_copies), though the
# copy back also waits for that copy (it overwrites what it read); and the
# copy back runs in the thread block of the last link, after it
# (copy_after_receive: program order, not a wait across blocks).
if compile allreduce_allpairs.lua ranks=4 shot=1 chain=1 &&
   grep -q 'type="rrc" srcbuf="i" srcoff="0" dstbuf="s"' "$out" && ! grep -q 'type="cpy" srcbuf="i"' "$out"; then
  pass "in-place one-shot chain: the copy into scratch is forwarded into the first receive-reduce"
else
  fail "in-place one-shot chain: the copy into scratch is forwarded into the first receive-reduce" "$msg"
fi
# On 2 ranks the script puts a rank's send and receive in one thread block:
# the sum goes straight into the input, no scratch step, no copy (sink_copies).
t="in-place one-shot chain, 2 ranks: one thread block a rank, send then receive-reduce into the input"
if compile allreduce_allpairs.lua ranks=2 shot=1 chain=1 && ! grep -q 'type="cpy"' "$out" &&
   [ "$(grep -c '<tb ' "$out")" = 2 ] && [ "$(grep -c 'type="rrc" srcbuf="i" srcoff="0" dstbuf="i"' "$out")" = 2 ]; then
  pass "$t"
else
  fail "$t" "$msg"
fi
for r in 4 8; do
  t="in-place one-shot chain, $r ranks: the copy back follows the last link in its thread block"
  if compile allreduce_allpairs.lua ranks=$r shot=1 chain=1 &&
     [ "$(awk '/<tb /{first = ""} /<step /{if (first == "") first = $0} /type="cpy"/{print (first ~ /type="rrc"/)}' "$out" | sort -u)" = 1 ]; then
    pass "$t"
  else
    fail "$t" "$msg"
  fi
done
# Direct programs (via): the all-pairs scripts and the direct AllToAll
# with puts, gets and getrs instead of FIFO messages, in and out of place,
# Simple and LL; the in-place AllToAll by xchg.
for r in 2 3 4 8; do
  case_ allreduce_allpairs.lua ranks=$r shot=1 protocol=LL via=direct
  case_ allreduce_allpairs.lua ranks=$r shot=1 protocol=LL via=direct inplace=0
  case_ allreduce_allpairs.lua ranks=$r shot=1 protocol=Simple via=get inplace=0
  case_ allreduce_allpairs.lua ranks=$r shot=2 protocol=Simple chain=1 via=direct
  case_ allreduce_allpairs.lua ranks=$r shot=2 protocol=Simple chain=1 via=direct inplace=0
  case_ allreduce_allpairs.lua ranks=$r shot=2 protocol=Simple via=put inplace=0
  case_ allreduce_allpairs.lua ranks=$r shot=2 protocol=LL via=direct inplace=0
  case_ allgather_allpairs.lua ranks=$r protocol=Simple via=direct
  case_ allgather_allpairs.lua ranks=$r protocol=LL via=direct inplace=0
  case_ allgather_allpairs.lua ranks=$r protocol=Simple via=get inplace=0 chunks=2
  case_ reducescatter_allpairs.lua ranks=$r protocol=Simple chain=1 via=direct
  case_ reducescatter_allpairs.lua ranks=$r protocol=LL via=direct
  case_ alltoall_direct.lua ranks=$r via=direct
  case_ alltoall_direct.lua ranks=$r via=get chunks=2
  case_ alltoall_direct.lua ranks=$r protocol=LL via=direct
  case_ alltoall_direct.lua ranks=$r via=direct inplace=1
  case_ alltoall_direct.lua ranks=$r protocol=LL via=direct inplace=1
  case_ alltoall_direct.lua ranks=$r via=direct inplace=1 swap=1
  case_ alltoall_direct.lua ranks=$r via=direct inplace=1 swap=1 chunks=3
  case_ alltoall_direct.lua ranks=$r inplace=1 swap=1 chunks=3
  case_ alltoall_direct.lua ranks=$r via=direct land=1 chunks=2
  case_ broadcast_direct.lua ranks=$r via=direct land=1 chunks=2
  case_ broadcast_direct.lua ranks=$r via=direct land=1 inplace=1
  case_ alltoall_direct.lua ranks=$r inplace=1 swap=1 protocol=LL
done
# What they compile to: the 4-rank Simple two-shot out of place is, on
# rank 0, a start sig to every peer, the local copy, a wait for each, the
# getr chain, a put and an end sig per peer, the final waits; the LL
# one-shot puts the input into every peer's scratch and reduces there,
# with no signals.
ops() { "$baton" explain "$out" | awk '/^rank 1 /{exit} $2 ~ /^(sig|wait|cpy|re|getr|get|put)$/ {printf "%s%s", sep, $2; sep=" "} END {print ""}'; }
t="direct two-shot, 4 ranks out of place: rank 0's steps"
want="sig sig sig cpy wait wait wait getr getr getr put sig put sig put sig wait wait wait"
if compile allreduce_allpairs.lua ranks=4 shot=2 protocol=Simple chain=1 inplace=0 via=direct && [ "$(ops)" = "$want" ]; then
  pass "$t"
else
  fail "$t" "${msg:-got '$(ops)'}"
fi
t="direct LL one-shot, 4 ranks in place: rank 0 puts to 3 peers' scratch and reduces 3 landings, no signals"
if compile allreduce_allpairs.lua ranks=4 shot=1 protocol=LL via=direct && [ "$(ops)" = "put put put re re re" ] &&
   [ "$(grep -c 'type="put" srcbuf="i" srcoff="0" dstbuf="s"' "$out")" = 12 ]; then
  pass "$t"
else
  fail "$t" "${msg:-got '$(ops)'}"
fi
# The two-shot through scratch (a process per GPU, unregistered buffers):
# n - 1 landed pieces and n - 1 gathered sums on every rank, no slot unused.
for r in 2 4 8; do
  t="direct two-shot through scratch, $r ranks: $((2 * (r - 1))) scratch chunks on every rank"
  if compile allreduce_allpairs.lua ranks=$r shot=2 chain=1 protocol=Simple via=put stage=1 &&
     [ "$(grep -o 's_chunks="[0-9]*"' "$out" | sort -u)" = "s_chunks=\"$((2 * (r - 1)))\"" ]; then
    pass "$t"
  else
    fail "$t" "${msg:-got $(grep -o 's_chunks="[0-9]*"' "$out" | sort -u | tr '\n' ' ')}"
  fi
done
t="direct AllToAll in place, 4 ranks: rank 0 puts its blocks into the peers' scratch, then copies theirs into place"
want="sig sig sig wait wait wait put sig put sig put sig wait wait wait cpy cpy cpy"
if compile alltoall_direct.lua ranks=4 via=direct inplace=1 && [ "$(ops)" = "$want" ] &&
   [ "$(grep -c 'type="put" srcbuf="i" srcoff="[0-9]*" dstbuf="s"' "$out")" = 12 ]; then
  pass "$t"
else
  fail "$t" "${msg:-got '$(ops)'}"
fi
refuses alltoall_direct.lua "inplace=1 through FIFOs needs swap=1 (the blocks through scratch are direct: via=direct, put or get)" inplace=1
refuses alltoall_direct.lua "land=1 is for the direct AllToAll (via=direct or put): it puts into scratch" land=1
refuses broadcast_direct.lua "land=1 is for the direct one-hop Broadcast (shot=1, via=direct or put)" land=1 via=direct shot=2
# An out-of-place AllToAll that is race-free with its input and output one
# buffer runs in-place calls as it is (the runtime's rule), and the CPU
# executor checks such a run; one that races is refused, saying so.
t="the direct LL AllToAll out of place runs in place on the CPU executor, every type"
if compile alltoall_direct.lua ranks=4 via=direct protocol=LL &&
   msg=$("$baton" verify -q --inplace --dtype all --op sum "$out" 2>&1); then
  pass "$t"
else
  fail "$t" "$msg"
fi
t="--as-run runs the direct LL AllToAll in place and out of place, as the runtime does"
if compile alltoall_direct.lua ranks=4 via=direct protocol=LL && msg=$("$baton" verify --as-run "$out" 2>&1) &&
   [ "$(grep -c ': ok ' <<< "$msg")" = 2 ] && grep -q "in place and out of place" <<< "$msg"; then
  pass "$t"
else
  fail "$t" "$msg"
fi
t="the direct Simple AllToAll out of place is refused in place: it races"
if compile alltoall_direct.lua ranks=4 via=direct && msg=$("$baton" verify --inplace "$out" 2>&1); then
  fail "$t" "verified: $msg"
else
  case "$msg" in
    *"unsafe in place"*"data race in its memory"*"(the same memory in place)"*) pass "$t" ;;
    *) fail "$t" "$msg" ;;
  esac
fi
refuses allreduce_allpairs.lua "via='get': a direct LL program has no gets" via=get
refuses allreduce_allpairs.lua "via='direct' with instances = 2" via=direct instances=2
refuses allreduce_allpairs.lua "copy with ch=1 in a direct program" via=direct agch=1 shot=2
refuses alltoall_direct.lua "via='direct' with placement = \"paired\"" via=direct placement=paired
refuses allreduce_ring.lua "allreduce_ring.lua:9: threads=100 must be a multiple of 32 in [32, 512]" threads=100
case_ allreduce_ring.lua ranks=4 instances=2 threads=256
if compile allreduce_ring.lua ranks=4 threads=256 && grep -q '<algo [^>]*nthreads="256"' "$out"; then
  pass "threads=256 is the IR's nthreads"
else
  fail "threads=256 is the IR's nthreads" "$msg"
fi

# Multi-node scripts: nodes x gpus, the topology declared (so every copy is
# checked against the rails), one node and one GPU per node included.
for shape in "nodes=1 gpus=4" "nodes=4 gpus=1" "nodes=2 gpus=2" "nodes=2 gpus=4" "nodes=4 gpus=2" "nodes=4 gpus=4" "nodes=2 gpus=8"; do
  case_ allreduce_hier.lua $shape
  case_ alltoall_twostep.lua $shape
  case_ alltonext.lua $shape
  case_ allreduce_altring.lua $shape
done
case_ allreduce_altring.lua nodes=3 gpus=4
case_ allreduce_altring.lua nodes=3 gpus=3 channels=3
case_ allreduce_altring.lua nodes=2 gpus=4 channels=1 protocol=LL
case_ allreduce_hier.lua nodes=2 gpus=2 instances=2
case_ alltoall_twostep.lua nodes=2 gpus=2 chunks=2
case_ alltoall_twostep.lua nodes=3 gpus=2
case_ alltoall_twostep.lua nodes=2 gpus=4 placement=paired
if compile alltoall_twostep.lua nodes=2 gpus=4 && a=$(grep -c '<tb id=' "$out") &&
   compile alltoall_twostep.lua nodes=2 gpus=4 placement=paired && b=$(grep -c '<tb id=' "$out") && [ $((5 * b)) -le $((3 * a)) ]; then
  pass "twostep 2x4 placement=paired: a peer's two directions in one thread block ($a -> $b thread blocks)"
else fail "twostep 2x4 placement=paired: a peer's two directions in one thread block" "${a:-?} -> ${b:-?}: $msg"; fi
case_ alltonext.lua nodes=3 gpus=4 instances=2
refuses allreduce_altring.lua "alternating rings over an odd number of nodes need 3 or more GPUs per node, not 2" nodes=3 gpus=2

# The fused embedding bags' pooling order (the compiler puts a rank's own slice last either way):
# rank 1 pools rank 0's samples first in rank order, rank 2's when rotated.
first_ebag() { awk -F'"' '/<gpu id="1"/ { g = 1 } g && /type="ebag"/ { for (i = 1; i < NF; i++) if ($i ~ /srcoff=$/) { print $(i + 1); exit } }' "$out"; }
if compile embedding_alltoall.lua ranks=4 && [ "$(first_ebag)" = 0 ] &&
   compile embedding_alltoall.lua ranks=4 order=rotated && [ "$(first_ebag)" = 2 ] &&
   msg=$("$baton" verify -q --dim D=64 --dim T=4 "$out" 2>&1); then
  pass "embedding_alltoall order=rotated: rank 1 pools rank 2's samples first, and it verifies"
else fail "embedding_alltoall order=rotated: rank 1 pools rank 2's samples first" "$msg"; fi
refuses embedding_alltoall.lua "order must be rank or rotated, not bad" ranks=4 order=bad

# What the multi-node scripts promise about their traffic (4 x 4):
# alternating rings: the cross-node hops of the channels together use every rail.
compile allreduce_altring.lua nodes=4 gpus=4
rails "altring 4x4: cross-node hops use all 4 rails" 4 4 \
  '$1 % G == $2 % G && int($1 / G) != int($2 / G) { u[$1 % G] = 1 } END { for (g in u) k++; print k }'
# AllToNext: every GPU of node m forwards a piece to node m+1; nothing else crosses.
compile alltonext.lua nodes=4 gpus=4
rails "alltonext 4x4: all 4 GPUs of each node send across, on their rails" "12 0" 4 \
  'int($1 / G) != int($2 / G) { if ($1 % G == $2 % G && int($2 / G) == int($1 / G) + 1) ok++; else bad++ } END { print ok + 0, bad + 0 }'
# Two-step AllToAll: one aggregated message per ordered pair of rail peers.
compile alltoall_twostep.lua nodes=4 gpus=4
rails "twostep 4x4: 4*3*4 cross-node thread blocks, each on a rail" "48 0" 4 \
  'int($1 / G) != int($2 / G) { if ($1 % G == $2 % G) ok++; else bad++ } END { print ok + 0, bad + 0 }'
steps=$(grep -c 'type="s".*cnt="4"' "$out")
if [ "$steps" = 48 ]; then pass "twostep 4x4: each cross-node message carries the 4 blocks of a node"
else fail "twostep 4x4: each cross-node message carries the 4 blocks of a node" "$steps aggregated sends, wanted 48"; fi
# Rooted collectives: in a Broadcast the ranks other than 0 never read
# their input (they receive into their output and send from there); in a
# Reduce they never write their output or their input (partial sums go to
# scratch).  Lines "RANK TYPE SRCBUF DSTBUF" for every step of $out; steps
# that read src: s rrc rrs rrcs cpy re; that write dst: r rcs rrc rrcs cpy re.
step_list() { awk -F'"' '/<gpu id=/ { r = $2 } /<step / { print r, $4, $6, $10 }' "$out"; }
rooted() {  # rooted SCRIPT RANKS AWK: no step of a rank but 0 matches AWK
  local name="$1 $2 ranks: ranks but 0 never $4" bad
  if compile "$1.lua" ranks=$2 chunks=2; then
    bad=$(step_list | awk "\$1 != 0 && ($3)")
    if [ -z "$bad" ]; then pass "$name"; else fail "$name" "$bad"; fi
  else
    fail "$name" "$msg"
  fi
}
for r in 2 5 8 13; do
  for s in broadcast_chain broadcast_tree broadcast_direct; do
    rooted $s $r '$2 ~ /^(s|rrc|rrs|rrcs|cpy|re)$/ && $3 == "i"' "read their input"
  done
  for s in reduce_chain reduce_tree gather_direct; do
    rooted $s $r '$2 ~ /^(r|rcs|rrc|rrcs|cpy|re)$/ && ($4 == "o" || $4 == "i")' "write their output or input"
  done
  rooted scatter_direct $r '$2 ~ /^(s|rrc|rrs|rrcs|cpy|re)$/ && $3 == "i"' "read their input"
done
# Recursive doubling on 8 ranks: rank r sends one message to each of
# r xor 1, 2 and 4 and to no one else; on 6 ranks the extra ranks 4 and 5
# exchange with their partners 0 and 1 only.
t="allgather_rd 8 ranks: rank r sends one message to each of r xor 1, 2, 4"
want=$(for r in 0 1 2 3 4 5 6 7; do printf '%s\n' "$r $((r ^ 1))" "$r $((r ^ 2))" "$r $((r ^ 4))"; done | sort)
if compile allgather_rd.lua ranks=8 && [ "$(senders | sort)" = "$want" ] &&
   [ "$(step_list | awk '$2 ~ /^(s|rcs|rrs|rrcs)$/' | wc -l)" = 24 ]; then
  pass "$t"
else
  fail "$t" "$msg"
fi
# exchange() folds into receive-reduces: recursive doubling AllReduce on 8
# ranks is one send and then receive-reduces (rrcs, the last rrc), 4 a rank.
t="allreduce_rd 8 ranks: rank r trades with r xor 1, 2, 4 only, 4 steps a rank, no local reduce"
if compile allreduce_rd.lua ranks=8 && [ "$(senders | sort)" = "$want" ] &&
   [ "$(step_list | wc -l)" = 32 ] && [ "$(step_list | awk '$2 ~ /^(re|r|nop)$/' | wc -l)" = 0 ]; then
  pass "$t"
else
  fail "$t" "$msg"
fi
t="allgather_rd 6 ranks: ranks 4 and 5 exchange with ranks 0 and 1 only"
if compile allgather_rd.lua ranks=6 && [ "$(senders | awk '$1 >= 4 || $2 >= 4' | sort | tr '\n' ,)" = "0 4,1 5,4 0,5 1," ]; then
  pass "$t"
else
  fail "$t" "$msg"
fi
# The double binary tree: interior ranks add their children's sums and send
# them on in one step (rrs; rrcs at the roots) and receive, keep and forward
# the result in one (rcs); at most 6 thread blocks a rank (4 where it is
# interior, 2 where it is a leaf).
for r in 8 64; do
  t="allreduce_tree $r ranks: fused rrs, rrcs and rcs steps, at most 6 thread blocks a rank"
  if compile allreduce_tree.lua ranks=$r && grep -q 'type="rrs"' "$out" && grep -q 'type="rrcs"' "$out" && grep -q 'type="rcs"' "$out" &&
     [ "$(awk '/<gpu id=/ { if (t > m) m = t; t = 0 } /<tb id=/ { t++ } END { if (t > m) m = t; print m }' "$out")" -le 6 ]; then
    pass "$t"
  else
    fail "$t" "$msg"
  fi
done
# Fused programs (GEMV + AllReduce): every type they take, the operand's
# K dimension odd and large, one-element tiles with two FIFO slots.
fused_case() {  # fused_case SCRIPT PARAMS...
  local name="$(basename "$1" .lua) ${*:2}"
  if compile "$@" &&
     msg=$("$baton" verify -q --dtype all --op sum --dim K=301 "$out" 2>&1) &&
     msg=$("$baton" verify -q --dtype bf16 --op max --count 5 --tile 1 --slots 2 --dim K=1 "$out" 2>&1) &&
     msg=$("$baton" verify -q --dtype f16 --count 999 --tile 16 --dim K=2000 "$out" 2>&1); then
    pass "$name"
  else
    fail "$name" "$msg"
  fi
}
for r in 1 2 4 8; do
  fused_case gemv_allreduce.lua ranks=$r
  fused_case gemv_allreduce.lua ranks=$r form=ring
  fused_case gemv_allreduce.lua ranks=$r zerocopy=1
done
fused_case gemv_allreduce.lua ranks=4 chunks=2 sync=group:2
fused_case gemv_allreduce.lua ranks=4 chunks=3 sync=stride:2 protocol=Simple
fused_case gemv_allreduce.lua ranks=4 form=ring chunks=2 protocol=LL128 tileorder=program
fused_case gemv_allreduce.lua ranks=4 instances=2
refuses gemv_allreduce.lua "zerocopy=1 is for form=allpairs" form=ring zerocopy=1
refuses gemv_allreduce.lua "sync='group': expected" sync=group
# The compute thread block takes the slices it sends first: on rank 0 of
# the all-pairs form, slice 0 (its own) is its last step.
t="gemv_allreduce 4 ranks: rank 0 computes the slices it sends first, its own last"
if compile gemv_allreduce.lua ranks=4 &&
   [ "$(awk '/<gpu id="1"/{exit} /type="gemv"/{print}' "$out" | sed -n '4p' | grep -c 'srcoff="0"')" = 1 ]; then
  pass "$t"
else
  fail "$t" "$msg"
fi
echo "1..$n"
[ $failed -eq 0 ]
