#!/usr/bin/env bash
# setup.sh -- installs what baton needs (Debian packages), builds it, and runs
# the main job or the test suite.
#
#   tools/setup.sh demo   build the baton command (no GPU code), then compile
#                         the 8-rank ring AllReduce from
#                         algorithms/allreduce_ring.lua and verify it on the
#                         CPU executor over every type and operator
#   tools/setup.sh test   build, then run every test suite, then the checked
#                         build's (below); the last two lines are where the
#                         time went ("setup: build N s, ...") and
#                         "N passed, N failed, N skipped", after what the
#                         suites skipped and why ("setup: N test points
#                         skipped: needs the MSCCL corpus, ...")
#   tools/setup.sh check  only the checked build: clang with AddressSanitizer
#                         and UndefinedBehaviorSanitizer (any report fails),
#                         the CPU suites, then each fuzz target for
#                         BATON_FUZZ_SECONDS (default 20; 5 in `test`)
#                         from its seeds
#   tools/setup.sh build  install and build only
#
# Environment: BUILD_DIR (default build; the checked build is BUILD_DIR-check),
# BATON_CUDA=enabled|disabled|auto, BATON_CHECK=0 leaves the checked build
# out of `test`, BATON_FUZZ_SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${BUILD_DIR:-build}
cmd=${1:-demo}

packages="meson ninja-build pkg-config gcc liblua5.4-dev libxml2-dev libibverbs-dev python3"
# The checked build: clang, its sanitizer and libFuzzer runtimes; for the
# tests, Debian's (CPU-only) PyTorch: the Python module's argument handling.
case $cmd in test|check) packages="$packages clang libclang-rt-14-dev" ;; esac
case $cmd in test) packages="$packages python3-torch" ;; esac
need=""
for p in $packages; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
if [ -n "$need" ]; then
  echo "setup: installing$need"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need >/dev/null
fi

export PATH="$PATH:/usr/local/cuda/bin"
# The checked build (CPU only): every sanitizer report aborts its test.
check_setup() {
  local dir=$build-check
  if [ ! -f "$dir/build.ninja" ]; then
    CC=clang meson setup "$dir" -Dcuda=disabled -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
      "-Dc_args=-fno-sanitize-recover=all -fsanitize=fuzzer-no-link" >/dev/null
  fi
}
check_build() { check_setup && ninja -C "$build-check" >/dev/null; }

# Where a test run's time goes, one line before the totals: "setup: build
# 270 s, tests 190 s, ..." (phase names and whole seconds).
times=""
phase() { times="$times${times:+, }$1 $((SECONDS - t0)) s"; t0=$SECONDS; }
t0=$SECONDS
# `test` makes the checked build (below) in the background from the start:
# its configure beside the plain build's (each takes one core), then its
# compiles at the idle scheduling class, which take only what the build and
# the tests leave of the CPU (their single long compiles, the tests that
# wait on timeouts); they lose nothing to it (an idle-class task gives way
# as soon as another wants the core).  The checked tests wait for it.
# In a process group of its own (set -m), so that an early exit stops all
# of it; not a session of its own, which would be a scheduling group of its
# own too (autogroups), with half the CPU whatever its class.
# Its status goes to a file as well: bash may already have reaped a job
# started under `set -m` and forgotten it when `wait` asks ("not a child
# of this shell"), which failed a run whose checked build had passed.
bg_check=""
if [ "$cmd" = test ] && [ "${BATON_CHECK:-1}" != 0 ]; then
  bg_log=$(mktemp) bg_rc=$(mktemp)
  set -m
  (check_setup; chrt --idle -p 0 "$BASHPID" >/dev/null 2>&1 || renice -n 19 -p "$BASHPID" >/dev/null
   ninja -C "$build-check" >/dev/null; echo $? >"$bg_rc") >"$bg_log" 2>&1 &
  bg_check=$!
  set +m
  trap 'kill -- -"$bg_check" 2>/dev/null || true' EXIT
fi
if [ "$cmd" != check ]; then
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" -Dcuda="${BATON_CUDA:-auto}" >/dev/null
  fi
  # The demo needs the baton command only, which has no GPU code: seconds,
  # where the GPU kernels take minutes (a later build or test builds them).
  if [ "$cmd" = demo ]; then ninja -C "$build" tools/baton >/dev/null; else ninja -C "$build" >/dev/null; fi
  phase build
fi

# meson_test OUT DIR ARGS...: meson test in build folder DIR with ARGS,
# its output into OUT, its status as meson's.
passed=0 failed=0 skipped=0 status=0
fuzz_secs=20
[ "$cmd" = test ] && fuzz_secs=5   # the checked build's part of the whole run: its seeds and a short search
meson_test() {
  local out=$1 dir=$2
  shift 2
  BATON_FUZZ_SECONDS=${BATON_FUZZ_SECONDS:-$fuzz_secs} meson test -C "$dir" --no-rebuild --print-errorlogs "$@" >"$out" 2>&1
}
# tally OUT DIR RC: appends OUT (a meson_test's, status RC) to $log, prints
# its failures and adds its Meson summary to the totals.
tally() {
  local out=$1 dir=$2 rc=$3
  cat "$out" >>"$log"
  sed -n '/^Summary of Failures/,$p;/^ *[0-9]*\/[0-9]* /p' "$out" | grep -v '^$' | sort -u -k1,1n | grep -v '^Summary' |
    sed "s|^|[$dir] |" || true
  count() { awk -v k="$1" -F: '$1 == k { gsub(/ /, "", $2); print $2 }' "$out" | tail -1; }
  local ok xfail fail xpass skip tout
  ok=$(count Ok); xfail=$(count "Expected Fail"); fail=$(count Fail); xpass=$(count "Unexpected Pass")
  skip=$(count Skipped); tout=$(count Timeout)
  passed=$(( passed + ${ok:-0} + ${xfail:-0} ))
  failed=$(( failed + ${fail:-0} + ${xpass:-0} + ${tout:-0} ))
  skipped=$(( skipped + ${skip:-0} ))
  if [ -z "$ok" ]; then cat "$out"; failed=$(( failed + 1 )); fi
  [ "$rc" -eq 0 ] || status=1
  rm -f "$out"
}
# run_tests DIR ARGS...: meson test on two cores, tallied.
run_tests() {
  local dir=$1 out rc=0
  shift
  out=$(mktemp)
  meson_test "$out" "$dir" --num-processes 2 "$@" || rc=$?
  tally "$out" "$dir" "$rc"
}

case $cmd in
build) ;;
demo)
  "$build/tools/baton" compile "$root/algorithms/allreduce_ring.lua" --param ranks=8 -o "$build/allreduce_ring_8r.xml"
  "$build/tools/baton" verify --dtype all --op all "$build/allreduce_ring_8r.xml"
  ;;
test|check)
  log=$build/test-output.txt
  [ "$cmd" = check ] && log=$build-check/test-output.txt
  mkdir -p "$(dirname "$log")"
  : >"$log"
  if [ "$cmd" = test ]; then run_tests "$build" --no-suite matrix; phase tests; fi
  if [ "$cmd" = check ] || [ "${BATON_CHECK:-1}" != 0 ]; then
    if [ -n "$bg_check" ]; then
      wait "$bg_check" 2>/dev/null || true
      while [ ! -s "$bg_rc" ] && kill -0 "$bg_check" 2>/dev/null; do sleep 1; done
      if [ "$(cat "$bg_rc")" != 0 ]; then
        cat "$bg_log"; rm -f "$bg_log" "$bg_rc"; echo "setup: the checked build failed" >&2; exit 1
      fi
      rm -f "$bg_log" "$bg_rc"
    else
      check_build
    fi
    phase "checked build"
    # The fuzz targets, one at a time, beside the other suites (their own
    # log files): those start with the tests that run alone (loopback
    # floods, timing), which leave the other core to the fuzzers.
    fuzz_out=$(mktemp) fuzz_rc=0
    meson_test "$fuzz_out" "$build-check" --num-processes 1 --suite fuzz --logbase fuzzlog &
    fuzz_pid=$!
    run_tests "$build-check" --suite unit --suite golden
    wait "$fuzz_pid" || fuzz_rc=$?
    tally "$fuzz_out" "$build-check" "$fuzz_rc"
    phase "checked tests"
  fi
  # What the suites skipped inside tests that ran, and why (the nocorpus
  # suite's are on purpose: it runs tests without the corpus).
  python3 - "$build/meson-logs/testlog.json" "$build-check/meson-logs/testlog.json" <<'PY' || true
import collections, json, re, sys
why = collections.Counter()
for path in sys.argv[1:]:
    try:
        rows = [json.loads(line) for line in open(path)]
    except OSError:
        continue
    for row in rows:
        if ":nocorpus /" not in row["name"] and row.get("result") != "SKIP":
            why.update(re.findall(r"# SKIP (.*)", row.get("stdout") or ""))
for reason, n in why.most_common(8):
    print(f"setup: {n} test points skipped: {reason}")
PY
  echo "setup: $times"
  echo "$passed passed, $failed failed, $skipped skipped"
  [ "$status" -eq 0 ] && [ "$failed" -eq 0 ]
  ;;
*)
  echo "usage: tools/setup.sh demo|test|check|build" >&2
  exit 2
  ;;
esac
