#!/usr/bin/env bash
# golden suite: outputs pinned in tests/golden/ and docs generated from tables.
# Usage: golden.sh BATON CORPUS_DIR SOURCE_ROOT   (TAP output)
# To accept a deliberate change: BATON_GOLDEN_UPDATE=1 golden.sh ...
set -u
baton=$(realpath "$1") corpus=$2 root=$3
. "$(dirname "${BASH_SOURCE[0]}")/tap.sh"
gold() {  # gold NAME COMMAND...: output must equal tests/golden/NAME
  local name=$1; shift
  out=$("$@" 2>&1)
  if [ -n "${BATON_GOLDEN_UPDATE:-}" ]; then printf '%s\n' "$out" > "$root/tests/golden/$name"; fi
  local d pass=0
  d=$(diff -u "$root/tests/golden/$name" <(printf '%s\n' "$out") 2>&1) && pass=1
  verdict $pass "$name" "differs" "$(head -30 <<<"$d")"
}
in_corpus() {  # in_corpus NAME COMMAND...: gold NAME of COMMAND run in the MSCCL corpus (skipped where it is missing)
  local name=$1; shift
  if [ ! -d "$corpus" ]; then skip "$name" "needs the MSCCL corpus, missing at $corpus (README, Tests)"; return; fi
  gold "$name" bash -c 'cd "$0" && exec "$@"' "$corpus" "$@"
}
in_corpus explain_allreduce_ring_4r.txt "$baton" explain allreduce_ring_4r_1c_1i_simple.xml
in_corpus explain_alltoall_twostep.txt "$baton" explain alltoall_twostep_2n2g_simple.xml
in_corpus explain_allreduce_hier.txt "$baton" explain allreduce_hier_2n2g_simple.xml
# the Graphviz view of a schedule: clusters per rank and tb, message and (dashed) dependency edges
gold dot_exchange_2r.dot "$baton" explain --dot "$root/tests/exchange_2r.xml"
in_corpus dot_allreduce_hier.dot "$baton" explain --dot allreduce_hier_2n2g_simple.xml
# the XML the compiler writes for a small ring (provenance paths are relative to the repo)
gold allreduce_ring_4r.xml bash -c "cd '$root' && '$baton' compile -q algorithms/allreduce_ring.lua --param ranks=4"
gold allreduce_rhd_4r.xml bash -c "cd '$root' && '$baton' compile -q algorithms/allreduce_rhd.lua --param ranks=4"
gold alltonext_2n2g.xml bash -c "cd '$root' && '$baton' compile -q algorithms/alltonext.lua --param nodes=2 --param gpus=2"
gold allreduce_hier_2n2g.xml bash -c "cd '$root' && '$baton' compile -q algorithms/allreduce_hier.lua --param nodes=2 --param gpus=2"
# docs/IR.md carries the opcode table generated from ir/ir_op.def.
missing=$("$baton" ops | grep -vxFf "$root/docs/IR.md")
verdict "$([ -z "$missing" ] && echo 1 || echo 0)" "docs/IR.md holds the table printed by 'baton ops'" "missing lines" "$missing"
# docs/RUNTIME.md or ARCHITECTURE.md names every environment parameter.
missing=$("$baton" params | awk 'NR>1{print $1}' | while read -r p; do grep -q "$p" "$root"/docs/*.md || echo "$p"; done)
verdict "$([ -z "$missing" ] && echo 1 || echo 0)" "every environment parameter is documented" "undocumented: $missing"
tap_end
