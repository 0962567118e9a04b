#!/usr/bin/env bash
# install.sh -- `meson install` into a scratch DESTDIR, then use the
# installed files as a user would: the layout, libbaton's exported symbols,
# a C program built through pkg-config and run against the installed
# library, the installed baton's `set` (which must find the installed
# scripts), the default sets the runtime loads, and the Python module.
# Usage: install.sh BUILD_DIR
set -u
build=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
check() { local what=$1; shift; if "$@" >"$t/out" 2>&1; then ok "$what"; else bad "$what"; sed 's/^/# /' "$t/out" | head -20; fi; }

if ! meson install -C "$build" --no-rebuild --quiet --destdir "$t/root" >"$t/install.log" 2>&1; then
  echo "1..1"; echo "not ok 1 - meson install"; sed 's/^/# /' "$t/install.log" | tail -20; exit 1
fi
prefix=$(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["prefix"])')
libdir=$(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print({o["name"]: o["value"] for o in json.load(sys.stdin)}["libdir"])')
root=$t/root$prefix
lib=$root/$libdir
case $libdir in /*) lib=$t/root$libdir ;; esac

check "bin/baton, bin/baton-bench, include/baton.h, libbaton.so, baton.pc, LICENSE installed" \
  test -x "$root/bin/baton" -a -x "$root/bin/baton-bench" -a -f "$root/include/baton.h" -a -e "$lib/libbaton.so" -a -f "$lib/pkgconfig/baton.pc" \
       -a -f "$root/share/doc/baton/LICENSE"
check "libnccl.so.2 only in a private folder (lib/baton), never beside libbaton" \
  bash -c "test -f '$lib/baton/libnccl.so.2' && ! ls '$lib'/libnccl* 2>/dev/null"
check "libbaton.so's API carries its version node (BATON_0.1)" \
  bash -c "readelf --dyn-syms -W '$lib/libbaton.so' | awk '\$8 ~ /^baton_/ {n++; if (\$8 !~ /@@BATON_0\\.1\$/) bad=1} END {exit bad || !n}'"
check "libbaton.so exports the baton_* API only" \
  bash -c "nm -D --defined-only '$lib/libbaton.so' | awk '\$2 ~ /^[TDBRW]\$/ && \$3 !~ /^baton_/ {print; bad=1} END {exit bad}'"
check "the algorithm scripts and their standard modules installed" \
  test -f "$root/share/baton/algorithms/allreduce_ring.lua" -a -f "$root/share/baton/algorithms/lib/ring.lua"
for r in 2 4 8; do
  want=54; [ $r = 2 ] && want=64   # 2 ranks: Broadcast's direct stores to 4 MiB and through scratch (two ranges), the LL128 one-shot and two-shot AllReduce (three ranges), AllToAll in two chunks from 64 MiB as well
  check "default set for $r ranks installed (AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Reduce, Gather, Scatter, fused)" \
    bash -c "ls '$root/share/baton/default/$r' | grep -c '_${r}r.xml' | grep -qx $want"
done

# A C program built and linked only through pkg-config.
cat >"$t/hello.c" <<'C'
#include <baton.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  printf("baton %s: %s\n", baton_version(), baton_result_string(baton_invalid_argument));
  /* No communicator is a clean error, not a crash. */
  return baton_comm_destroy(NULL) == baton_invalid_argument && strlen(baton_version()) ? 0 : 1;
}
C
flags=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --define-variable=prefix="$root" --cflags --libs baton)
check "a C program builds against the installed baton through pkg-config ($flags)" \
  bash -c "cc -o '$t/hello' '$t/hello.c' $flags"
check "and runs against the installed libbaton.so" \
  bash -c "LD_LIBRARY_PATH='$lib' '$t/hello' | grep -q '^baton [0-9.]*: invalid input'"
check "it loaded the installed library, not the build's" \
  bash -c "LD_LIBRARY_PATH='$lib' ldd '$t/hello' | grep -q '$lib/libbaton.so'"

# The installed baton finds the installed scripts by itself.
check "installed 'baton set 4' compiles the default set from the installed scripts" \
  bash -c "'$root/bin/baton' set 4 -q -o '$t/set4' && grep -q 'prov=\"$root/share/baton/algorithms/' '$t/set4/moe_combine_4r.xml' \
           && cmp -s <(sed 's/prov=\"[^\"]*\"//' '$t/set4/allreduce_4_ring_4r.xml') <(sed 's/prov=\"[^\"]*\"//' '$root/share/baton/default/4/allreduce_4_ring_4r.xml')"
check "installed baton verifies the installed default set's collectives" \
  bash -c "'$root/bin/baton' verify -q '$root'/share/baton/default/4/{allreduce,allgather,reducescatter,alltoall}_*.xml"
check "the docs are installed without the measurements' data files and plots" \
  bash -c "test -f '$root/share/doc/baton/docs/PERFORMANCE.md' -a ! -e '$root/share/doc/baton/docs/bench'"
check "installed baton runs a bench through the installed baton-bench (here: no GPU, said in baton's words)" \
  bash -c "'$root/bin/baton' bench -g 1 -b 1K -e 1K 2>&1 | grep -q 'baton bench: no GPU to run on\\|^ *1024 '"
check "installed baton compiles a user's script that uses the standard modules" \
  "$root/bin/baton" compile -q "$root/share/baton/algorithms/allreduce_allpairs.lua" --param ranks=4 -o "$t/ar.xml"

py=$(meson introspect "$build" --installed | python3 -c "import json, sys; print(*[v for k, v in json.load(sys.stdin).items() if k.endswith('/baton.py')])")
pydir=$t/root$(dirname "$py")
check "the Python module is installed where Python looks under the prefix ($py), not in share/" \
  bash -c "test -f '$pydir/baton.py' && case '$py' in '$prefix'/lib*/python3*) ;; *) exit 1 ;; esac && ! test -e '$root/share/baton/python'"
check "it is told where the library is installed" grep -q "^_INSTALLED_LIBDIR = '$prefix/$libdir'" "$pydir/baton.py"
check "the installed Python module finds the installed libbaton.so (here staged: through LD_LIBRARY_PATH)" \
  bash -c "cd '$t' && PYTHONPATH='$pydir' LD_LIBRARY_PATH='$lib' python3 -c 'import baton, os; l = baton.load(); print(baton.version()); assert os.path.realpath(l._name).startswith(\"$t\"), l._name'"
check "the installed Python module compiles and verifies with the installed baton" \
  bash -c "cd '$t' && PYTHONPATH='$pydir' LD_LIBRARY_PATH='$lib' python3 -c 'import baton; p = baton.compile(\"$root/share/baton/algorithms/allgather_ring.lua\", \"ag4.xml\", ranks=4); assert baton.verify(p)'"
echo "1..$n"
[ $fails -eq 0 ]
