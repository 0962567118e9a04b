#!/usr/bin/env bash
# golden suite: outputs pinned in tests/golden/ and docs generated from tables.
# Usage: golden.sh BATON CORPUS_DIR SOURCE_ROOT   (TAP output)
# To accept a deliberate change: BATON_GOLDEN_UPDATE=1 golden.sh ...
set -u
baton=$(realpath "$1") corpus=$2 root=$3
n=0 failed=0
gold() {  # gold NAME COMMAND...: output must equal tests/golden/NAME
  local name=$1; shift
  n=$((n + 1))
  out=$("$@" 2>&1)
  if [ -n "${BATON_GOLDEN_UPDATE:-}" ]; then printf '%s\n' "$out" > "$root/tests/golden/$name"; fi
  if diff -u "$root/tests/golden/$name" <(printf '%s\n' "$out") > /tmp/golden.$$ 2>&1; then echo "ok $n - $name"
  else echo "not ok $n - $name"; sed 's/^/#   /' /tmp/golden.$$ | head -30; failed=$((failed + 1)); fi
  rm -f /tmp/golden.$$
}
cd "$corpus" 2>/dev/null || { echo "1..0 # SKIP corpus missing"; exit 0; }
gold explain_allreduce_ring_4r.txt "$baton" explain allreduce_ring_4r_1c_1i_simple.xml
gold explain_alltoall_twostep.txt "$baton" explain alltoall_twostep_2n2g_simple.xml
gold explain_allreduce_hier.txt "$baton" explain allreduce_hier_2n2g_simple.xml
# the Graphviz view of a schedule: clusters per rank and tb, message and (dashed) dependency edges
gold dot_exchange_2r.dot "$baton" explain --dot "$root/tests/exchange_2r.xml"
gold dot_allreduce_hier.dot "$baton" explain --dot allreduce_hier_2n2g_simple.xml
# the XML the compiler writes for a small ring (provenance paths are relative to the repo)
gold allreduce_ring_4r.xml bash -c "cd '$root' && '$baton' compile -q algorithms/allreduce_ring.lua --param ranks=4"
gold allreduce_rhd_4r.xml bash -c "cd '$root' && '$baton' compile -q algorithms/allreduce_rhd.lua --param ranks=4"
gold alltonext_2n2g.xml bash -c "cd '$root' && '$baton' compile -q algorithms/alltonext.lua --param nodes=2 --param gpus=2"
gold allreduce_hier_2n2g.xml bash -c "cd '$root' && '$baton' compile -q algorithms/allreduce_hier.lua --param nodes=2 --param gpus=2"
# docs/IR.md carries the opcode table generated from ir/ir_op.def.
n=$((n + 1))
if "$baton" ops | grep -vxFf "$root/docs/IR.md" | grep -q .; then
  echo "not ok $n - docs/IR.md holds the table printed by 'baton ops'"; "$baton" ops | grep -vxFf "$root/docs/IR.md" | sed 's/^/#   missing: /'
  failed=$((failed + 1))
else echo "ok $n - docs/IR.md holds the table printed by 'baton ops'"; fi
# docs/RUNTIME.md or ARCHITECTURE.md names every environment parameter.
n=$((n + 1))
missing=$("$baton" params | awk 'NR>1{print $1}' | while read -r p; do grep -q "$p" "$root"/docs/*.md || echo "$p"; done)
if [ -z "$missing" ]; then echo "ok $n - every environment parameter is documented"
else echo "not ok $n - undocumented parameters: $missing"; failed=$((failed + 1)); fi
echo "1..$n"
[ $failed -eq 0 ]
