#!/usr/bin/env bash
# gpu_net.sh -- the network transport on GPUs in one command: baton bench of
# the ring, all-pairs and multi-node algorithms with every rank its own node
# group (BATON_NODE_RANKS=1, or NODE_RANKS), so that every connection crosses
# TCP through the proxies; plus tuning points (piece size, sockets per link).
# With a GPU per rank, NCCL runs beside baton on its socket transport (its
# P2P and shared-memory transports off, NCCL_NET=Socket), both over the same
# sockets; with fewer GPUs the ranks share GPU 0 and baton runs alone.
# Usage: tools/measure/gpu_net.sh BATON ALGDIR OUTDIR [RANKS]
#   ALGDIR: tools/measure/gpu_prep.sh's output for RANKS ranks (default 4).
# Writes OUTDIR/net_NAME.txt and .csv per run; tools/measure/plot_net.py draws them.
set -u
b=$1 a=$2 out=$3 n=${4:-4}
mkdir -p "$out"
export BATON_NET=${BATON_NET:-socket} BATON_ALGO_DIR= BATON_TIMEOUT=${BATON_TIMEOUT:-30}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$gpus" -ge "$n" ]; then
  mode=(-g "$n")
  export NCCL_NET=Socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0
  export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
  echo "# $n ranks on $n GPUs, NCCL over sockets beside baton"
else
  mode=(-g "$n" --share 1 --no-nccl)
  echo "# $n ranks sharing GPU 0 ($gpus GPUs), baton alone"
fi
one() {  # one NAME COLL FILE [VAR=VALUE...]: baton bench of one program over the network
  local name=$1 coll=$2 file=$3; shift 3
  [ -f "$a/$file" ] || { echo "-- $name: no $a/$file"; return; }
  env BATON_NODE_RANKS="${NODE_RANKS:-1}" BATON_ALGO_FILES="$a/$file" "$@" timeout 150 "$b" bench "${mode[@]}" \
    -C "$coll" -b 64K -e 64M -f 4 -w 2 -n 10 --rounds 3 --csv "$out/net_$name.csv" > "$out/net_$name.txt" 2>&1
  echo "== $name ($file $*): exit $?"
  grep -E '^ +[0-9]|over the network|error' "$out/net_$name.txt" | cut -c1-150
}
s=_${n}r.xml
one ar_ring allreduce allreduce_ring$s
one ar_hier allreduce allreduce_hier$s
one ar_altring allreduce allreduce_altring$s
one ar_allpairs2 allreduce allreduce_allpairs2_oop_simple$s
one ag_ring allgather allgather_ring$s
one rs_ring reducescatter reducescatter_ring$s
one a2a_direct alltoall alltoall_direct$s
one a2a_twostep alltoall alltoall_twostep$s
one ar_ring_piece64k allreduce allreduce_ring$s BATON_NET_PIECE=65536
one ar_ring_socks4 allreduce allreduce_ring$s BATON_SOCKET_NSOCKS=4
one ar_ring_lanes8 allreduce allreduce_ring$s BATON_NET_LANES=8
