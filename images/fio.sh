#!/bin/bash
# Build fio for the guest image (and print the binary's path): Debian 12's fio 3.33 from its
# upstream tarball (mk/fetch.sh fio), configured without the engines whose libraries Debian's
# package drags in (Ceph's rados/rbd, Gluster's gfapi, and the rest the guest has no use for)
# and without -march=native, since the binary runs in a guest under TCG.  The engines the tests
# and tools/bench use are built in: io_uring (fio's own, no liburing), psync, and verify.
#
# The build lives in the cache, keyed by the tarball's sha256 and by this script's, and is
# redone only when one of them changes.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${PIB_CACHE:-$HOME/.cache/pib}
SRC=$(bash "$TOP/mk/fetch.sh" fio)
key=$(cat "$SRC/.done" "$0" | sha256sum | cut -c1-12)
BLD=$CACHE/build/$(basename "$SRC")-$key
say() { printf '[fio] %s\n' "$*" >&2; }

if [ ! -f "$BLD/.done" ]; then
  say "build in $BLD"
  rm -rf "$BLD"
  cp -a "$SRC" "$BLD.tmp"
  (cd "$BLD.tmp" &&
   ./configure --disable-native --disable-numa --disable-rdma --disable-rados --disable-rbd \
       --disable-http --disable-gfapi --disable-libnfs --disable-pmem --disable-xnvme \
       --disable-libzbc --disable-tcmalloc --disable-dfs --disable-lex >configure.log 2>&1 &&
   make -j"$(nproc)" fio >make.log 2>&1) ||
    { say "failed: see $BLD.tmp/configure.log and make.log"; exit 1; }
  mv "$BLD.tmp" "$BLD"
  touch "$BLD/.done"
fi
echo "$BLD/fio"
