#!/bin/bash
# Build an out-of-tree kernel module for the stack's guest kernel (mk/stack.sh): Linux 6.1 with
# the host's gcc 12 (bookworm), or Linux 6.12 with gcc 14 in the Debian 13 root (trixie).
#
#   mk/kbuild.sh DIR MODULE     e.g. mk/kbuild.sh guest-driver pib -> $OUT/pib.ko
#
# kbuild writes its objects next to the sources, so it runs in a shadow of DIR per stack
# ($OUT/kbuild/DIR: a symlink per source, and include/ beside it as in the clone): the stacks
# never share an object file, and switching stacks rebuilds nothing.  kbuild is incremental;
# a compiler warning fails the build.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
source "$TOP/mk/stack.sh"
OUT=${OUT:-$STACK_OUT}
DIR=$1 MOD=$2
say() { printf '[kbuild] %s\n' "$*" >&2; }

KROOT=$("$TOP/mk/fetch.sh" kernel)
KDIR=$KROOT/root/usr/src/linux-headers-$(cat "$KROOT/abi")-amd64
[ -f "$KDIR/Makefile" ] || { say "no kernel build tree at $KDIR"; exit 1; }

SHADOW=$OUT/kbuild/$DIR
mkdir -p "$SHADOW"
ln -sfn "$TOP/include" "$OUT/kbuild/include"
find "$SHADOW" -maxdepth 1 -type l -delete
# Sources only: a *.mod.c is modpost's output (vermagic, symbol CRCs), and one left in the
# source directory by an in-tree build would be linked into both stacks' shadows and then be
# written through by each, giving one kernel's module the other's version magic.
for f in "$TOP/$DIR"/Kbuild "$TOP/$DIR"/*.[ch]; do
  case $f in *.mod.c) continue ;; esac
  [ -f "$f" ] && ln -s "$f" "$SHADOW/$(basename "$f")"
done

log=$OUT/$MOD-build.log
say "$MOD.ko for $(cat "$KROOT/abi") ($PIB_STACK): make -C $KDIR M=$SHADOW W=1 modules"
if ! stack_run make -C "$KDIR" M="$SHADOW" W=1 modules > "$log" 2>&1; then
  cat "$log" >&2; say "build failed (log: $log)"; exit 1
fi
if grep -q 'warning:' "$log"; then
  grep 'warning:' "$log" >&2; say "compiler warnings (log: $log)"; exit 1
fi
# Copy only when changed, so that the image build sees a stable timestamp.
cmp -s "$SHADOW/$MOD.ko" "$OUT/$MOD.ko" 2>/dev/null || cp "$SHADOW/$MOD.ko" "$OUT/$MOD.ko"
say "ok: $OUT/$MOD.ko"
