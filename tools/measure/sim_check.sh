#!/usr/bin/env bash
# sim_check.sh -- baton sim's calibration on the GPUs at hand, in one
# command: the machine's probe (P2P bandwidth, a flag's latency, a
# launch's cost) beside the SPEC's figures, then the default set for this
# many ranks measured under CUDA graphs (every collective, in and out of
# place; its direct programs, then with the window off its FIFO ones),
# then every measured row predicted with `baton sim` on SPEC: predicted
# against measured, a line per program, and how many rows meet the target
# (within 15% above 20 us, within 3 us below).
#
# Usage: tools/measure/sim_check.sh [-g GPUS] [--system SPEC] [--quick] [--family direct|fifo] [OUTDIR]
#   -g GPUS        ranks, one per GPU (default: every GPU nvidia-smi lists)
#   --system SPEC  the system to predict on (default on H200s: sim/systems/h200xGPUS.spec)
#   --quick        every 16x in size instead of every 4x, one round
#   --family F     only the direct programs or only the FIFO ones (default both)
#   OUTDIR         where the CSVs, the table and the plot go (default $OUT, else ./sim_check)
# BATON names the baton binary (default build/tools/baton); the probe runs
# when build/tests/gpu_p2p_probe is there.  Runs from the repository's root
# on a machine with 2 or more GPUs, in about 5 minutes on 2 x H200
# (docs/SIMULATION.md, "Checking the calibration on a machine").
set -u
here=$(cd "$(dirname "$0")" && pwd)
baton=${BATON:-build/tools/baton}
gpus= spec= quick=0 families="direct fifo" dir=${OUT:-sim_check}
usage() { sed -n '11,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    -g) [ $# -ge 2 ] || usage; gpus=$2; shift 2 ;;
    --system) [ $# -ge 2 ] || usage; spec=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --family) [ $# -ge 2 ] || usage; families=$2; shift 2
      case $families in direct | fifo) ;; *) echo "sim_check.sh: --family $families: direct or fifo" >&2; exit 2 ;; esac ;;
    -h | --help) usage ;;
    -*) echo "sim_check.sh: unknown option $1" >&2; usage ;;
    *) dir=$1; shift ;;
  esac
done
if [ ! -x "$baton" ]; then echo "sim_check.sh: no baton binary at $baton (build first, or set BATON)" >&2; exit 2; fi
if [ -z "$gpus" ]; then gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); fi
case $gpus in '' | *[!0-9]*) echo "sim_check.sh: -g $gpus: a number of GPUs" >&2; exit 2 ;; esac
if [ "$gpus" -lt 2 ]; then echo "sim_check.sh: needs 2 or more GPUs (found $gpus)" >&2; exit 2; fi
if [ -z "$spec" ]; then   # the lent machine's own description, by its GPUs' name
  name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  case $name in
    *H200*) spec=sim/systems/h200x$gpus.spec ;;
    *) echo "sim_check.sh: no system description for ${name:-these GPUs} here: give one with --system" >&2; exit 2 ;;
  esac
fi
if [ ! -r "$spec" ]; then echo "sim_check.sh: $spec: no such system (give one with --system)" >&2; exit 2; fi
mkdir -p "$dir" || exit 2
export NCCL_NVLS_ENABLE=0 BATON_TIMEOUT=${BATON_TIMEOUT:-20}

# The probe's figures beside the SPEC's.
if [ -x build/tests/gpu_p2p_probe ]; then
  timeout 120 build/tests/gpu_p2p_probe 256 > "$dir/probe.txt" 2>&1
  fig() { grep -o "$1" "$dir/probe.txt" | head -1; }
  if grep -q '^ok' "$dir/probe.txt"; then
    echo "# probe: P2P $(fig 'best [0-9.]* GB/s'), a flag $(fig 'one way [0-9.]* us'), $(fig 'launch floor measured: [0-9.]* us')," \
      "$(fig 'one-shot floor measured: [0-9.]* us')"
  else
    echo "# probe: $(head -1 "$dir/probe.txt")"
  fi
  echo "# $spec: $(grep -E '^(nvlink.bw_gbs|nvlink.latency_us|launch_us|call_us) ' "$spec" | tr '\n' ' ')"
fi

# The programs: the default set for this many ranks.
"$baton" set "$gpus" -q -o "$dir/set" || { echo "sim_check.sh: baton set $gpus failed" >&2; exit 1; }

# The measurements: baton alone (the model predicts baton's time, not NCCL's).
factor=4 rounds=3
if [ "$quick" = 1 ]; then factor=16 rounds=1; fi
failed=0
csvs=()
for fam in $families; do
  for c in allreduce allgather reducescatter alltoall broadcast; do
    first=1K last=256M
    if [ $c = allreduce ]; then first=8 last=512M; fi
    f=$dir/${fam}_$c.csv
    env $([ $fam = fifo ] && echo BATON_WINDOW_MB=0) BATON_ALGO_DIR="$dir/set" timeout 300 "$baton" bench --no-nccl \
      --collective $c -b $first -e $last -f $factor -g "$gpus" -w 5 -n 20 --rounds $rounds -G 5 --inplace 2 \
      --csv "$f" > "$dir/${fam}_$c.txt" 2>&1
    rc=$?
    echo "# measured $fam $c: exit $rc, $(($(wc -l < "$f" 2>/dev/null || echo 1) - 1)) rows"
    if [ $rc -ne 0 ]; then failed=1; tail -5 "$dir/${fam}_$c.txt"; fi
    [ -s "$f" ] && csvs+=("$f")
  done
done
if [ ${#csvs[@]} -eq 0 ]; then echo "sim_check.sh: nothing was measured" >&2; exit 1; fi

# The comparison.
python3 "$here/sim_calibrate.py" --summary --csv "$dir/sim.csv" "$baton" "$spec" "$dir/set" "${csvs[@]}" \
  > "$dir/sim_table.md" 2> "$dir/sim_notes.txt"
rc=$?
python3 "$here/plot_ratio.py" "$dir/sim.csv" "$dir/sim.svg" predicted_us measured_us collective,program,bytes \
  "baton sim on $(basename "$spec" .spec): predicted / measured" > /dev/null 2>&1
sed -n '/rows meet the target/,$p' "$dir/sim_table.md"
echo "# rows: $dir/sim_table.md, $dir/sim.csv; plot: $dir/sim.svg; notes: $dir/sim_notes.txt"
[ $rc -eq 0 ] && [ $failed -eq 0 ]
