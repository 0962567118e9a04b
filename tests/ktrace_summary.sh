#!/usr/bin/env bash
# unit suite: tools/measure/ktrace_summary.py on a hand-made kernel timeline
# (the CSV libbaton_ktrace.so writes) whose times are known: each kernel's
# duration, the gap from what ran before it on its stream (a memset between
# two calls counts), the period between starts, --skip and --name.
# Usage: ktrace_summary.sh KTRACE_SUMMARY_PY   (TAP output)
set -u
py=$1
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# Stream 7: kernel A (mangled, template arguments) at 0-1000, 2000-3000
# (a memset 1500-1600 between), 5000-7000; stream 9: kernel B (a name with a
# comma, quoted) 100-600 and 1100-1600, recorded out of order.
cat > "$tmp/k.42.csv" <<'CSV'
kind,name,device,stream,graph,node,start_ns,end_ns,grid,block,bytes
kernel,_Z16ip_direct_kernelILi0ELi0ELi2ELb0EEv8ip_dargs,0,7,1,11,0,1000,132,512,0
kernel,"void B<int, 2>(int)",0,9,1,12,1100,1600,1,64,0
memset,memset,0,7,1,13,1500,1600,0,0,64
kernel,_Z16ip_direct_kernelILi0ELi0ELi2ELb0EEv8ip_dargs,0,7,1,14,2000,3000,132,512,0
kernel,"void B<int, 2>(int)",0,9,1,15,100,600,1,64,0
kernel,_Z16ip_direct_kernelILi0ELi0ELi2ELb0EEv8ip_dargs,0,7,1,16,5000,7000,132,512,0
CSV
out=$(python3 "$py" "$tmp/k" 2>&1)
check "the file is found by its prefix" "k\.42\.csv$"
check "kernel A: 3 runs, median 1 us, mean 1.33; gaps 0.4 (after the memset) and 2.0; period 2.5" \
  "^ +7 +ip_direct_kernel +3 +1\.00 +1\.33 +1\.20 +1\.20 +2\.50$"
check "the memset between two calls, its gap from the kernel before" "^ +7 +memset +1 +0\.10 +0\.10 +0\.50 +0\.50 +- *$"
check "kernel B: sorted by start, named up to its template arguments" "^ +9 +void B +2 +0\.50 +0\.50 +0\.50 +0\.50 +1\.00$"
out=$(python3 "$py" "$tmp/k.42.csv" --skip 1 --name direct 2>&1)
check "--skip 1 --name: A's last two only, nothing else" "^ +7 +ip_direct_kernel +2 +1\.50 +1\.50 +1\.20 +1\.20 +2\.50$"
pass=1; grep -q "memset\|void B" <<<"$out" && pass=0
verdict $pass "--name leaves out the others" "they are shown" "$out"
out=$(python3 "$py" "$tmp/k" --chrome "$tmp/k.json" 2>&1)
check "--chrome says where it wrote" "^# Chrome trace written to .*k\.json"
out=$(python3 - "$tmp/k.json" <<'PY' 2>&1
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
x = sorted((e["tid"], e["ts"], e["dur"], e["name"], e["cat"]) for e in ev if e["ph"] == "X")
print("spans", len(x))
print("first", x[0])
print("threads", sorted(e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"))
PY
)
check "--chrome: a span per record" "^spans 6$"
check "--chrome: stream 7's first kernel at 0 us, 1 us long, named short" "^first \(7, 0\.0, 1\.0, 'ip_direct_kernel', 'kernel'\)$"
check "--chrome: a thread per stream" "^threads \['stream 7', 'stream 9'\]$"
out=$(python3 "$py" "$tmp/none" 2>&1); rc=$?
pass=0; [ $rc -ne 0 ] && grep -q "no timeline found" <<<"$out" && pass=1
verdict $pass "a prefix with no files is an error that says so" "rc $rc" "$out"
out=$(python3 "$py" "$tmp/k" --skip x 2>&1); rc=$?
pass=0; [ $rc -ne 0 ] && grep -q "takes a count" <<<"$out" && pass=1
verdict $pass "--skip of a word is refused" "rc $rc" "$out"
tap_end
