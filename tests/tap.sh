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

# tap_end: the plan line; the suite's status (0 when nothing failed).
tap_end() {
  echo "1..$n"
  [ "$failed" -eq 0 ]
}
