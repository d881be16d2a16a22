#!/bin/bash
# Build QEMU's own fuzzer binary, qemu-fuzz-x86_64, with the pib device in it, for the
# generic-fuzz target (MMIO/PIO writes and DMA contents chosen by libFuzzer).
#
# The same overlay as qemu-hw/build.sh (mk/qemu-overlay.sh, under the same lock on the shared
# QEMU tree).  The build directory is separate, configured with clang,
# --enable-fuzzing and --enable-sanitizers (ASan + UBSan):
#   $PIB_CACHE/build/qemu-fuzz/qemu-fuzz-x86_64
# The first build compiles all of QEMU with clang and ASan: ~20 minutes on 2 cores.  It runs
# under `nice`, because the machine is shared.  Later builds only recompile what changed.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
SRC=$("$TOP/mk/fetch.sh" qemu)
BLD=${PIB_CACHE:-$HOME/.cache/pib}/build/qemu-fuzz
JOBS=${JOBS:-2}
say() { printf '[qemu-fuzz] %s\n' "$*" >&2; }

source "$TOP/mk/qemu-overlay.sh"
qemu_overlay "$TOP" "$SRC"

if [ ! -f "$BLD/build.ninja" ]; then
  command -v clang >/dev/null || { say "clang is missing (apt-get install clang libclang-rt-14-dev)"; exit 1; }
  say "configure (once) in $BLD"
  mkdir -p "$BLD"
  (cd "$BLD" && CC=clang CXX=clang++ "$SRC/configure" --cc=clang --cxx=clang++ \
      --target-list=x86_64-softmmu --without-default-features --disable-docs \
      --disable-werror --disable-install-blobs --enable-fuzzing --enable-sanitizers >&2)
fi
say "ninja qemu-fuzz-x86_64 (first build: ~1500 steps, ~20 minutes)"
set +e
nice -n 19 ninja -C "$BLD" -j "$JOBS" qemu-fuzz-x86_64 |
  awk '/^\[[0-9]+\/[0-9]+\]/ {n++; if (n % 100 == 0) {print; fflush()}; next} {print; fflush()}' >&2
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { say "build failed (ninja exit $rc)"; exit 1; }
say "ok: $BLD/qemu-fuzz-x86_64"
