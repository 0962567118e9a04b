#!/usr/bin/env bash
# verify suite: every MSCCL corpus file and every bundled IR file passes
# `baton verify` over all types and ops, in place and out of place, at an
# uneven count with several tiles and at tiny counts with one-element tiles.
# Usage: verify_corpus.sh BATON CORPUS_DIR BUNDLED_DIR   (TAP output)
# A missing CORPUS_DIR skips only the corpus's files.
set -u
baton=$1 corpus=$2 bundled=$3
n=0 failed=0
point() {  # point DESCRIPTION COMMAND...: one TAP line for a command that must pass
  local what=$1; shift
  n=$((n + 1))
  if out=$("$@" 2>&1); then echo "ok $n - $what"
  else echo "not ok $n - $what"; echo "$out" | sed 's/^/#   /' | head -20; failed=$((failed + 1)); fi
}
# The MSCCL corpus (../shared beside the project) is optional: where it is
# absent only its part is skipped; the bundled files are checked regardless.
files=()
if [ -d "$corpus" ]; then files+=("$corpus"/*.xml)
else n=$((n + 1)); echo "ok $n - MSCCL corpus # SKIP $corpus not found"; fi
files+=("$bundled"/*.xml)
next='o[r][c]=i[r-1][c] if r>=1'
for f in "${files[@]}"; do
  name=$(basename "$f")
  case $name in
  alltonext*)
    # Custom AllToNext: correct out of place; in place its receive races with
    # its send of the same memory, which verify must say rather than run.
    point "$name out-of-place, all types" "$baton" verify -q --outofplace --dtype all --expect "$next" "$f"
    point "$name count 3, 1-element tiles, 2 slots" "$baton" verify -q --outofplace --count 3 --tile 1 --slots 2 --expect "$next" "$f"
    n=$((n + 1))
    out=$("$baton" verify --inplace --expect "$next" "$f" 2>&1)
    if [ $? -eq 1 ] && grep -q "rank 1: data race: tb 0 step 0 (r) writes o\[0..7\] while tb 1 step 0 (s) reads i\[0..7\] (the same memory in place)" <<<"$out"; then
      echo "ok $n - $name in place is refused as a data race"
    else echo "not ok $n - $name in place is refused as a data race"; echo "$out" | sed 's/^/#   /' | head; failed=$((failed + 1)); fi
    ;;
  *)
    point "$name default mode, all types x ops" "$baton" verify -q --dtype all --op all "$f"
    point "$name out-of-place, all types x ops" "$baton" verify -q --outofplace --dtype all --op all "$f"
    point "$name count 1" "$baton" verify -q --count 1 --dtype all "$f"
    point "$name count 7, 1-element tiles, 2 slots" "$baton" verify -q --count 7 --tile 1 --slots 2 --dtype all --op all "$f"
    point "$name count 100000, 4096-element tiles" "$baton" verify -q --count 100000 --tile 4096 --dtype bf16 --op all "$f"
    ;;
  esac
done
echo "1..$n"
[ $failed -eq 0 ]
