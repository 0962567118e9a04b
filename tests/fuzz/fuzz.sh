#!/usr/bin/env bash
# fuzz.sh -- runs one libFuzzer target for a bounded time from its seeds.
#   fuzz.sh FUZZER NAME ARTIFACT_DIR SEED_DIR...
# BATON_FUZZ_SECONDS (default 30) bounds the run.  The seeds are copied to a
# scratch corpus (the repository's are never written); a crash, leak,
# sanitizer report or slow input is kept as ARTIFACT_DIR/NAME-* and fails
# the test.  Prints TAP and the run's executions and coverage.
set -u
fuzzer=$1 name=$2 artifacts=$3
shift 3
secs=${BATON_FUZZ_SECONDS:-30}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$artifacts"
for d in "$@"; do
  [ -d "$d" ] || continue
  find "$d" -maxdepth 1 -type f -size -1024k -print0 | while IFS= read -r -d '' f; do
    cp "$f" "$work/corpus/$(basename "$d")-$(basename "$f")"
  done
done
seeds=$(ls "$work/corpus" | wc -l)
dict=()   # a target's dictionary, NAME.dict beside this script, when it has one
[ -f "$(dirname "$0")/$name.dict" ] && dict=(-dict="$(dirname "$0")/$name.dict")
"$fuzzer" "${dict[@]}" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=65536 \
  -artifact_prefix="$artifacts/$name-" -print_final_stats=1 "$work/corpus" >"$work/log" 2>&1
rc=$?
runs=$(grep -o 'Done [0-9]* runs' "$work/log" | awk '{print $2}')
cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | awk '{print $2}')
if [ $rc -eq 0 ]; then
  echo "ok 1 - fuzz $name ${secs}s from $seeds seeds: ${runs:-0} runs, coverage ${cov:-0} edges"
else
  echo "not ok 1 - fuzz $name found a failure (kept in $artifacts/$name-*)"
  grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$work/log" | head -20 | sed 's/^/# /'
  tail -40 "$work/log" | sed 's/^/# /'
fi
echo "1..1"
exit $rc
