#!/usr/bin/env bash
# verify suite (test 'library_matrix'): the library scripts (algorithms/*.lua
# but the fused ones: gemv_allreduce, embedding_alltoall, moe_combine) over
# their parameters: ranks 2, 3, 4, 5, 8, 16, 32, 64 or nodes x gpus shapes up
# to 8x8, channels 1-4, chunks 1-3, instances 1-4 and each script's own
# switches, all protocols; the scripts for any rank count that compile in
# milliseconds (the trees, chains and recursive doubling) at every rank
# count 2-64 too.  `baton compile` proves every program
# deadlock-free with BATON_EXEC_SLOTS FIFO slots per connection and runs it
# on the CPU with that many: every combination of a script's parameters is
# compiled with 2 slots (the fewest the scheduler orders programs for,
# CC_LOWER_SLOTS), the protocol going round case by case, and a pairwise
# sample (every value and every pair of values of two parameters of a
# script in some case, the cases taken in a fixed pseudo-random order) over
# every protocol with 8, the default; first the hierarchical AllReduce
# shapes that deadlocked, last the every-rank scripts at the other rank
# counts, with two slots.  What a script refuses (rhd on a rank count that
# is not a power of two, more thread blocks than a GPU runs at once, ...)
# is an expected refusal: its message is checked, and compiling it is a
# failure.  One TAP line per case; a failing one prints the command that
# reproduces it.  The direct all-pairs programs (via=direct, put, get) run
# once each, Simple and LL, in and out of place, at every rank count.
# Usage: library_matrix.sh BATON ALGORITHMS_DIR [quick|sample|all|list|list-sample]
#   quick (the default; test 'library_matrix', suite verify): pairwise
#        samples of the sample below (about 50 s on 2 cores);
#   sample (test 'library_matrix_full', suite matrix): every two-slot
#        combination, the eight-slot sample, every direct case and every
#        every-rank case (about 2 minutes on 2 cores);
#   all: the whole cross product at both slot counts, the every-rank
#        scripts at every rank count 2-64 in it (several minutes);
#   list, list-sample: print the cases quick or sample runs, one a line.
set -u
baton=$1 algs=$2 mode=${3:-quick}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

RANKS=2,3,4,5,8,16,32,64
# The rank counts the every-rank scripts take in the cross product: $RANKS
# in the sample (every_rank() adds the others), 2-64 with `all`.
WIDE=$RANKS
EVERY_RANK="allreduce_tree.lua allgather_rd.lua allreduce_rd.lua broadcast_chain.lua broadcast_tree.lua reduce_chain.lua reduce_tree.lua"
SHAPES=1x4,2x2,2x3,2x4,2x5,2x8,3x2,3x3,3x4,4x2,4x4,4x8,8x4,8x8
PROTOCOLS=(Simple LL LL128)

product() {  # product PREFIX AXIS=V,V... : one line per combination
  local prefix=$1; shift
  if [ $# -eq 0 ]; then echo "$prefix"; return; fi
  local axis=${1%%=*} vals=${1#*=} v; shift
  for v in ${vals//,/ }; do product "$prefix $axis=$v" "$@"; done
}

# Every combination of each script's own parameters, "SCRIPT KEY=VALUE ..."
# (shape=NxG stands for nodes=N gpus=G), protocol and slots left out.
# (allreduce_allpairs.lua reads agch only for shot=2: a --param it does not
# read is an error.)
combos() {
  product allreduce_ring.lua ranks=$RANKS channels=1,2,3,4 instances=1,2,3,4
  product allgather_ring.lua ranks=$RANKS channels=1,2,3,4 instances=1,2,3,4
  product reducescatter_ring.lua ranks=$RANKS channels=1,2,3,4 inplace=0,1 instances=1,2,3,4
  product allreduce_rhd.lua ranks=$RANKS instances=1,2,3,4
  product allreduce_allpairs.lua ranks=$RANKS shot=1 inplace=0,1 chain=0,1 instances=1,2,3,4 placement=split,paired
  product allreduce_allpairs.lua ranks=$RANKS shot=2 inplace=0,1 chain=0,1 agch=0,1 instances=1,2,3,4 placement=split,paired
  product allgather_allpairs.lua ranks=$RANKS chunks=1,2,3 inplace=0,1 instances=1,2,3,4
  product alltoall_direct.lua ranks=$RANKS chunks=1,2,3 instances=1,2,3,4 placement=split,paired
  product alltoall_pairwise.lua ranks=$RANKS chunks=1,2 peers=1,2 placement=split,paired
  # Bruck's strided messages stay one step per instance: 32 and 64 ranks
  # compile in well under a second with instances too.
  product alltoall_bruck.lua ranks=2,3,4,5,8,16 chunks=1,2,3 instances=1,2,3,4
  product alltoall_bruck.lua ranks=32,64 chunks=1,2,3 instances=1,4
  product reducescatter_allpairs.lua ranks=$RANKS chunks=1,2,3 chain=0,1 inplace=0,1 instances=1,2,3,4
  product allreduce_hier.lua shape=$SHAPES instances=1,2,3,4
  product allreduce_altring.lua shape=$SHAPES channels=1,2,3,4 instances=1,2,3,4
  product alltoall_twostep.lua shape=$SHAPES chunks=1,2,3 instances=1,2,3,4
  product alltonext.lua shape=$SHAPES instances=1,2,3,4
  local s
  for s in $EVERY_RANK; do product "$s" ranks=$WIDE chunks=1,2,3 instances=1,2,3,4; done
  for s in broadcast_chain broadcast_tree reduce_chain reduce_tree; do
    product "$s.lua" ranks=$RANKS chunks=1,3 inplace=1 instances=1,2
  done
  # The direct gather, scatter and broadcast: the root has a thread block
  # per peer and instance, so 32 and 64 ranks take one instance (more is
  # refused: 108 a rank).
  for s in gather_direct scatter_direct; do
    product "$s.lua" ranks=2,3,4,5,8,16 chunks=1,2,3 instances=1,2,3,4
    product "$s.lua" ranks=32,64 chunks=1,2,3 instances=1
  done
  # (the two-shot's other ranks send to n - 2 peers and receive from n - 1)
  product broadcast_direct.lua ranks=2,3,4,5,8 shot=1,2 chunks=1,2,3 inplace=0,1 instances=1,2,3,4
  product broadcast_direct.lua ranks=16 shot=1,2 chunks=1,2,3 inplace=0,1 instances=1,2,3
  product broadcast_direct.lua ranks=32 shot=1,2 chunks=1,2 inplace=0,1 instances=1
  product broadcast_direct.lua ranks=64 shot=1 chunks=1,2 inplace=0,1 instances=1
}

# Direct programs (via=direct, put, get): the all-pairs scripts and the
# direct AllToAll, one instance and channel, Simple and LL (get: Simple
# only), their own protocol and no FIFO slots to speak of.
direct() {
  local s
  for s in "allreduce_allpairs.lua shot=1" "allreduce_allpairs.lua shot=2"; do
    product "$s" ranks=$RANKS inplace=0,1 chain=0,1 via=direct,put protocol=Simple,LL slots=2
    product "$s" ranks=$RANKS inplace=0,1 chain=0,1 via=get protocol=Simple slots=2
  done
  product allgather_allpairs.lua ranks=$RANKS chunks=1,2 inplace=0,1 via=direct,put protocol=Simple,LL slots=2
  product allgather_allpairs.lua ranks=$RANKS chunks=1,2 inplace=0,1 via=get protocol=Simple slots=2
  product reducescatter_allpairs.lua ranks=$RANKS chunks=1,2 chain=0,1 inplace=0,1 via=direct,put protocol=Simple,LL slots=2
  product reducescatter_allpairs.lua ranks=$RANKS chunks=1,2 chain=0,1 inplace=0,1 via=get protocol=Simple slots=2
  product alltoall_direct.lua ranks=$RANKS chunks=1,2 inplace=0,1 via=direct,put protocol=Simple,LL slots=2
  product alltoall_direct.lua ranks=$RANKS chunks=1,2 inplace=0,1 via=get protocol=Simple slots=2
  product broadcast_direct.lua ranks=$RANKS shot=1,2 chunks=1,2 inplace=0,1 via=direct,put,get protocol=Simple slots=2
  product broadcast_chain.lua ranks=$RANKS chunks=1,4 inplace=0,1 via=direct,put,get protocol=Simple slots=2
  product broadcast_tree.lua ranks=$RANKS chunks=1,4 inplace=1 via=direct,put protocol=Simple slots=2
  # LL one way: each receiving rank signals its sender at its start
  product broadcast_direct.lua ranks=$RANKS shot=1,2 chunks=1,2 inplace=0,1 via=direct,put protocol=LL slots=2
  product broadcast_chain.lua ranks=$RANKS chunks=1,4 inplace=0,1 via=direct,put protocol=LL slots=2
  product broadcast_tree.lua ranks=$RANKS chunks=1,4 inplace=1 via=direct,put protocol=LL slots=2
}

# The every-rank scripts at each rank count 2-64 that $RANKS leaves out,
# with two slots: chunks 1-3, the instances and the protocol going round.
every_rank() {
  local s r c i=0
  for s in $EVERY_RANK; do
    for r in $(seq 2 64); do
      case ",$RANKS," in *",$r,"*) continue ;; esac
      for c in 1 2 3; do
        i=$((i + 1))
        echo "$s ranks=$r chunks=$c instances=$((1 + (r + c) % 4)) protocol=${PROTOCOLS[i % 3]} slots=2"
      done
    done
  done
}

# One rank, where a ring or a pair has no peer: every script that takes a
# rank count, in and out of place where it reads `inplace` (a one-rank
# ring ReduceScatter out of place once left its output unwritten), with
# two slots, the protocol going round.
one_rank() {
  local s
  {
  for s in allreduce_ring allgather_ring allreduce_rhd alltoall_bruck alltoall_pairwise gather_direct scatter_direct \
    ${EVERY_RANK//.lua/}; do
    echo "$s.lua ranks=1"
  done
  product reducescatter_ring.lua ranks=1 channels=1,2 inplace=0,1
  product allreduce_allpairs.lua ranks=1 shot=1,2 inplace=0,1
  product allgather_allpairs.lua ranks=1 inplace=0,1
  product reducescatter_allpairs.lua ranks=1 inplace=0,1
  product broadcast_direct.lua ranks=1 shot=1,2 inplace=0,1
  product alltoall_direct.lua ranks=1 via=direct,put,get
  for s in broadcast_chain broadcast_tree reduce_chain reduce_tree; do product "$s.lua" ranks=1 inplace=0,1; done
  } | two_slots_round
}

# The cases on standard input with two slots, the protocol going round
# Simple, LL, LL128 case by case.
two_slots_round() {
  awk -v p="${PROTOCOLS[*]}" 'BEGIN { np = split(p, P, " ") } { print $0, "protocol=" P[NR % np + 1], "slots=2" }'
}

# With two slots (the fewest the compiler schedules for): every
# combination, the protocol going round.
two_slots() { combos | two_slots_round; }

# A pairwise sample of the cases on standard input: in a fixed
# pseudo-random order (a hash of the line), each kept when it holds a value
# or a pair of values of its script no kept case holds yet.
pairwise() {
  awk 'BEGIN { for (i = 32; i < 127; i++) ord[sprintf("%c", i)] = i }
       { h = 7; for (i = 1; i <= length($0); i++) h = (h * 31 + ord[substr($0, i, 1)]) % 2147483647
         print h "\t" $0 }' | sort -s -t"$(printf '\t')" -k1,1n | cut -f2- |
    awk '{ new = 0
           for (i = 2; i <= NF; i++) {
             if (!(($1, $i) in cov)) new = 1
             for (j = i + 1; j <= NF; j++) if (!(($1, $i, $j) in cov)) new = 1
           }
           if (!new) next
           for (i = 2; i <= NF; i++) { cov[$1, $i] = 1; for (j = i + 1; j <= NF; j++) cov[$1, $i, $j] = 1 }
           print }'
}

# With eight (the default): a pairwise sample over every protocol.
eight_slots() {
  local p
  for p in "${PROTOCOLS[@]}"; do combos | sed "s/\$/ protocol=$p slots=8/"; done | pairwise
}

# The shapes of the hierarchical AllReduce that deadlocked before the
# scheduler ran its order on two slots (8x4 and 8x8 with instances 2-4
# failed the compiler's own 8-slot proof; the others 2 slots), 2x16 too.
pinned() {
  product allreduce_hier.lua shape=2x16 instances=2,3,4 protocol=Simple slots=2,8
  product allreduce_hier.lua shape=8x4,8x8 instances=2,3,4 protocol=LL128 slots=8
}

# Sets want to the message a case must be refused with, or to nothing when
# it must compile (no subshell: it runs once per case).
refusal() {  # refusal SCRIPT KEY=VALUE...
  want=""
  local script=$1 kv ranks=0 inst=1 shot=0 chain=0 agch=0 inplace=1 nodes=0 gpus=0 placement=split via=fifo; shift
  for kv in "$@"; do
    case $kv in
      via=*) via=${kv#*=} ;;
      ranks=*) ranks=${kv#*=} ;; instances=*) inst=${kv#*=} ;; shot=*) shot=${kv#*=} ;;
      chain=*) chain=${kv#*=} ;; agch=*) agch=${kv#*=} ;; inplace=*) inplace=${kv#*=} ;;
      nodes=*) nodes=${kv#*=} ;; gpus=*) gpus=${kv#*=} ;; placement=*) placement=${kv#*=} ;;
    esac
  done
  [ "$via" = fifo ] || return   # a direct program: one thread block a rank
  case $script in
    allreduce_rhd.lua)
      if [ $((ranks & (ranks - 1))) -ne 0 ]; then
        want="recursive halving-doubling needs a power-of-two number of ranks, not $ranks"; fi
      return ;;
    allreduce_altring.lua)
      if [ $((nodes % 2)) = 1 ] && [ "$nodes" -gt 1 ] && [ "$gpus" = 2 ]; then
        want="alternating rings over an odd number of nodes need 3 or more GPUs per node, not 2"; fi
      return ;;
  esac
  # The all-pairs scripts' thread blocks per rank, as the compiler makes
  # them: in every instance, one per peer and direction (twice with agch=1,
  # the two-shot's all-gather on a channel of its own), one more for local
  # copies and reductions where the script has them (not with chain=1, nor
  # for an in-place all-gather), one fewer for the two-shot chain on one
  # channel (a peer's receive-reduce and send fuse into one thread block).
  # With placement=paired a peer's send and receive share one: one per
  # peer, and the two-shot's chain needs its local one again.
  # Past the 108 a GPU runs at once, the compiler refuses the program.
  local peers=$((2 * (ranks - 1))) per=0 chained=$chain
  if [ "$placement" = paired ]; then peers=$((ranks - 1)) chained=0; fi
  case $script in
    alltoall_direct.lua | alltoall_pairwise.lua) per=$((peers + 1)) ;;
    allgather_allpairs.lua) per=$((peers + (inplace == 0))) ;;
    reducescatter_allpairs.lua) per=$((peers + (chain == 0))) ;;
    allreduce_allpairs.lua)
      if [ "$shot" = 1 ]; then per=$((peers + (chain == 0)))
      elif [ "$agch" = 1 ]; then per=$((2 * peers + (chain == 0)))
      else per=$((peers + 1 - 2 * chained)); fi ;;
  esac
  if [ $((per * inst)) -gt 108 ]; then
    want="rank 0 needs $((per * inst)) thread blocks, more than the 108 a GPU runs at once"; fi
}

run_case() {  # run_case NUMBER CASE...: one TAP line
  local num=$1 script=$2 slots=8 p=() kv; shift 2
  for kv in "$@"; do
    case $kv in
      slots=*) slots=${kv#*=} ;;
      shape=*) local s=${kv#*=}; p+=(nodes=${s%x*} gpus=${s#*x}) ;;
      *) p+=("$kv") ;;
    esac
  done
  local args=() msg rc
  for kv in "${p[@]}"; do args+=(--param "$kv"); done
  refusal "$script" "${p[@]}"
  local name="${script%.lua} ${p[*]} slots=$slots"
  local repro="BATON_EXEC_SLOTS=$slots $baton compile $algs/$script ${args[*]} -o /tmp/out.xml"
  msg=$(BATON_EXEC_SLOTS=$slots "$baton" compile -q "$algs/$script" "${args[@]}" -o "$tmp/out.xml" 2>&1); rc=$?
  if [ -z "$want" ] && [ $rc = 0 ]; then echo "ok $num - $name"; return 0; fi
  if [ -n "$want" ] && [ $rc != 0 ] && grep -qF -- "$want" <<<"$msg"; then
    echo "ok $num - $name is refused: $want"; return 0; fi
  if [ -n "$want" ]; then echo "not ok $num - $name is refused with '$want'"
  else echo "not ok $num - $name"; fi
  echo "# reproduce: $repro"
  { [ $rc = 0 ] && echo "it compiled"; printf '%s\n' "$msg" | cut -c1-400 | head -8; } | sed 's/^/#   /'
  return 1
}

all() { local p s; for p in "${PROTOCOLS[@]}"; do for s in 2 8; do combos | sed "s/\$/ protocol=$p slots=$s/"; done; done; direct; one_rank; }
sample() { pinned; two_slots; eight_slots; direct; every_rank; one_rank; }
# The quick form: the pinned shapes, a pairwise sample of the two-slot
# cases, of the eight-slot ones and of the direct ones, and every fourth
# every-rank case, and every one-rank case.
quick() { pinned; two_slots | pairwise; eight_slots; direct | pairwise; every_rank | awk 'NR % 4 == 1'; one_rank; }
case $mode in
  all) WIDE=$(seq -s, 2 64); list() { all; } ;;
  list) quick; exit 0 ;;
  list-sample) sample; exit 0 ;;
  sample) list() { sample; } ;;
  *) list() { quick; } ;;
esac
n=0 failed=0 start=$SECONDS
while read -r -a c; do
  n=$((n + 1))
  run_case "$n" "${c[@]}" || failed=$((failed + 1))
done < <(list)
echo "# $n cases, $failed failed, $((SECONDS - start)) s"
echo "1..$n"
[ "$failed" -eq 0 ]
