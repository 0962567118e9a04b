#!/usr/bin/env bash
# unit suite: tools/measure/trace_summary.py on a hand-made BATON_TRACE timeline
# (two ranks, one block each) whose times are known: cycles convert at the
# rank's rate (ENTER..EXIT), starts are relative to the first block.
# Also tools/measure/plot_trace.py, which sits beside it, on the same timelines.
# Usage: trace_summary.sh TRACE_SUMMARY_PY   (TAP output)
set -u
py=$1
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
hdr=rank,algo,threads,block,lane,tb,event,step,tile,ns,clk
# Rank 0: 2 cycles/ns; ready 1 us after enter, step 0 waits 1 us, works 3 us; 10 us in all.
printf '%s\n' $hdr 0,demo,512,0,0,0,enter,0,0,1000,10000 0,demo,512,0,0,0,ready,0,0,0,12000 \
  0,demo,512,0,0,0,waited,0,0,0,14000 0,demo,512,0,0,0,done,0,0,0,20000 0,demo,512,0,0,0,exit,0,0,11000,30000 \
  > "$tmp/t.0.csv"
# Rank 1 starts 2 us later; step 1, tile index 0.
printf '%s\n' $hdr 1,demo,512,0,0,0,enter,0,0,3000,0 1,demo,512,0,0,0,ready,0,0,0,500 \
  1,demo,512,0,0,0,waited,1,0,0,1500 1,demo,512,0,0,0,done,1,0,0,3500 1,demo,512,0,0,0,exit,0,0,5000,4000 \
  > "$tmp/t.1.csv"
out=$(python3 "$py" "$tmp/t" 2>&1)
check "the header names the program and each rank's cycle rate" "^# demo, 512 threads.*rank 0 2\.00, rank 1 2\.00"
check "rank 0's block: setup, the step's wait and work, its end" \
  "^rank 0 block +0 \(tb 0, lane 0\): start +0\.00 setup +1\.00 \| 0:0 wait 1\.00 work 3\.00 \| end +10\.00"
check "rank 1's block starts 2 us after rank 0's" \
  "^rank 1 block +0 \(tb 0, lane 0\): start +2\.00 setup +0\.25 \| 0:1 wait 0\.50 work 1\.00 \| end +4\.00"
check "per rank: first and last start, last end" "^rank 1: first start 2\.00, last start 2\.00, last end 4\.00"
# A network proxy's timeline beside them (PREFIX.RANK.net.csv): a round of
# 10 us that sent 1 MB in 4 pieces, 7 idle rounds over 5 us, a 20 us nap.
printf '%s\n' rank,event,at_ns,dur_ns,posted,credits,progress,rounds,timeout_us,sent,received \
  0,round,0,10000,4,0,2,0,0,1000000,0 0,idle,10000,5000,0,0,0,7,0,0,0 0,nap,15000,20000,0,0,0,0,100,0,0 \
  > "$tmp/t.0.net.csv"
out=$(python3 "$py" "$tmp/t" 2>&1)
check "the kernels' blocks still read beside a proxy's timeline" "^rank 0: first start 0\.00, last start 0\.00, last end 10\.00"
check "the proxy: its busy rounds, spins, naps and the rate over the busy time" \
  "^net rank 0: 35\.0 us traced; 1 rounds moved something \(10\.0 us, 4 pieces posted\); 7 idle rounds \(5\.0 us\); 1 naps \(20\.0 us\); sent 1\.000 MB, received 0\.000 MB, 100\.00 GB/s over the busy rounds"
# The runtime's files now name each step (op, where: quoted when it holds a
# comma); --chrome writes every timeline as Chrome-trace JSON.
hdr2=$hdr,op,where
printf '%s\n' $hdr2 0,demo,512,0,0,0,enter,0,0,1000,10000,, 0,demo,512,0,0,0,ready,0,0,0,12000,, \
  '0,demo,512,0,0,0,waited,0,0,0,14000,re,"a,b.lua:3"' '0,demo,512,0,0,0,done,0,0,0,20000,re,"a,b.lua:3"' \
  0,demo,512,0,0,0,exit,0,0,11000,30000,, > "$tmp/t.0.csv"
out=$(python3 "$py" "$tmp/t" --chrome "$tmp/t.json" 2>&1)
check "named steps read as before" "^rank 0 block +0 \(tb 0, lane 0\): start +0\.00 setup +1\.00 \| 0:0 wait 1\.00 work 3\.00 \| end +10\.00"
check "--chrome says where it wrote" "^# Chrome trace written to .*t\.json"
out=$(python3 - "$tmp/t.json" <<'PY' 2>&1
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
def one(pid, name):
    m = [e for e in x if e["pid"] == pid and e["name"] == name]
    return "%s %.2f+%.2f" % (name, m[0]["ts"], m[0]["dur"]) if len(m) == 1 else "%s: %d spans" % (name, len(m))
print(one(0, "setup")); print(one(0, "wait: re a,b.lua:3")); print(one(0, "re a,b.lua:3"))
print(one(1, "wait: step 1")); print(one(1, "step 1"))
print("names", sorted(e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"))
print("net", one(1000000, "nap"))
PY
)
check "rank 0's setup, 0 to 1 us" "^setup 0\.00\+1\.00$"
check "its step's wait, named by opcode and script line, 1 to 2 us" "^wait: re a,b\.lua:3 1\.00\+1\.00$"
check "its step's work, 2 to 5 us" "^re a,b\.lua:3 2\.00\+3\.00$"
check "a file without names: the step by its index, rank 1 ready at 2.25 us" "^wait: step 1 2\.25\+0\.50$"
check "a process per rank, and the proxy's on its own clock" "^names \['net rank 0 \(own clock\)', 'rank 0: demo', 'rank 1: demo'\]"
check "the proxy's nap, 15 us for 20" "^net nap 15\.00\+20\.00$"
# tools/measure/plot_trace.py beside it: the same timelines as an SVG picture.
out=$(python3 "$(dirname "$py")/plot_trace.py" "$tmp/t" "$tmp/t.svg" 2>&1 && cat "$tmp/t.svg")
check "plot_trace.py: a row per rank and block" '>rank 1 block 0</text>'
check "plot_trace.py: rank 0's step as a bar named by opcode and line, 2 to 5 us" '<title>work: re a,b\.lua:3 2\.00-5\.00 us</title>'
check "plot_trace.py: its wait, 1 to 2 us, pale" 'fill-opacity="0\.35"><title>wait: re a,b\.lua:3 1\.00-2\.00 us</title>'
out=$(python3 "$py" "$tmp/none" 2>&1); rc=$?
n=$((n + 1))
if [ $rc -ne 0 ] && grep -q "no rows" <<<"$out"; then echo "ok $n - no files: an error that says so"
else echo "not ok $n - no files: an error that says so (rc $rc: $out)"; failed=$((failed + 1)); fi
tap_end
