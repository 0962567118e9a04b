# gpu_lib.sh -- what the GPU pass scripts share (sourced by gpu_bench.sh,
# gpu_fused.sh, gpu_pass8.sh and gpu_sanitize.sh, not run): a deadline that
# skips what would start after it, a test binary run with its ok and not-ok
# lines counted, and a benchmark run into NAME.txt and NAME.csv.  The
# sourcing script sets $deadline (seconds since it started) and $out (a folder).

# late NAME: true (and says so) when it is past $deadline.
late() {
  if ((SECONDS > deadline)); then
    echo "-- skipped $1: past DEADLINE $deadline s"
    return 0
  fi
  return 1
}

# gpu_test NAME LIMIT COMMAND...: COMMAND (TAP output) into $out/NAME.txt,
# stopped after LIMIT seconds; prints its exit status, its ok and not-ok
# counts and the first failures; that status stays in $gpu_test_rc (empty
# when it was skipped).
gpu_test() {
  local name=$1 lim=$2
  shift 2
  gpu_test_rc=
  late "$name" && return
  local start=$SECONDS
  timeout "$lim" "$@" > "$out/$name.txt" 2>&1
  gpu_test_rc=$?
  echo "== $name rc $gpu_test_rc in $((SECONDS - start)) s: $(grep -c '^ok' "$out/$name.txt") ok, $(grep -c '^not ok' "$out/$name.txt") not ok"
  grep '^not ok' -A4 "$out/$name.txt" | head -16
}

# gpu_bench NAME LIMIT COMMAND...: a `baton bench` command line (env
# assignments in front allowed) with --csv $out/NAME.csv added, its table
# into $out/NAME.txt; prints its exit status and the table's rows.
gpu_bench() {
  local name=$1 lim=$2
  shift 2
  late "$name" && return
  local start=$SECONDS
  timeout "$lim" "$@" --csv "$out/$name.csv" > "$out/$name.txt" 2>&1
  echo "== $name rc $? in $((SECONDS - start)) s: $*"
  grep -v '^#' "$out/$name.txt" | head -40
  grep 'Wrong elements' "$out/$name.txt"
}
