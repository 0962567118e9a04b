#!/usr/bin/env bash
# build_deps.sh -- every object nvcc builds knows the headers it read
# (unit suite, TAP): each nvcc target of the build writes a depfile, and
# ninja holds its list, so that editing any header rebuilds every object
# that includes it.  (A hand-kept header list once missed one: a kernel
# launcher was left built against an older struct layout than the kernels
# it launched, and launched the wrong one.)
#
# Usage: tests/build_deps.sh BUILD_DIR
# Skips where the build has no nvcc targets (no CUDA) or ninja is missing.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/tap.sh"
build=$1

if ! command -v ninja > /dev/null; then
  skip "nvcc objects list their headers" "no ninja on PATH"
  tap_end; exit
fi
# The build statements whose command runs nvcc, and whether they have a depfile.
targets=$(awk '/^build /{t=$2; sub(/:$/, "", t); dep=0; next}
               /^ DEPFILE = /{dep=1}
               /^ COMMAND = .*\/nvcc /{print t, dep}' "$build/build.ninja")
if [ -z "$targets" ]; then
  skip "nvcc objects list their headers" "no nvcc targets in this build"
  tap_end; exit
fi
count=$(wc -l <<<"$targets")
nodep=$(awk '$2 == 0 {print $1}' <<<"$targets")
verdict "$([ -z "$nodep" ] && echo 1 || echo 0)" "each of the $count nvcc targets writes a depfile" \
  "without one" "$nodep"
unknown=""
while read -r t _; do
  ninja -C "$build" -t deps "$t" 2>/dev/null | head -1 | grep -q "#deps [1-9].*(VALID)" || unknown="$unknown $t"
done <<<"$targets"
verdict "$([ -z "$unknown" ] && echo 1 || echo 0)" "ninja holds each nvcc object's headers" "none for" "$unknown"
launcher=$(awk '$1 ~ /ip_gpu\.o$/ {print $1}' <<<"$targets")
if [ -n "$launcher" ]; then
  verdict "$(ninja -C "$build" -t deps "$launcher" | grep -q 'interpreter/ip_gemm\.h$' && echo 1 || echo 0)" \
    "the interpreter's launcher (ip_gpu.o) is rebuilt when ip_gemm.h changes" "ip_gemm.h not among its headers"
fi
tap_end
