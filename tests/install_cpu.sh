#!/usr/bin/env bash
# install_cpu.sh -- a build without CUDA, as on a machine with no toolkit,
# configured, built and installed into a scratch prefix, then used as a
# user would: libbaton.so and baton.h without the CUDA headers (compile
# and verify from C; a communicator refused in baton's words) and the
# Python module where that Python looks for modules, which finds the
# installed library by itself.
# Usage: install_cpu.sh SOURCE_DIR
set -u
src=$1
. "$(dirname "$0")/tap.sh"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
# check WHAT COMMAND...: a test point, passing when COMMAND does.
check() { local what=$1 out; shift; out=$("$@" 2>&1); verdict $(($? == 0)) "$what" "status $?" "$out"; }

prefix=$t/prefix
# Only what is installed is built (the tests' programs took 9 of 14 s), and
# unoptimized: what is checked here is the layout and the linking.
installed() {
  meson introspect "$t/b" --targets |
    python3 -c "import json, sys; print(*[f[len(sys.argv[1]) + 1:] for x in json.load(sys.stdin) if x['installed'] for f in x['filename']])" "$t/b"
}
if ! { meson setup "$t/b" "$src" -Dcuda=disabled --buildtype=debug --prefix="$prefix" && ninja -C "$t/b" $(installed) &&
       meson install -C "$t/b" --no-rebuild --quiet; } >"$t/build.log" 2>&1; then
  echo "1..1"; echo "not ok 1 - configure, build and install without CUDA"; sed 's/^/# /' "$t/build.log" | tail -20; exit 1
fi
where() {  # where NAME: the installed path of the build's file NAME
  meson introspect "$t/b" --installed | python3 -c "import json, sys; print(*[v for k, v in json.load(sys.stdin).items() if k.endswith('/$1')])"
}
lib=$(dirname "$(where libbaton.so.0.1.0)")
py=$(where baton.py)

check "libbaton.so is installed without CUDA, exporting the baton_* API only" \
  bash -c "test -e '$lib/libbaton.so' && nm -D --defined-only '$lib/libbaton.so' | awk '\$2 ~ /^[TDBRW]\$/ && \$3 !~ /^baton_/ {bad=1} \$3 ~ /^baton_verify@@BATON_0\\.1/ {v=1} END {exit bad || !v}'"
check "and no CUDA runtime is linked into it" bash -c "! ldd '$lib/libbaton.so' | grep -q cudart"

cat >"$t/app.c" <<'C'
#include <baton.h>
#include <stdio.h>
int main(int argc, char **argv) {
  char err[4096];
  baton_comm *comm = NULL;
  int dev = 0;
  if (baton_verify(argv[1], err, sizeof err) != baton_success) { printf("verify: %s\n", err); return 1; }
  if (baton_compile(argv[2], NULL, 0, argv[3], err, sizeof err) != baton_success) { printf("compile: %s\n", err); return 1; }
  if (baton_comm_init_all(&comm, 1, &dev) != baton_unsupported) return 2;
  if (baton_comm_destroy(NULL) != baton_invalid_argument) return 3;
  printf("%s: %s\n", baton_version(), baton_result_string(baton_unsupported));
  return argc == 4 ? 0 : 4;
}
C
flags=$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs baton)
check "a C program builds with baton.h and no CUDA headers, through pkg-config ($flags)" \
  bash -c "cc -Wall -Werror -o '$t/app' '$t/app.c' $flags"
ring=$prefix/share/baton/default/4/allreduce_4_ring_4r.xml
check "it verifies an installed program and compiles a script; a communicator is unsupported" \
  bash -c "LD_LIBRARY_PATH='$lib' '$t/app' '$ring' '$prefix/share/baton/algorithms/allgather_ring.lua' '$t/ag.xml' 2>'$t/warn' | grep -q 'unsupported' && test -s '$t/ag.xml'"
check "... and says why once, in baton's words" grep -q "built without CUDA" "$t/warn"

# The compiler in process: libbaton_compile beside libbaton, over the
# system's shared Lua; the baton program only where it does not load.
check "libbaton_compile.so is installed beside it, exporting its one versioned entry, over the shared liblua5.4" \
  bash -c "nm -D --defined-only '$lib/libbaton_compile.so.0' | awk '\$2 ~ /^[TDBRW]\$/ {n++; if (\$3 != \"cc_entry_compile@@BATON_COMPILE_0.1\") bad=1} END {exit bad || n != 1}' && ldd '$lib/libbaton_compile.so.0' | grep -q 'liblua5\.4\.so'"
bin=$prefix/bin/baton
mv "$bin" "$bin.away"
check "with the baton program gone, baton_compile compiles in process" \
  bash -c "rm -f '$t/ag2.xml'; LD_LIBRARY_PATH='$lib' '$t/app' '$ring' '$prefix/share/baton/algorithms/allgather_ring.lua' '$t/ag2.xml' 2>/dev/null | grep -q 'unsupported' && cmp -s '$t/ag.xml' '$t/ag2.xml'"
mv "$lib/libbaton_compile.so.0" "$lib/libbaton_compile.so.0.away"
check "with neither, it says so: no compiler loads and none is beside libbaton.so" \
  bash -c "LD_LIBRARY_PATH='$lib' '$t/app' '$ring' '$prefix/share/baton/algorithms/allgather_ring.lua' '$t/ag3.xml' 2>/dev/null | grep -q 'compile: baton_compile: neither libbaton_compile.so.0' && ! test -e '$t/ag3.xml'"
mv "$lib/libbaton_compile.so.0.away" "$lib/libbaton_compile.so.0"
check "with the library gone and the baton program back, it runs the program" \
  bash -c "mv '$lib/libbaton_compile.so.0' '$t/lc' && mv '$bin.away' '$bin' && LD_LIBRARY_PATH='$lib' '$t/app' '$ring' '$prefix/share/baton/algorithms/allgather_ring.lua' '$t/ag4.xml' 2>/dev/null | grep -q unsupported; rc=\$?; mv '$t/lc' '$lib/libbaton_compile.so.0'; test \$rc = 0 && cmp -s '$t/ag.xml' '$t/ag4.xml'"
test -e "$bin" || mv "$bin.away" "$bin"

check "the Python module is installed where the Python that built it looks under the prefix ($py)" \
  bash -c "test -f '$py' && case '$py' in '$prefix'/lib*/python3*) ;; *) exit 1 ;; esac"
check "it imports with that folder on the path and finds the installed libbaton.so by itself (no LD_LIBRARY_PATH)" \
  bash -c "cd '$t' && env -u LD_LIBRARY_PATH PYTHONPATH='$(dirname "$py")' python3 -c 'import baton, os; l = baton.load(); assert os.path.realpath(l._name).startswith(\"$lib\"), l._name; print(baton.version())'"
check "it compiles and verifies with the installed baton; a communicator raises BatonError (unsupported)" \
  bash -c "cd '$t' && PYTHONPATH='$(dirname "$py")' python3 -c '
import baton
p = baton.compile(\"$prefix/share/baton/algorithms/allgather_ring.lua\", \"ag4.xml\", ranks=4)
assert baton.verify(p)
try:
    baton.Comm.init_all([0])
    raise SystemExit(\"a communicator without CUDA\")
except baton.BatonError as e:
    assert e.code == 6, e
'"
tap_end
