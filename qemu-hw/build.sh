#!/bin/bash
# Build the stack's QEMU (x86_64-softmmu) with the pib device overlaid from qemu-hw/: QEMU 7.2
# on the host (PIB_STACK=bookworm), QEMU 10.0 in the Debian 13 root (trixie; mk/stack.sh).
#
# The QEMU tree is Debian's source package, unpacked by mk/fetch.sh into the cache; our files
# and one-line hooks go into it through mk/qemu-overlay.sh, under a lock on the tree.
# Output: $OUT/qemu-system-x86_64 and the qtests in $OUT/qtest/ (pib-ctrl-test, ..., pib-bench;
# see pib_qtests), copied out of the shared build tree, so that another checkout building into
# the same cache cannot change them under running tests.  On trixie those are small scripts
# that run the binaries (in $OUT/root-bin/) with the root's loader and libraries (mk/root.sh
# wrap): the host's glibc is older.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
source "$TOP/mk/stack.sh"
OUT=${OUT:-$STACK_OUT}
SRC=$("$TOP/mk/fetch.sh" qemu)
say() { printf '[qemu] %s\n' "$*" >&2; }

source "$TOP/mk/qemu-overlay.sh"
BLD=$(pib_qemu_build_dir "$SRC")
# A build made in the Debian 13 root belongs to that root (its compiler and libraries).
[ "$STACK_ROOT" = 1 ] && BLD=$BLD-$(basename "$(bash "$TOP/mk/root.sh" path)")
qemu_overlay "$TOP" "$SRC"

if [ ! -f "$BLD/build.ninja" ]; then
  say "configure (once) in $BLD"
  mkdir -p "$BLD"
  (cd "$BLD" && stack_run "$SRC/configure" "${PIB_QEMU_CONFIGURE[@]}" >&2)
fi
qtests=($(pib_qtests "$TOP"))
targets=(qemu-system-x86_64 "${qtests[@]/#/tests/qtest/}")
say "ninja ${targets[*]} (first build: ~1500-2500 steps, a few minutes)"
# Show errors and warnings in full, progress every 100 steps.  ninja's own exit status decides
# (PIPESTATUS), not a dry run: qemu-version.h is always stale, so "-n" never says "no work".
set +e
stack_run ninja -C "$BLD" "${targets[@]}" |
  awk '/^\[[0-9]+\/[0-9]+\]/ {n++; if (n % 100 == 0) {print; fflush()}; next} {print; fflush()}' >&2
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { say "build failed (ninja exit $rc)"; exit 1; }
mkdir -p "$OUT/qtest"
# install_if_changed SRC DST: copy to a temporary name and rename, so a QEMU already running
# from DST keeps its (old) file.
install_if_changed() {
  [ -L "$2" ] && rm -f "$2"
  cmp -s "$1" "$2" 2>/dev/null || { cp "$1" "$2.tmp" && mv -f "$2.tmp" "$2"; }
}
mkdir -p "$OUT/qtest"
if [ "$STACK_ROOT" = 1 ]; then
  mkdir -p "$OUT/root-bin"
  for t in "${targets[@]}"; do
    [ -f "$BLD/$t" ] || continue
    install_if_changed "$BLD/$t" "$OUT/root-bin/$(basename "$t")"
    bash "$TOP/mk/root.sh" wrap "$OUT/root-bin/$(basename "$t")" "$OUT/${t#tests/}"
  done
else
  install_if_changed "$BLD/qemu-system-x86_64" "$OUT/qemu-system-x86_64"
  for t in "${qtests[@]}"; do install_if_changed "$BLD/tests/qtest/$t" "$OUT/qtest/$t"; done
fi
# $OUT/qtest/ holds exactly these qtests: none left over from an older layout would run.
for f in "$OUT"/qtest/*; do
  [[ " ${qtests[*]} " == *" $(basename "$f") "* ]] || rm -f "$f"
done
say "ok: $OUT/qemu-system-x86_64"
