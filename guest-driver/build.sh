#!/bin/bash
# Build pib.ko for the guest kernel (Debian's 6.1; headers unpacked by mk/fetch.sh) and put it
# in build/pib.ko.  kbuild is incremental; a compiler warning fails the build.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$TOP/build}
say() { printf '[driver] %s\n' "$*" >&2; }

KROOT=$("$TOP/mk/fetch.sh" kernel)
KDIR=$KROOT/root/usr/src/linux-headers-$(cat "$KROOT/abi")-amd64
[ -f "$KDIR/Makefile" ] || { say "no kernel build tree at $KDIR"; exit 1; }

mkdir -p "$OUT"
log=$OUT/driver-build.log
say "make -C $KDIR M=$TOP/guest-driver W=1 modules"
if ! make -C "$KDIR" M="$TOP/guest-driver" W=1 modules 2>&1 | tee "$log" >&2; then
  say "build failed (log: $log)"; exit 1
fi
if grep -q 'warning:' "$log"; then
  say "compiler warnings (log: $log):"; grep 'warning:' "$log" >&2; exit 1
fi
# Copy only when changed, so that the image build sees a stable timestamp.
cmp -s "$TOP/guest-driver/pib.ko" "$OUT/pib.ko" 2>/dev/null || cp "$TOP/guest-driver/pib.ko" "$OUT/pib.ko"
say "ok: $OUT/pib.ko"
