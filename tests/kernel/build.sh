#!/bin/bash
# Build the kernel-side test module (pib_ktest.ko: an in-kernel ULP on pib's kernel data
# path) for the guest kernel, into build/pib_ktest.ko.  The image builder puts build/pib_*.ko
# into the guest's /lib/modules/<abi>/extra.  A compiler warning fails the build.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$TOP/build}
say() { printf '[ktest] %s\n' "$*" >&2; }

KROOT=$("$TOP/mk/fetch.sh" kernel)
KDIR=$KROOT/root/usr/src/linux-headers-$(cat "$KROOT/abi")-amd64
mkdir -p "$OUT"
log=$OUT/ktest-build.log
if ! make -C "$KDIR" M="$TOP/tests/kernel" W=1 modules > "$log" 2>&1; then
  cat "$log" >&2; say "build failed"; exit 1
fi
if grep -q 'warning:' "$log"; then grep 'warning:' "$log" >&2; say "compiler warnings"; exit 1; fi
cmp -s "$TOP/tests/kernel/pib_ktest.ko" "$OUT/pib_ktest.ko" 2>/dev/null ||
  cp "$TOP/tests/kernel/pib_ktest.ko" "$OUT/pib_ktest.ko"
say "ok: $OUT/pib_ktest.ko"
