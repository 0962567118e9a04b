#!/bin/sh
# install_sets.sh -- run by `meson install`: compiles the default algorithm
# set for each rank count given into DESTDIR/PREFIX/DATADIR_SUBDIR/N with the
# freshly built baton.   Usage: install_sets.sh BATON ALGORITHMS SUBDIR N...
set -eu
baton=$1 algs=$2 sub=$3
shift 3
for n in "$@"; do
  "$baton" set "$n" -q --algorithms "$algs" -o "$MESON_INSTALL_DESTDIR_PREFIX/$sub/$n"
done
