#!/usr/bin/env bash
# docs.sh -- the user docs' code blocks still run as shown (unit suite, TAP).
#
# Usage: tests/docs.sh BATON SOURCE_ROOT
#
# Reads README.md and docs/*.md (docs/NCCL.md and docs/PERFORMANCE.md
# aside: the drop-in's and the GPU measurements' commands need GPUs; the
# history in docs/performance/ is not run either) and
# takes every fenced code block by its info string, the word(s) after the
# opening ```:
#
#   ```sh              shell commands that need no GPU: run with bash -e in a
#                      scratch copy of the source tree (build folders left
#                      out), where build/tools/baton and `baton` on PATH are
#                      BATON; they must exit 0
#   ```sh needs=PROG   the same, run only where PROG is installed (else SKIP)
#   ```sh gpu          needs a CUDA build and GPUs: not run (SKIP)
#   ```sh slow         needs no GPU but takes long (a second build, hours of
#                      fuzzing): not run (SKIP)
#   ```sh setup        tools/setup.sh lines: not run (SKIP, each with its
#                      reason: setup.sh installs packages and builds build/,
#                      and `setup.sh test` runs every suite, this one
#                      included); a `setup.sh demo` line runs the demo's own
#                      two steps with BATON instead
#   ```lua             a complete algorithm script: `baton compile` (no
#                      --param: the script's defaults), then `baton verify
#                      --dtype all --op all` of what it wrote
#   ```lua fragment    an excerpt of a script: not run (SKIP)
#   anything else      (```text, ```console, ```c, ```python, ```xml, bare
#                      ```): output, grammar or code for other tools: not run
#
# A failing block is reported as FILE:LINE (the line of its opening fence)
# with its output.  Last, the user docs must not name private scratch
# folders (.device/, $OUT) or issue numbers, and outside docs/performance/
# (the measurement history) no numbered runs ("the fourteenth run").
set -u
# Both arguments, or nothing: an empty SOURCE_ROOT would copy / below.
if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -f "$2/README.md" ]; then
  echo "usage: tests/docs.sh BATON SOURCE_ROOT (an executable baton and the folder holding README.md)" >&2
  exit 2
fi
baton=$(realpath "$1") src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; failed=$((failed + 1)); }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
show() { sed 's/^/#   /' | head -40; }

# The scratch tree: the sources without build folders (any folder holding
# meson-private) or hidden ones, and build/tools/baton.
tree=$tmp/tree
mkdir -p "$tree/build/tools" "$tmp/bin"
for e in "$src"/*; do
  name=$(basename "$e")
  case $name in build*) continue ;; esac
  [ -d "$e/meson-private" ] && continue
  cp -r "$e" "$tree/"
done
ln -s "$baton" "$tree/build/tools/baton"
ln -s "$baton" "$tmp/bin/baton"
export PATH="$tmp/bin:$PATH" BATON_DEBUG=WARN

docs=("$src/README.md")
for f in "$src"/docs/*.md; do
  case $(basename "$f") in NCCL.md|PERFORMANCE.md) ;; *) docs+=("$f") ;; esac
done

# Splits FILE's fenced blocks into $tmp/blocks/K.{body,where,info}.
extract() {
  awk -v out="$tmp/blocks" -v rel="$2" -v start="$3" '
    BEGIN { k = start }
    !inb && /^ *```/ {
      inb = 1; k++; match($0, /^ */); ind = RLENGTH
      info = substr($0, ind + 4); gsub(/^ +| +$/, "", info)
      print rel ":" NR > (out "/" k ".where"); close(out "/" k ".where")
      print info > (out "/" k ".info"); close(out "/" k ".info")
      printf "" > (out "/" k ".body"); close(out "/" k ".body")
      next
    }
    inb && /^ *```/ { inb = 0; next }
    inb { line = $0; sub("^ {0," ind "}", "", line); print line >> (out "/" k ".body"); close(out "/" k ".body") }
    END { print k > (out "/count") }' "$1"
}
mkdir -p "$tmp/blocks"
count=0
for f in "${docs[@]}"; do
  extract "$f" "${f#"$src"/}" "$count"
  count=$(cat "$tmp/blocks/count")
done

# Runs `bash -e` on the file $1 in the scratch tree; TAP line $2.
run_sh() {
  local out
  if out=$(cd "$tree" && bash -e "$1" 2>&1 </dev/null); then ok "$2"
  else notok "$2"; echo "$out" | show; fi
}

# A setup block: reports every tools/setup.sh line, runs the demo's steps.
run_setup() {
  local where=$1 body=$2 line
  while IFS= read -r line; do
    line=${line%%#*}; line=${line%"${line##*[! ]}"}
    [ -z "${line// /}" ] && continue
    case $line in
    *"setup.sh test"*)
      skip "$where: $line" "setup.sh test runs every suite, this test included: not run from inside it" ;;
    *"setup.sh demo"*)
      skip "$where: $line" "setup.sh installs packages and builds build/; its demo steps run next with the build under test"
      printf '%s\n' 'baton compile algorithms/allreduce_ring.lua --param ranks=8 -o build/allreduce_ring_8r.xml' \
        'baton verify --dtype all --op all build/allreduce_ring_8r.xml' >"$tmp/demo.sh"
      run_sh "$tmp/demo.sh" "$where: the demo's steps (compile the 8-rank ring, verify it for every type and op)" ;;
    *) skip "$where: $line" "tools/setup.sh installs packages and builds build/" ;;
    esac
  done <"$body"
}

for k in $(seq 1 "$count"); do
  where=$(cat "$tmp/blocks/$k.where") info=$(cat "$tmp/blocks/$k.info") body=$tmp/blocks/$k.body
  set -- $info
  lang=${1:-} tag=${2:-}
  case $lang in
  sh)
    case $tag in
    "")
      if grep -q 'setup\.sh' "$body"; then notok "$where: tools/setup.sh in an untagged sh block (tag it: \`\`\`sh setup)"
      else run_sh "$body" "$where (sh)"; fi ;;
    needs=valgrind)
      # valgrind cannot run a sanitizer build (the checked build's baton)
      if ! command -v valgrind >/dev/null; then skip "$where (sh)" "needs valgrind, not installed"
      elif nm "$baton" 2>/dev/null | grep -q __asan_init; then skip "$where (sh)" "valgrind cannot run a sanitizer build"
      else run_sh "$body" "$where (sh, needs valgrind)"; fi ;;
    needs=*)
      if command -v "${tag#needs=}" >/dev/null; then run_sh "$body" "$where (sh, needs ${tag#needs=})"
      else skip "$where (sh)" "needs ${tag#needs=}, not installed"; fi ;;
    gpu) skip "$where (sh gpu)" "needs a CUDA build and GPUs" ;;
    slow) skip "$where (sh slow)" "long-running (a second build or long fuzzing)" ;;
    setup) run_setup "$where" "$body" ;;
    *) notok "$where: unknown tag '$tag' on a sh block (see tests/docs.sh)" ;;
    esac ;;
  lua)
    case $tag in
    fragment) skip "$where (lua fragment)" "an excerpt of a script, not a complete one" ;;
    "")
      name=$(echo "$where" | tr -c 'A-Za-z0-9\n' _)
      cp "$body" "$tree/$name.lua"
      printf '%s\n' "baton compile -q $name.lua -o $name.xml" "baton verify -q --dtype all --op all $name.xml" >"$tmp/$name.sh"
      run_sh "$tmp/$name.sh" "$where (lua: compile and verify)" ;;
    *) notok "$where: unknown tag '$tag' on a lua block (see tests/docs.sh)" ;;
    esac ;;
  esac
done

# What the user docs must not contain.
words() {  # words DESCRIPTION ERE EXCEPT FILES...: a TAP line; the matching lines (but EXCEPT's) on failure
  local what=$1 re=$2 except=$3; shift 3
  local hits
  hits=$(cd "$src" && grep -nE "$re" "$@" 2>/dev/null | grep -vE "$except")
  if [ -z "$hits" ]; then ok "$what"; else notok "$what"; echo "$hits" | show; fi
}
rel=()
for f in "${docs[@]}"; do rel+=("${f#"$src"/}"); done
perf=()   # the measurements: the current page and its history
for f in "$src"/docs/PERFORMANCE.md "$src"/docs/performance/*.md; do [ -f "$f" ] && perf+=("${f#"$src"/}"); done
words "no private scratch folders (.device/, \$OUT) in the user docs" '\.device/|\$OUT\b' '^$' "${rel[@]}" "${perf[@]}"
# (log lines such as "barrier #1" are baton's own messages, not issues)
words "no issue numbers in the user docs" '\b[Ii]ssue('"'"'s\b|[ -]?#?[0-9])|(^|[ (])#[0-9]+\b' '(barrier|allgather) #[0-9]' \
  "${rel[@]}" "${perf[@]}"
ordinals=first,second,third,fourth,fifth,sixth,seventh,eighth,ninth,tenth,eleventh,twelfth,thirteenth,fourteenth
ordinals+=,fifteenth,sixteenth,seventeenth,eighteenth,nineteenth,twentieth,twenty-first,twenty-second
ordinals+=,twenty-third,twenty-fourth,twenty-fifth,twenty-sixth,twenty-seventh,twenty-eighth,twenty-ninth,thirtieth
words "no numbered runs outside the measurement history (docs/performance/)" \
  "\\b(${ordinals//,/|}) (GPU )?run\\b" '^$' -i "${rel[@]}" ${perf[0]:+docs/PERFORMANCE.md}

echo "1..$n"
[ "$failed" -eq 0 ]
