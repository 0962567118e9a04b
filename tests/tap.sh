# tap.sh -- what the shell suites share: the TAP count and its verdicts.
# Source it first: it sets n and failed.
n=0 failed=0

# verdict PASSED DESCRIPTION [WHY [OUTPUT]]: "ok N - DESCRIPTION" when
# PASSED is 1; else "not ok N - DESCRIPTION (WHY)", OUTPUT's first ten
# lines as comments, and one more failure.  Returns 0 when it passed.
verdict() {
  local pass=$1 what=$2 why=${3:-} output=${4:-}
  n=$((n + 1))
  if [ "$pass" -eq 1 ]; then echo "ok $n - $what"; return 0; fi
  echo "not ok $n - $what${why:+ ($why)}"
  if [ -n "$output" ]; then sed 's/^/#   /' <<<"$output" | head; fi
  failed=$((failed + 1))
  return 1
}

# check NAME PATTERN: a test point, passed when a line of $out (the output
# under test, set by the caller) matches the extended regex PATTERN.
check() {
  local pass=0; grep -qE -- "$2" <<<"$out" && pass=1
  verdict $pass "$1" "no line matches: $2" "$out"
}

# tap_end: the plan line; the suite's status (0 when nothing failed).
tap_end() {
  echo "1..$n"
  [ "$failed" -eq 0 ]
}

# skip DESCRIPTION WHY: one test point skipped, saying why.
skip() {
  n=$((n + 1))
  echo "ok $n - $1 # SKIP $2"
}

# The MSCCL corpus (README, Tests): suites that read it set $corpus before
# sourcing this file.  Where it is missing, a check that needs it skips.
corpus_derived=()
# corpus_lacks ARG...: true when the corpus is missing and an argument
# needs it (names a file in it, or one `derive` made from one).
corpus_lacks() {
  [ -n "${corpus:-}" ] && [ ! -d "$corpus" ] || return 1
  local a f
  for a in "$@"; do
    case $a in *"$corpus"/*) return 0 ;; esac
    for f in "${corpus_derived[@]}"; do [ "$a" = "$f" ] && return 0; done
  done
  return 1
}
# derive OUT COMMAND...: OUT is COMMAND's output, made from a corpus file.
derive() {
  local out=$1; shift
  corpus_derived+=("$out")
  "$@" > "$out" 2>/dev/null || rm -f "$out"
}
